#!/usr/bin/env bash
# Benchmark (not a test): the plugin's data path BEFORE and AFTER a change, in one two-VM boot.
#   bench/control-plane-bench.sh [--baseline REV]   -> bench/results/control-plane-<date>.{json,md}
# "after" = the plugin of this working tree (built in NCCL_HA_BUILD_DIR, default build/);
# "before" = the plugin at REV (default 0c6fa50, the commit before the control plane moved onto
# the progress thread), from a detached worktree $BUILD/baseline-src built in $BUILD/baseline-build
# (under the build dir, not /tmp: the guests do not see the host's /tmp). Both are driven by the
# CURRENT ha-net-driver (same plugin ABI). HA on (HA_NCCL_ENABLE_STANDBY=1), --dev 0 = rxe0 with its
# standby on rxe1, handshake over eth2. Rounds interleave before/after/after/before.
# Environment:
#   NCCL_HA_BASELINE_REV      the "before" revision (--baseline wins)             0c6fa50
#   NCCL_HA_BENCH_ROUNDS      rounds, each before/after/after/before               3 (quick: 1)
#   NCCL_HA_BENCH_BW_BYTES    --bw-bytes per size (64K, 1M, 4M) and direction      128M (quick: 16M)
#   NCCL_HA_BENCH_LAT_ITERS   --pingpong --iters (8 B and 64 KiB)                  1000 (quick: 200)
#   NCCL_HA_BENCH_RETRIES     failed driver runs retried (each kept and listed)    0
#   NCCL_HA_BENCH_QUICK=1     the quick defaults above (a pipeline check, not a measurement)
#   NCCL_HA_BENCH_NO_BUILD=1  use both builds as they are
#   NCCL_HA_BENCH_OUT         output prefix    bench/results/control-plane-<date>
#   NCCL_HA_BENCH_TIMEOUT     run-pair --timeout (s)                                3600
#   NCCL_HA_BUILD_DIR         build dir (build/)
# Absolute figures are emulation artefacts (TCG); compare before and after from the same boot.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
REV=${NCCL_HA_BASELINE_REV:-0c6fa50}
while (($#)); do
  case $1 in
    --baseline) REV=${2:?--baseline needs a revision}; shift 2 ;;
    --baseline=*) REV=${1#*=}; shift ;;
    -h | --help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "control-plane-bench: unknown argument '$1' (usage: $0 [--baseline REV])" >&2; exit 2 ;;
  esac
done
source "$REPO/bench/baseline-lib.sh"
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
LOAD_AT_START=$(uptime)
export NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-$BUILD/vm-logs}
NAME=control-plane-bench
LOGDIR=$NCCL_HA_VM_LOGDIR/$NAME
bench_build_baseline "$REPO" "$BUILD" "$REV" control-plane-bench  # REV_HASH BEFORE_SO AFTER_SO DRIVER
CUR_DESC=$(git -C "$REPO" describe --always --dirty)
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_CP_BEFORE_PLUGIN=$BEFORE_SO NCCL_HA_CP_AFTER_PLUGIN=$AFTER_SO
STAMP=$(date -u +%Y-%m-%d)
OUT=${NCCL_HA_BENCH_OUT:-$REPO/bench/results/control-plane-$STAMP}
META=$BUILD/$NAME.meta.json
CMD=$(printf '%q ' "${BASH_SOURCE[0]}" --baseline "$REV")
bench_write_meta "$META" "$REPO" "$BUILD" "$REV" "${CMD% }"
echo "control-plane-bench: before = $REV ($REV_HASH) $BEFORE_SO"
echo "control-plane-bench: after  = $CUR_DESC $AFTER_SO"
echo "control-plane-bench: host load at start: $LOAD_AT_START"
if ! "$REPO/test/vm/run-pair.sh" --name "$NAME" --timeout "${NCCL_HA_BENCH_TIMEOUT:-3600}" -- \
  "$REPO/bench/control-plane-bench.guest.sh"; then
  bench_die "the VM run failed: see $LOGDIR/summary.txt and $LOGDIR/{a,b}/stderr.log"
fi
bench_meta_end "$META"
python3 "$REPO/bench/control_plane_report.py" "$LOGDIR" "$META" "$OUT"
