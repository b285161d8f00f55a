#!/usr/bin/env bash
# Benchmark (not a test) of the standby-QP failover (issue #4), in one two-VM boot:
#   (i)   HA overhead: ha-net-driver --bw with HA_NCCL_ENABLE_STANDBY=1 vs 0 (interleaved rounds)
#   (ii)  stall excess of a failover: rail 0 pulled on the sender, on the receiver, and a black
#         hole (100 % loss, port up), each against an unfaulted stream of the same length
#   (iii) bandwidth on the standby after a failover vs ib_write_bw on the rail it failed over to
#   (iv)  host memory per comm with the standby vs single path (RSS delta of --comms N)
#   (ii b) the same for a fused device's member (issue #33): a stream on --fuse 0,1, rail 1 pulled
#   bench/failover-bench.sh [--rails 2|4] [--parts "overhead memory stall member backup"]
#     --parts P            only those parts (default all) -> results named failover-<parts>-<date>
#     --rails 2 (default)  -> bench/results/failover-<date>.{json,md,svg}, logs LOGDIR/failover-bench
#     --rails 4            -> bench/results/failover-4rails-<date>.{json,md,svg}, LOGDIR/failover-bench-4rails
#   (run-pair.sh --rails N: the plugin picks each connection's standby among the other rails)
# Environment: NCCL_HA_BENCH_ROUNDS (4), NCCL_HA_BENCH_BW_BYTES (96M), NCCL_HA_BENCH_STALL_SECONDS (12),
# NCCL_HA_BENCH_STALL_RUNS (1: faulted runs per stall case; the report gives their median excess),
# NCCL_HA_BENCH_COMMS (256), NCCL_HA_BUILD_DIR (build), NCCL_HA_BENCH_NO_BUILD=1 (use the build as is).
# Absolute figures are emulation artefacts (TCG); compare the ratios and differences measured in
# the same boot.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
RAILS=2
while (($#)); do
  case $1 in
    --rails) RAILS=${2:?--rails needs a value}; shift 2 ;;
    --rails=*) RAILS=${1#*=}; shift ;;
    --parts) export NCCL_HA_BENCH_PARTS=${2:?--parts needs a list}; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "failover-bench: unknown argument '$1' (usage: $0 [--rails 2|4] [--parts LIST])" >&2; exit 2 ;;
  esac
done
[[ $RAILS == 2 || $RAILS == 4 ]] || { echo "failover-bench: --rails must be 2 or 4 (got '$RAILS')" >&2; exit 2; }
TAG=''  # the default bed keeps its names
[[ $RAILS == 2 ]] || TAG=-${RAILS}rails
[[ -z ${NCCL_HA_BENCH_PARTS:-} ]] || TAG+=-$(echo $NCCL_HA_BENCH_PARTS | tr ' ' '-')
if [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
  bash "$REPO/scripts/setup.sh"
  cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" --target nccl-net-ha ha-net-driver
fi
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-$BUILD/vm-logs}
NAME=failover-bench$TAG
"$REPO/test/vm/run-pair.sh" --name "$NAME" --rails "$RAILS" --timeout 2400 -- "$REPO/bench/failover-bench.guest.sh"
stamp=$(date -u +%Y-%m-%d)
export NCCL_HA_BENCH_REV=${NCCL_HA_BENCH_REV:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}
python3 "$REPO/bench/failover_report.py" "$NCCL_HA_VM_LOGDIR/$NAME" "$REPO/bench/results/failover$TAG-$stamp"
