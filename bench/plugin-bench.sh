#!/usr/bin/env bash
# Benchmark (not a test): the plugin against perftest on the same rail, in one two-VM boot.
#   bench/plugin-bench.sh [--baseline REV] [--ha-off] [--fuse] [--sharp SRC]
#     -> bench/results/plugin-<date>.{json,md,svg}
# Rounds interleave perftest and the plugin so both see the same emulator drift. Absolute figures
# are emulation artefacts (TCG); the ratios measured in the same run are what counts.
# --baseline REV (or NCCL_HA_BASELINE_REV): also the plugin at REV ("before", built by
# bench/baseline-lib.sh in $BUILD/baseline-build), driven by the same current ha-net-driver in
# the same boot, its runs interleaved with this tree's ("after": before/after in odd rounds,
# after/before in even ones); the report adds after/before ratios and the run-to-run spread.
# --ha-off: also this tree's plugin with HA off (HA_NCCL_ENABLE_STANDBY=0: single path, no
# heartbeats), interleaved the same way; the report adds HA on / HA off ratios (what HA costs the
# data path).
# --fuse: also this tree's plugin on the fused device of rails 0 and 1 (makeVDevice, issue #33:
# each message striped over both), interleaved the same way; the report adds fused / one port and
# each member's share of the bytes (the members' stats records).
# --sharp SRC (implies --fuse): also NVIDIA's nccl-rdma-sharp-plugins from the checkout SRC (its IB
# transport; bench/sharp-lib.sh builds it) on the same fused device and on rail 0 alone, driven by
# the same ha-net-driver, interleaved the same way; the report adds this plugin / the sharp plugin.
# Environment: NCCL_HA_BENCH_ROUNDS (2; 3 with a baseline), NCCL_HA_BENCH_OUT (output prefix),
# NCCL_HA_BENCH_NO_BUILD=1 (use the builds as they are), NCCL_HA_BUILD_DIR (build/).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
REV=${NCCL_HA_BASELINE_REV:-}
SHARP_SRC=
while (($#)); do
  case $1 in
    --baseline) REV=${2:?--baseline needs a revision}; shift 2 ;;
    --baseline=*) REV=${1#*=}; shift ;;
    --ha-off) export NCCL_HA_BENCH_HA_OFF=1 NCCL_HA_BENCH_ROUNDS=${NCCL_HA_BENCH_ROUNDS:-3}; shift ;;
    --fuse) export NCCL_HA_BENCH_FUSE=1 NCCL_HA_BENCH_ROUNDS=${NCCL_HA_BENCH_ROUNDS:-3}; shift ;;
    --sharp) SHARP_SRC=${2:?--sharp needs the checkout of nccl-rdma-sharp-plugins}; shift 2
      export NCCL_HA_BENCH_FUSE=1 NCCL_HA_BENCH_ROUNDS=${NCCL_HA_BENCH_ROUNDS:-3} ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "plugin-bench: unknown argument '$1' (usage: $0 [--baseline REV] [--ha-off] [--fuse] [--sharp SRC])" >&2; exit 2 ;;
  esac
done
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
NAME=plugin-bench
LOGDIR=$BUILD/vm-logs/$NAME
META=
if [[ -n $REV ]]; then
  source "$REPO/bench/baseline-lib.sh"
  bench_build_baseline "$REPO" "$BUILD" "$REV" plugin-bench  # REV_HASH BEFORE_SO AFTER_SO DRIVER
  export NCCL_HA_BENCH_BEFORE_PLUGIN=$BEFORE_SO NCCL_HA_BENCH_ROUNDS=${NCCL_HA_BENCH_ROUNDS:-3}
  META=$BUILD/$NAME.meta.json
  CMD=$(printf '%q ' "${BASH_SOURCE[0]}" --baseline "$REV")
  bench_write_meta "$META" "$REPO" "$BUILD" "$REV" "${CMD% }"
  echo "plugin-bench: before = $REV ($REV_HASH) $BEFORE_SO"
  echo "plugin-bench: after  = $(git -C "$REPO" describe --always --dirty) $AFTER_SO"
elif [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
  source "$REPO/bench/baseline-lib.sh"
  bench_build_tree "$REPO" "$BUILD"
fi
if [[ -n $SHARP_SRC ]]; then
  source "$REPO/bench/sharp-lib.sh"
  bench_build_sharp "$SHARP_SRC" "$BUILD"  # SHARP_SO SHARP_DESC
  export NCCL_HA_BENCH_SHARP_PLUGIN=$SHARP_SO
  echo "plugin-bench: sharp  = nccl-rdma-sharp-plugins $SHARP_DESC $SHARP_SO"
fi
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=$BUILD/vm-logs
"$REPO/test/vm/run-pair.sh" --name "$NAME" --timeout 3600 -- "$REPO/bench/plugin-bench.guest.sh"
[[ -z $SHARP_SRC ]] || printf '{"describe": "%s", "plugin": "%s", "sha256": "%s"}\n' "$SHARP_DESC" "$SHARP_SO" \
  "$(sha256sum "$SHARP_SO" | cut -d' ' -f1)" >"$LOGDIR/sharp.json"
[[ -z $META ]] || bench_meta_end "$META"
stamp=$(date -u +%Y-%m-%d)
python3 "$REPO/bench/plugin_report.py" "$LOGDIR" "${NCCL_HA_BENCH_OUT:-$REPO/bench/results/plugin-$stamp}" $META
