#!/usr/bin/env bash
# Benchmark (not a test): the plugin against perftest on the same rail, in one two-VM boot.
#   bench/plugin-bench.sh            -> bench/results/plugin-<date>.{json,md,svg}
# Rounds interleave perftest and the plugin so both see the same emulator drift. Absolute figures
# are emulation artefacts (TCG); the ratios measured in the same run are what counts.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
bash "$REPO/scripts/setup.sh"
cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
cmake --build "$BUILD" --target nccl-net-ha ha-net-driver
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=$BUILD/vm-logs
"$REPO/test/vm/run-pair.sh" --name plugin-bench --timeout 2400 -- "$REPO/bench/plugin-bench.guest.sh"
stamp=$(date -u +%Y-%m-%d)
python3 "$REPO/bench/plugin_report.py" "$BUILD/vm-logs/plugin-bench" "$REPO/bench/results/plugin-$stamp"
