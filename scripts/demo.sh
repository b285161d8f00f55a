#!/usr/bin/env bash
# The main job, on its embedded default: boots two Soft-RoCE VMs and runs ha-ping between them
# across both rails, then pulls rail 0 on one host and checks again.
#   scripts/demo.sh
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
bash "$REPO/scripts/setup.sh"
cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
cmake --build "$BUILD" --target ha-ping
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=$BUILD/vm-logs
"$REPO/test/vm/run-pair.sh" --name demo -- "$REPO/scripts/demo.guest.sh"
for role in a b; do
  echo "---- host $role ($([[ $role == a ]] && echo client || echo server)) ----"
  cat "$BUILD/vm-logs/demo/$role/out/demo.txt"
done
