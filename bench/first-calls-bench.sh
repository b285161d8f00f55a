#!/usr/bin/env bash
# Benchmark (not a test): the longest plugin call right after connect, HA on against HA off
# (HA_NCCL_ENABLE_STANDBY=0), for every net API version the plugin exports, in one two-VM boot.
#   bench/first-calls-bench.sh [--baseline REV]   -> bench/results/first-calls-<date>.{json,md}
# --baseline REV: also the plugin at REV with HA on ("before", built by bench/baseline-lib.sh),
# driven by the same ha-net-driver, its place in the order turning with the others'.
# Each run is a fresh driver process: init, one connection on rail 0, its buffers registered (one
# regMr per direction, 32 MiB each, resident before: the driver maps them populated, as NCCL's
# are), then at once 32 messages of 4 MiB both ways, 8 in flight; with HA on, the standby pair on
# rail 1 comes up meanwhile. The driver records every entry point's longest call. The modes'
# order turns by round and version, so all see the same emulator drift; one warm-up run of each
# first, not counted. Absolute figures are TCG's.
# Environment: NCCL_HA_BENCH_ROUNDS (3), NCCL_HA_BENCH_APIS ("6 7 8 9 10 11 12"),
# NCCL_HA_BENCH_ARGS (the driver's stream), NCCL_HA_BENCH_WARMUP (the warm-ups' order: the modes'),
# NCCL_HA_BENCH_OUT (output prefix),
# NCCL_HA_BENCH_NO_BUILD=1, NCCL_HA_BUILD_DIR (build/).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
REV=
while (($#)); do
  case $1 in
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    --baseline) REV=${2:?--baseline needs a revision}; shift 2 ;;
    *) echo "first-calls-bench: unknown argument '$1' (usage: $0 [--baseline REV])" >&2; exit 2 ;;
  esac
done
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
NAME=first-calls-bench
source "$REPO/bench/baseline-lib.sh"
if [[ -n $REV ]]; then
  bench_build_baseline "$REPO" "$BUILD" "$REV" first-calls-bench  # REV_HASH BEFORE_SO
  export NCCL_HA_BENCH_BEFORE_PLUGIN=$BEFORE_SO NCCL_HA_BENCH_BEFORE_REV=$REV
  echo "first-calls-bench: before = $REV ($REV_HASH) $BEFORE_SO"
elif [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
  bench_build_tree "$REPO" "$BUILD"
fi
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=$BUILD/vm-logs
"$REPO/test/vm/run-pair.sh" --name "$NAME" --timeout 3600 -- "$REPO/bench/first-calls-bench.guest.sh"
stamp=$(date -u +%Y-%m-%d)
python3 "$REPO/bench/first_calls_report.py" "$BUILD/vm-logs/$NAME" "${NCCL_HA_BENCH_OUT:-$REPO/bench/results/first-calls-$stamp}"
