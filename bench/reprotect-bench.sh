#!/usr/bin/env bash
# Benchmark (not a test): how long a port event waits before the failover of the comms it hits
# starts, while those comms re-protect at once - BEFORE and AFTER a change, in one two-VM boot.
#   bench/reprotect-bench.sh [--baseline REV]   -> bench/results/reprotect-<date>.{json,md}
# "after" = the plugin of this working tree (NCCL_HA_BUILD_DIR, default build/); "before" = the
# plugin at REV (default 76bad88: re-protection's verbs work still ran on the progress thread),
# built from a detached worktree under the build dir (bench/baseline-lib.sh). Both driven by the
# current ha-net-driver. Scenario and figures: bench/reprotect-bench.guest.sh, bench/reprotect_report.py.
# Environment:
#   NCCL_HA_BASELINE_REV          the "before" revision (--baseline wins)                  76bad88
#   NCCL_HA_BENCH_ROUNDS          rounds, each before/after/after/before                    3
#   NCCL_HA_BENCH_COMMS           comm pairs per run (each rank: N send + N recv comms)     128
#   NCCL_HA_BENCH_FAULT_DELAY_MS  rail 1 ACTIVE again -> rail 0 down                        300
#   NCCL_HA_BENCH_HOLD            --comms-hold seconds (must cover the ~20 s of faults)      40
#   NCCL_HA_BENCH_NO_BUILD=1      use both builds as they are
#   NCCL_HA_BENCH_OUT             output prefix    bench/results/reprotect-<date>
#   NCCL_HA_BENCH_TIMEOUT         run-pair --timeout (s)                                    3600
#   NCCL_HA_BUILD_DIR             build dir (build/)
# Absolute figures are emulation artefacts (TCG, 1 vCPU per VM); compare before and after from the
# same boot, on a quiet host.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
REV=${NCCL_HA_BASELINE_REV:-76bad88}
while (($#)); do
  case $1 in
    --baseline) REV=${2:?--baseline needs a revision}; shift 2 ;;
    --baseline=*) REV=${1#*=}; shift ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "reprotect-bench: unknown argument '$1' (usage: $0 [--baseline REV])" >&2; exit 2 ;;
  esac
done
source "$REPO/bench/baseline-lib.sh"
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
export NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-$BUILD/vm-logs}
NAME=reprotect-bench
LOGDIR=$NCCL_HA_VM_LOGDIR/$NAME
bench_build_baseline "$REPO" "$BUILD" "$REV" reprotect-bench  # REV_HASH BEFORE_SO AFTER_SO DRIVER
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_RP_BEFORE_PLUGIN=$BEFORE_SO NCCL_HA_RP_AFTER_PLUGIN=$AFTER_SO
OUT=${NCCL_HA_BENCH_OUT:-$REPO/bench/results/reprotect-$(date -u +%Y-%m-%d)}
META=$BUILD/$NAME.meta.json
CMD=$(printf '%q ' "${BASH_SOURCE[0]}" --baseline "$REV")
bench_write_meta "$META" "$REPO" "$BUILD" "$REV" "${CMD% }"
echo "reprotect-bench: before = $REV ($REV_HASH) $BEFORE_SO"
echo "reprotect-bench: after  = $(git -C "$REPO" describe --always --dirty) $AFTER_SO"
echo "reprotect-bench: host load at start: $(uptime)"
if ! "$REPO/test/vm/run-pair.sh" --name "$NAME" --timeout "${NCCL_HA_BENCH_TIMEOUT:-3600}" -- \
  "$REPO/bench/reprotect-bench.guest.sh"; then
  bench_die "the VM run failed: see $LOGDIR/summary.txt and $LOGDIR/{a,b}/stderr.log"
fi
bench_meta_end "$META"
mkdir -p "$(dirname "$OUT")"
python3 "$REPO/bench/reprotect_report.py" "$LOGDIR" "$META" "$OUT"
