#!/usr/bin/env bash
# Benchmark (not a test): what HA costs per connection, and how failover and re-protection scale
# with the number of connections (issue #21), on the two-VM bed, in one boot.
#   bench/scale-bench.sh [--rails 2|4] [--sizes "16 64 256 1024"]
#       -> bench/results/scale-<date>[-4rails].{json,md,svg}
# For each N (comm pairs per rank, i.e. N send + N receive comms in each process) the plugin of the
# build dir runs with HA on and off (bench/scale-bench.guest.sh): connect time per comm, idle CPU
# per thread over 10 s with no plugin call, RSS, fds, threads, QPs, CQs, MRs; with HA on, a's rail 0
# down for 5 s: the failover spread (first to last comm resumed) and, once rail 0 is ACTIVE again,
# the time until every comm has a standby again. Figures: bench/scale_report.py.
# Environment:
#   NCCL_HA_BENCH_SIZES        comm pairs per rank, space separated             16 64 256 1024
#   NCCL_HA_BENCH_VARIANTS     on off (HA_NCCL_ENABLE_STANDBY=1 / 0)             on off
#   NCCL_HA_BENCH_MEM          MB of memory per guest                            3072
#   NCCL_HA_BENCH_TIMEOUT      run-pair --timeout (s)                            7200
#   NCCL_HA_BENCH_OUT          output prefix        bench/results/scale-<date>[-4rails]
#   NCCL_HA_BENCH_NO_BUILD=1   use the build dir as it is
#   NCCL_HA_BUILD_DIR          build dir (build/)
#   (the guest's NCCL_HA_BENCH_SETTLE / _SAMPLE / _DOWN / _REPROTECT_MAX / _PERF: scale-bench.guest.sh)
# Absolute figures are emulation artefacts (TCG, one vCPU per VM); the growth with N is the result.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
RAILS=2
while (($#)); do
  case $1 in
    --rails) RAILS=${2:?--rails needs 2 or 4}; shift 2 ;;
    --sizes) export NCCL_HA_BENCH_SIZES=${2:?--sizes needs a list}; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "scale-bench: unknown argument '$1' (usage: $0 [--rails 2|4] [--sizes LIST])" >&2; exit 2 ;;
  esac
done
[[ $RAILS == 2 || $RAILS == 4 ]] || { echo "scale-bench: --rails must be 2 or 4" >&2; exit 2; }
for n in ${NCCL_HA_BENCH_SIZES:-16 64 256 1024}; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "scale-bench: sizes must be whole numbers > 0 (got '$n')" >&2; exit 2; }
done
if [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
  bash "$REPO/scripts/setup.sh"
  cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
  nice -n 10 cmake --build "$BUILD" -j2 --target nccl-net-ha ha-net-driver
fi
BUILD=$(cd "$BUILD" && pwd)
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-$BUILD/vm-logs}
suffix=''
[[ $RAILS == 4 ]] && suffix=-4rails
NAME=scale-bench$suffix
LOGDIR=$NCCL_HA_VM_LOGDIR/$NAME
OUT=${NCCL_HA_BENCH_OUT:-$REPO/bench/results/scale-$(date -u +%Y-%m-%d)$suffix}
META=$BUILD/$NAME.meta.json
M_CMD=$(printf '%q ' "${BASH_SOURCE[0]}" --rails "$RAILS") M_REV=$(git -C "$REPO" describe --always --dirty) \
  M_LOAD=$(uptime) M_RAILS=$RAILS python3 - "$META" <<'EOF'
import json, os, sys
e = os.environ
json.dump({"command": e["M_CMD"].strip(), "revision": e["M_REV"], "rails": int(e["M_RAILS"]),
           "host_nproc": os.cpu_count(), "host_load_at_start": e["M_LOAD"].strip(),
           "env": {k: v for k, v in sorted(e.items()) if k.startswith(("NCCL_HA_BENCH_", "HA_NCCL_"))}},
          open(sys.argv[1], "w"), indent=2)
EOF
echo "scale-bench: $(git -C "$REPO" describe --always --dirty), $RAILS rails, sizes ${NCCL_HA_BENCH_SIZES:-16 64 256 1024}; host load: $(uptime)"
if ! "$REPO/test/vm/run-pair.sh" --name "$NAME" --rails "$RAILS" --mem "${NCCL_HA_BENCH_MEM:-3072}" \
  --timeout "${NCCL_HA_BENCH_TIMEOUT:-7200}" -- "$REPO/bench/scale-bench.guest.sh"; then
  echo "scale-bench: the VM run failed: see $LOGDIR/summary.txt and $LOGDIR/{a,b}/stderr.log" >&2
  exit 1
fi
mkdir -p "$(dirname "$OUT")"
python3 "$REPO/bench/scale_report.py" "$LOGDIR" "$META" "$OUT"
