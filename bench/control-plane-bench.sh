#!/usr/bin/env bash
# Benchmark (not a test): the plugin's data path BEFORE and AFTER a change, in one two-VM boot.
#   bench/control-plane-bench.sh [--baseline REV]   -> bench/results/control-plane-<date>.{json,md}
# "after" = the plugin of this working tree (built in NCCL_HA_BUILD_DIR, default build/);
# "before" = the plugin at REV (default 0c6fa50, the commit before the control plane moved onto
# the progress thread), from a detached worktree $BUILD/baseline-src built in $BUILD/baseline-build
# (under the build dir, not /tmp: the guests do not see the host's /tmp). Both are driven by the
# CURRENT ha-net-driver (same plugin ABI). HA on (HA_NCCL_ENABLE_BACKUP=1), --dev 0 = rxe0 with its
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
die() { echo "control-plane-bench: $*" >&2; exit 1; }
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
[[ $BUILD == /tmp/* ]] && die "NCCL_HA_BUILD_DIR=$BUILD is under /tmp, which the guests cannot see"
REV_HASH=$(git -C "$REPO" rev-parse --verify "$REV^{commit}") || die "baseline revision '$REV' not found"
BASE_SRC=$BUILD/baseline-src
BASE_BUILD=$BUILD/baseline-build
LOAD_AT_START=$(uptime)
export NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-$BUILD/vm-logs}
NAME=control-plane-bench
LOGDIR=$NCCL_HA_VM_LOGDIR/$NAME

if [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
  bash "$REPO/scripts/setup.sh"
  # after: this working tree
  cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
  nice -n 10 cmake --build "$BUILD" -j2 --target nccl-net-ha ha-net-driver
  # before: a detached worktree at REV, reused (and moved to REV) if it is there
  if [[ -e $BASE_SRC/.git ]]; then
    if [[ $(git -C "$BASE_SRC" rev-parse HEAD) != "$REV_HASH" ]]; then
      [[ -z $(git -C "$BASE_SRC" status --porcelain --untracked-files=no) ]] ||
        die "$BASE_SRC has local changes; remove it (git worktree remove --force $BASE_SRC)"
      git -C "$BASE_SRC" checkout -q --detach "$REV_HASH"
    fi
  else
    [[ ! -e $BASE_SRC ]] || die "$BASE_SRC exists but is not a git worktree; remove it"
    git -C "$REPO" worktree prune
    git -C "$REPO" worktree add -q --detach "$BASE_SRC" "$REV_HASH"
  fi
  # the same build type and sanitizer setting as the current build, so only the source differs
  bt=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  san=$(sed -n 's/^NCCL_HA_SANITIZE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  cmake -S "$BASE_SRC" -B "$BASE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE="${bt:-RelWithDebInfo}" \
    -DNCCL_HA_SANITIZE="${san:-OFF}" -DNCCL_HA_BUILD_TESTS=OFF -DNCCL_HA_BUILD_TOOLS=OFF >/dev/null
  nice -n 10 cmake --build "$BASE_BUILD" -j2 --target nccl-net-ha
fi
[[ -e $BASE_SRC/.git && $(git -C "$BASE_SRC" rev-parse HEAD) == "$REV_HASH" ]] ||
  die "$BASE_SRC is not at $REV ($REV_HASH); run without NCCL_HA_BENCH_NO_BUILD=1"
AFTER_SO=$BUILD/src/plugin/libnccl-net-ha.so
BEFORE_SO=$BASE_BUILD/src/plugin/libnccl-net-ha.so
DRIVER=$BUILD/tools/ha-net-driver/ha-net-driver
for f in "$AFTER_SO" "$BEFORE_SO" "$DRIVER"; do [[ -x $f || -f $f ]] || die "missing $f"; done

# What the report records: revisions, binaries, host load, the command.
CUR_HASH=$(git -C "$REPO" rev-parse HEAD)
CUR_DESC=$(git -C "$REPO" describe --always --dirty)
DIRTY=false
[[ -z $(git -C "$REPO" status --porcelain --untracked-files=no) ]] || DIRTY=true
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_CP_BEFORE_PLUGIN=$BEFORE_SO NCCL_HA_CP_AFTER_PLUGIN=$AFTER_SO
STAMP=$(date -u +%Y-%m-%d)
OUT=${NCCL_HA_BENCH_OUT:-$REPO/bench/results/control-plane-$STAMP}
META=$BUILD/$NAME.meta.json
CMD=$(printf '%q ' "${BASH_SOURCE[0]}" --baseline "$REV")
M_BASE_DESC=$(git -C "$REPO" describe --always "$REV_HASH") M_BEFORE_SHA=$(sha256sum "$BEFORE_SO" | cut -d' ' -f1) \
  M_AFTER_SHA=$(sha256sum "$AFTER_SO" | cut -d' ' -f1) \
  M_BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt") \
  M_REV=$REV M_REV_HASH=$REV_HASH M_CUR_HASH=$CUR_HASH M_CUR_DESC=$CUR_DESC M_DIRTY=$DIRTY M_DRIVER=$DRIVER \
  M_LOAD=$LOAD_AT_START M_CMD=${CMD% } M_CHANGED=$(git -C "$REPO" status --porcelain --untracked-files=no | cut -c4- | paste -sd' ') python3 - "$META" <<'EOF'
import json, os, sys
e = os.environ
json.dump({
    "baseline_rev": e["M_REV"], "baseline_hash": e["M_REV_HASH"], "baseline_describe": e["M_BASE_DESC"],
    "current_hash": e["M_CUR_HASH"], "current_describe": e["M_CUR_DESC"], "current_dirty": e["M_DIRTY"] == "true",
    "current_changed_files": e["M_CHANGED"].split(),
    "before_plugin": e["NCCL_HA_CP_BEFORE_PLUGIN"], "before_sha256": e["M_BEFORE_SHA"],
    "after_plugin": e["NCCL_HA_CP_AFTER_PLUGIN"], "after_sha256": e["M_AFTER_SHA"],
    "driver": e["M_DRIVER"], "build_type": e["M_BUILD_TYPE"], "host_nproc": os.cpu_count(),
    "host_load_at_start": e["M_LOAD"].strip(), "command": e["M_CMD"],
    "env": {k: v for k, v in sorted(e.items())
            if k.startswith(("NCCL_HA_BENCH_", "HA_NCCL_", "NCCL_HA_BASELINE_REV", "NCCL_HA_BUILD_DIR"))},
}, open(sys.argv[1], "w"), indent=2)
EOF
echo "control-plane-bench: before = $REV ($REV_HASH) $BEFORE_SO"
echo "control-plane-bench: after  = $CUR_DESC $AFTER_SO"
echo "control-plane-bench: host load at start: $LOAD_AT_START"
if ! "$REPO/test/vm/run-pair.sh" --name "$NAME" --timeout "${NCCL_HA_BENCH_TIMEOUT:-3600}" -- \
  "$REPO/bench/control-plane-bench.guest.sh"; then
  die "the VM run failed: see $LOGDIR/summary.txt and $LOGDIR/{a,b}/stderr.log"
fi
python3 - "$META" "$(uptime)" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["host_load_at_end"] = sys.argv[2].strip()
json.dump(m, open(sys.argv[1], "w"), indent=2)
EOF
python3 "$REPO/bench/control_plane_report.py" "$LOGDIR" "$META" "$OUT"
