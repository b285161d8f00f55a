#!/usr/bin/env bash
# ctest unit.gpu_smoke: scripts/gpu-smoke.sh without a GPU. A --plugin that does not exist makes
# a piece missing on any machine, so the skip paths are deterministic: skip mode exits 0 with the
# "skipped:" line, --require exits 1, --help exits 0, a bad option or value exits 2, --dry-run
# prints the plan and runs (creates) nothing; and the log reading (busbw, failovers, memory path,
# verdict) on synthetic nccl-tests logs.
# usage: gpu_smoke_test.sh SCRIPT WORKDIR
set -u
SCRIPT=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
failures=0
NOPLUGIN=$WORK/none/libnccl-net-ha.so

# expect NAME WANT_RC PATTERN ARGS...: runs the script, checks its exit code and (if PATTERN is not
# empty) that its output (stdout + stderr) has a line matching PATTERN (grep -E).
expect() {
  local name=$1 want=$2 pat=$3 rc
  shift 3
  "$SCRIPT" "$@" >"$WORK/$name.out" 2>&1
  rc=$?
  if [[ $rc != "$want" ]]; then
    echo "FAIL $name: exit $rc, expected $want"; sed 's/^/    /' "$WORK/$name.out"; failures=$((failures + 1)); return
  fi
  if [[ -n $pat ]] && ! grep -Eq -- "$pat" "$WORK/$name.out"; then
    echo "FAIL $name: no line matching '$pat'"; sed 's/^/    /' "$WORK/$name.out"; failures=$((failures + 1)); return
  fi
  echo "ok   $name (exit $rc)"
}

expect skip 0 "^gpu-smoke: skipped: .*--plugin $NOPLUGIN: no such file" --plugin "$NOPLUGIN" --out "$WORK/out-skip"
expect require 1 "^gpu-smoke: FAIL \(--require\): missing: .*--plugin $NOPLUGIN" --require --plugin "$NOPLUGIN" --out "$WORK/out-req"
expect help 0 "^usage: scripts/gpu-smoke.sh" --help
expect bad-option 2 "unknown option '--bogus'" --bogus
expect bad-sizes 2 "--sizes wants MIN:MAX" --sizes 1M
expect bad-iters 2 "--iters wants a positive integer" --iters 0
expect missing-value 2 "--out needs a value" --out
expect dry-run 0 "NCCL_NET=IB .*all_reduce_perf" --dry-run --plugin "$NOPLUGIN" --launcher mpi --gpus 2 --out "$WORK/out-dry"
for pat in "^gpu-smoke: missing \(a real run would skip\): --plugin" "NCCL_NET_PLUGIN=ha NCCL_NET=HA .*NCCL_NET_GDR_LEVEL=LOC" \
  "NCCL_DMABUF_ENABLE=0 HA_NCCL_DMABUF_ENABLE=0" "mpirun -np 2 bash .*/rank.sh" "ip link set [^ ]+ down|ha-failover +- .*skipped" \
  "^ha-failover "; do
  grep -Eq -- "$pat" "$WORK/dry-run.out" || { echo "FAIL dry-run: no line matching '$pat'"; failures=$((failures + 1)); }
done
if [[ -e $WORK/out-dry || -e $WORK/out-skip ]]; then echo "FAIL: a dry run or a skipped run created its --out directory"; failures=$((failures + 1)); fi

# The log reading, on synthetic logs (the functions of the sourced script).
cat >"$WORK/ha.log" <<'EOF'
NCCL INFO NET/HA: nccl-ha 0.1.0 (net API v6-v12): HA on; 2 device(s): ...; ptrSupport HOST|CUDA; progress thread ncclHaProgress
NCCL INFO DMA-BUF is available on GPU device 0
NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/HA/0/GDRDMA
NCCL WARN NET/HA: failover of send comm 0x1 gsmoke_rxe0:1 -> gsmoke_rxe1:1: cause port error on gsmoke_rxe0:1, replayed 5 message(s), stall 7.1 ms
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
   268435456      67108864     float     sum      -1   5000.0   53.69   53.69      0   4990.0   53.79   53.79      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 53.74
EOF
# shellcheck disable=SC1090
got=$(
  source "$SCRIPT" || exit 1
  verdict f HA gpu "" 0 "$WORK/ha.log" fault 1
  verdict n HA gpu 1 0 "$WORK/ha.log" "" 0
  verdict h HA host "" 0 "$WORK/ha.log" "" 0
  echo "bw=$(busbw_of "$WORK/ha.log") t=$(time_us_of "$WORK/ha.log") fo=${R_FO[f]} path=${R_PATH[f]}|${R_PATH[n]}"
  echo "f=${R_VERDICT[f]}"
  echo "n=${R_VERDICT[n]}"
  echo "h=${R_VERDICT[h]}"
)
want="bw=53.74 t=5000.0 fo=1 path=GDR peermem|GDR peermem
f=PASS
n=FAIL: 1 unexpected failover(s)
h=FAIL: GDR used although NCCL_NET_GDR_LEVEL=LOC; 1 unexpected failover(s)"
if [[ $got == "$want" ]]; then echo "ok   log reading"; else
  echo "FAIL log reading:"; diff <(echo "$want") <(echo "$got") | sed 's/^/    /'; failures=$((failures + 1)); fi

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all gpu-smoke checks passed"
