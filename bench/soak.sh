#!/usr/bin/env bash
# Soak (not a test, not in CI's time budget; issue #10 item 7): two VMs, one verified stream in
# both directions for --minutes M (default 30) through the plugin, a fault every 20-60 s on VM a
# (rail down, flap, black hole, standby death, recovery; random but reproducible from --seed),
# and comm churn (--churn N pairs opened and closed while the stream flows; default 1000 per 30
# minutes). Resources (fds, threads, QPs, MRs, RSS) after the stream are compared with after
# connect, and fds/threads again after finalize.
#
#   bench/soak.sh [--minutes M] [--seed S] [--churn N] [--out PREFIX] [--trial]
#
#   --minutes M   length of the stream (default 30)
#   --seed S      fault schedule seed (default: the current time; printed and recorded)
#   --churn N     extra comm pairs over the run (default 1000 * M / 30, at least 1)
#   --out PREFIX  results prefix (default bench/results/soak-<date>, with --trial soak-trial-<date>)
#   --trial       name the results as a trial run
#
# Environment: NCCL_HA_BUILD_DIR (build), NCCL_HA_BENCH_NO_BUILD=1 (use the build as is),
# NCCL_HA_SOAK_SETTLE_S (60: how long a fault waits for the ring to be protected),
# NCCL_HA_SOAK_CHURN_RETRY (1: a churn connection refused by the plugin is retried and counted; 0:
# it ends the run, as in NCCL), HA_NCCL_*
# settings (passed to both guests; HA_NCCL_ENABLE_FAILBACK defaults to 1 here), and the schedule's
# knobs NCCL_HA_SOAK_MAX_FAILOVERS (8 failover-causing faults per 600 s; the plugin's
# HA_NCCL_MAX_RETRIES is 10), NCCL_HA_SOAK_QUIET_S (45: everything recovered this long before the
# end). Logs: $NCCL_HA_VM_LOGDIR/soak (build/vm-logs/soak). Exit status: the run's (0: the stream
# survived every fault, every byte and every check passed).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
MINUTES=30 SEED='' CHURN='' OUT='' TRIAL=0
usage() { sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while (($#)); do
  case $1 in
    --minutes) MINUTES=${2:?--minutes needs a value}; shift 2 ;;
    --seed) SEED=${2:?--seed needs a value}; shift 2 ;;
    --churn) CHURN=${2:?--churn needs a value}; shift 2 ;;
    --out) OUT=${2:?--out needs a value}; shift 2 ;;
    --trial) TRIAL=1; shift ;;
    -h | --help) usage ;;
    *) echo "soak.sh: unknown option '$1'" >&2; usage ;;
  esac
done
if ! [[ $MINUTES =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v m="$MINUTES" 'BEGIN { exit !(m >= 2) }'; then
  echo "soak.sh: --minutes must be a number >= 2" >&2
  exit 2
fi
[[ -z $SEED ]] && SEED=$(date +%s)
[[ $SEED =~ ^[0-9]+$ ]] || { echo "soak.sh: --seed must be a whole number" >&2; exit 2; }
[[ -z $CHURN ]] && CHURN=$(awk -v m="$MINUTES" 'BEGIN { n = int(1000 * m / 30 + 0.5); print (n < 1 ? 1 : n) }')
[[ $CHURN =~ ^[0-9]+$ ]] || { echo "soak.sh: --churn must be a whole number" >&2; exit 2; }
stamp=$(date -u +%Y-%m-%d)
prefix=soak-
((TRIAL)) && prefix=soak-trial-
[[ -n $OUT ]] || OUT=$REPO/bench/results/$prefix$stamp

if [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
  bash "$REPO/scripts/setup.sh"
  cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" --target nccl-net-ha ha-net-driver
fi
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-$BUILD/vm-logs}
RUNDIR=$NCCL_HA_VM_LOGDIR/soak
mkdir -p "$RUNDIR"
# The guests see the host's file system read-only: the schedule lives next to the run's logs.
SCHEDULE=$RUNDIR/schedule.txt
python3 "$REPO/bench/soak_schedule.py" --seed "$SEED" --minutes "$MINUTES" \
  --max-failovers "${NCCL_HA_SOAK_MAX_FAILOVERS:-8}" --quiet "${NCCL_HA_SOAK_QUIET_S:-45}" >"$SCHEDULE"
echo "soak: $MINUTES min, seed $SEED, churn $CHURN pairs; schedule $SCHEDULE:"
grep -v '^#' "$SCHEDULE" | awk '{ printf "  +%6.1f s  %s\n", $1 / 1000, substr($0, index($0, $2)) }'

# Boot + setup + the stream + the resource settling + the result exchange, with room to spare.
timeout=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 + 1200 }')
rc=0
echo "start $(cut -d' ' -f1-3 /proc/loadavg)" >"$RUNDIR/loadavg.txt"
NCCL_HA_SOAK_MINUTES=$MINUTES NCCL_HA_SOAK_CHURN=$CHURN NCCL_HA_SOAK_SCHEDULE=$SCHEDULE \
  "$REPO/test/vm/run-pair.sh" --name soak --timeout "$timeout" -- "$REPO/bench/soak.guest.sh" || rc=$?

echo "end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RUNDIR/loadavg.txt"
export NCCL_HA_BENCH_REV=${NCCL_HA_BENCH_REV:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}
mkdir -p "$(dirname "$OUT")"
report_args=(--seed "$SEED" --minutes "$MINUTES" --churn "$CHURN")
((TRIAL)) && report_args+=(--trial)
python3 "$REPO/bench/soak_report.py" "$RUNDIR" "$OUT" "${report_args[@]}" || { ((rc)) || rc=1; }
echo "soak: results in $OUT.json and $OUT.md; logs in $RUNDIR (exit $rc)"
exit "$rc"
