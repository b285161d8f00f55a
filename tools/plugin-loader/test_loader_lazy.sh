#!/usr/bin/env bash
# ctest unit.loader_lazy / unit.loader_lazy_null: the tools' one loader (tools/plugin-loader)
# through both of its users, ha-net-driver (two ranks on 127.0.0.1) and ha-ping --list, against
# libnccl-net-fake-lazy.so, whose ncclNetPlugin_v10 has only `name` and `init` until init fills
# the rest (as nccl-rdma-sharp-plugins does).
#   ok:   the table is taken (NCCL calls init before it reads the other slots): exit 0 everywhere.
#   null: init leaves slots NULL (FAKE_LAZY_NULL): the driver exits 3 (plugin error), ha-ping
#         --list 1, both naming the NULL slots.
# usage: test_loader_lazy.sh ok|null DRIVER HA_PING LIBFAKE_LAZY WORKDIR
set -u
MODE=$1 DRIVER=$2 HA_PING=$3 LAZY=$4 WORK=$5
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
. "$(dirname "$0")/../ha-net-driver/test_pair.sh"

# list NAME EXPECT [ha-ping args...]: ha-ping --list --plugin $LAZY; stdout/stderr in $WORK/NAME.*
list() {
  local name=$1 want=$2
  shift 2
  "$HA_PING" --list --plugin "$LAZY" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: ha-ping --list exit $rc, expected $want"
    cat "$WORK/$name.out" "$WORK/$name.err"
    failures=$((failures + 1)); return
  fi
  echo "ok   $name (exit $rc)"
}

# expect_in NAME FILE TEXT: TEXT (fixed string) is in FILE.
expect_in() {
  grep -qF -- "$3" "$2" || { echo "FAIL $1: '$3' not in $2"; cat "$2"; failures=$((failures + 1)); }
}

case $MODE in
ok)
  run_pair lazy 0 0 "$LAZY" --messages 20 --sizes 0,4K,64K --comms 2 --timeout 30
  check_json lazy 'r["ok"] and r["api_version"] == 10 and r["net_name"] == "Fake"' \
    'r["exported_symbols"] == ["ncclNetPlugin_v10"] and r["calls"]["init"]["count"] == 1' \
    'r["integrity"]["messages_received"] == 20 and r["integrity"]["mismatches"] == 0' \
    'r["comms_test"]["messages_ok"] == 2 and r["calls"]["irecvConsumed"]["count"] > 0'
  list list 0
  expect_in list "$WORK/list.out" "(Fake, ncclNetPlugin_v10)"
  expect_in list "$WORK/list.out" "dev 0: "
  list list-json 0 --json
  expect_in list-json "$WORK/list-json.out" '"ok":true'
  ;;
null)
  want="ncclNetPlugin_v10 v10 table has NULL mandatory slots: devices, isend"
  RANK0_ENV=FAKE_LAZY_NULL=devices,isend RANK1_ENV=FAKE_LAZY_NULL=isend,devices \
    run_pair lazy-null 3 3 "$LAZY" --messages 10 --timeout 30
  check_json lazy-null 'r["exit_code"] == 3 and r["phase"] == "init"' \
    "r[\"errors\"][0] == \"init: $want\"" \
    'r["calls"]["init"]["count"] == 1 and r["calls"]["init"]["errors"] == 0 and "devices" not in r["calls"]'
  expect_in lazy-null "$WORK/lazy-null/rank0.log" "$want"
  FAKE_LAZY_NULL=getProperties list list-null 1
  expect_in list-null "$WORK/list-null.err" "ha-ping: --list: plugin ncclNetPlugin_v10 v10 table has NULL mandatory slots: getProperties"
  FAKE_LAZY_NULL=getProperties list list-null-json 1 --json
  expect_in list-null-json "$WORK/list-null-json.out" '"ok":false'
  expect_in list-null-json "$WORK/list-null-json.out" "NULL mandatory slots: getProperties"
  ;;
*)
  echo "usage: $0 ok|null DRIVER HA_PING LIBFAKE_LAZY WORKDIR"; exit 2 ;;
esac

if [ "$failures" -ne 0 ]; then
  echo "test_loader_lazy $MODE: $failures failure(s); logs in $WORK"
  exit 1
fi
echo "test_loader_lazy $MODE: all scenarios passed"
