#!/usr/bin/env bash
# The main job, on its embedded default: the failover demo. Boots two Soft-RoCE VMs, checks both
# rails with ha-ping (and once with rail 0 pulled), then streams NCCL-style traffic through
# libnccl-net-ha.so (ha-net-driver, every byte verified) and pulls rail 0 mid-stream: the plugin
# fails over to its standby QP on rail 1 and the stream completes. Prints the report and writes
# the throughput timeline around the fault to $BUILD/demo-timeline.svg.
#   scripts/demo.sh
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
bash "$REPO/scripts/setup.sh"
cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
cmake --build "$BUILD" --target ha-ping nccl-net-ha ha-net-driver
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=$BUILD/vm-logs
"$REPO/test/vm/run-pair.sh" --name demo -- "$REPO/scripts/demo.guest.sh"
for role in a b; do
  echo "---- host $role ($([[ $role == a ]] && echo "ha-ping client, plugin receiver" || echo "ha-ping server, plugin sender")) ----"
  cat "$BUILD/vm-logs/demo/$role/out/demo.txt"
done
echo "---- failover report ----"
python3 "$REPO/scripts/demo_report.py" "$BUILD/vm-logs/demo" "$BUILD/demo-timeline.svg"
