#!/usr/bin/env bash
# ctest unit.driver_fake: ha-net-driver against the loopback fake plugins (v10 and v8), both
# ranks on 127.0.0.1. Checks exit codes and the JSON reports of every scenario.
# usage: test_driver_fake.sh DRIVER LIBFAKE_V10 LIBFAKE_V8 WORKDIR
set -u
DRIVER=$1 FAKE10=$2 FAKE8=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
failures=0
have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

# run_pair NAME EXPECT0 EXPECT1 PLUGIN [driver args...]; RANK0_ENV / RANK1_ENV: extra env.
run_pair() {
  local name=$1 want0=$2 want1=$3 plugin=$4
  shift 4
  local dir=$WORK/$name
  mkdir -p "$dir"
  env ${RANK0_ENV:-} "$DRIVER" --plugin "$plugin" --rank 0 --listen-port 0 --port-file "$dir/port" \
    --json "$dir/rank0.json" "$@" 2>"$dir/rank0.log" &
  local pid0=$! i
  for i in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
  if [ ! -s "$dir/port" ]; then
    echo "FAIL $name: rank 0 never wrote its port"; kill "$pid0" 2>/dev/null; wait "$pid0"
    failures=$((failures + 1)); return
  fi
  env ${RANK1_ENV:-} "$DRIVER" --plugin "$plugin" --rank 1 --peer "127.0.0.1:$(cat "$dir/port")" \
    --json "$dir/rank1.json" "$@" 2>"$dir/rank1.log"
  local rc1=$?
  wait "$pid0"
  local rc0=$?
  if [ "$rc0" != "$want0" ] || [ "$rc1" != "$want1" ]; then
    echo "FAIL $name: exit codes rank0=$rc0 rank1=$rc1, expected $want0/$want1 (logs in $dir)"
    tail -n 15 "$dir/rank0.log" "$dir/rank1.log"
    failures=$((failures + 1)); return
  fi
  echo "ok   $name (exit $rc0/$rc1)"
}

# check_json NAME PYTHON-EXPR...: each expression is evaluated with r = the report of each rank.
check_json() {
  local name=$1
  shift
  [ "$have_python" = 1 ] || return 0
  local rank
  for rank in 0 1; do
    python3 - "$WORK/$name/rank$rank.json" "$@" <<'PY' || { echo "FAIL $name: rank $rank report"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
bad = [e for e in sys.argv[2:] if not eval(e, {}, {"r": r})]
for e in bad:
    print("  report check failed:", e)
sys.exit(1 if bad else 0)
PY
  done
}

SIZES=0,1,8,4K,64K,1M,4M

RANK0_ENV=FAKE_RETRY_EVERY=5 RANK1_ENV=FAKE_RETRY_EVERY=7 \
  run_pair v10-full 0 0 "$FAKE10" --sizes $SIZES --group 4 --inflight 8 --messages 140 --optional-recv \
  --pingpong --iters 20 --bw --bw-messages 16 --comms 16 --timeout 30
check_json v10-full 'r["ok"] and r["api_version"] == 10' \
  'r["integrity"]["messages_received"] == 140 and r["integrity"]["mismatches"] == 0' \
  'r["integrity"]["size_errors"] == 0 and r["integrity"]["overruns"] == 0' \
  'r["integrity"]["isend_retries"] > 0 and r["integrity"]["flush"] == "completed"' \
  'len(r["latency"]) == 7 and all(l["median_us"] > 0 for l in r["latency"])' \
  'len(r["bandwidth"]) == 7 and all(b["mib_s"] > 0 for b in r["bandwidth"] if b["size"] > 0)' \
  'r["comms_test"]["n"] == 16 and r["comms_test"]["fds_returned"] and r["comms_test"]["messages_ok"] == 16' \
  'r["resources"]["after_close"]["fds"] == r["resources"]["before_init"]["fds"]' \
  'r["calls"]["isend"]["count"] > 0 and r["calls"]["irecvConsumed"]["count"] > 0' \
  'r["properties"]["maxRecvs"] == 8 and r["peer_ok"]'

run_pair v8-full 0 0 "$FAKE8" --sizes $SIZES --group 4 --inflight 8 --messages 70 --test-order all \
  --pingpong --iters 10 --bw --bw-messages 16 --comms 4 --timeout 30
check_json v8-full 'r["ok"] and r["api_version"] == 8 and r["exported_symbols"] == ["ncclNetPlugin_v8"]' \
  'r["integrity"]["messages_received"] == 70 and r["integrity"]["mismatches"] == 0' \
  'r["properties"]["regIsGlobal"] == 0 and r["properties"]["maxP2pBytes"] is None' \
  'r["comms_test"]["fds_returned"] and "irecvConsumed" not in r["calls"]'

RANK1_ENV=FAKE_CORRUPT=1 run_pair corrupt 1 1 "$FAKE10" --sizes $SIZES --group 4 --messages 70 --timeout 30
check_json corrupt 'not r["ok"] and r["exit_code"] == 1' \
  '(r["rank"] == 1) == (r["integrity"]["mismatches"] == 1 and r["integrity"]["mismatched_bytes"] == 1)' \
  'r["rank"] == 1 or r["peer_ok"] is False'

run_pair api-missing 3 3 "$FAKE10" --api 9 --messages 10 --timeout 30
check_json api-missing 'r["exit_code"] == 3 and "ncclNetPlugin_v9" in r["errors"][0]'

if [ "$failures" -ne 0 ]; then
  echo "unit.driver_fake: $failures failure(s); logs in $WORK"
  exit 1
fi
echo "unit.driver_fake: all scenarios passed"
