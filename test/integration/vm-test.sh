#!/usr/bin/env bash
# Runs one VM integration test: boots the two-VM Soft-RoCE bed, runs NAME.guest.sh in both
# guests, then checks what they recorded with check.py NAME. Extra arguments go to run-pair.sh
# (e.g. --rails 4).
#   test/integration/vm-test.sh ha-ping-rails
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NAME=${1:?usage: vm-test.sh NAME [RUN-PAIR-OPTIONS...]   (runs test/integration/NAME.guest.sh)}
shift
export NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-${NCCL_HA_BUILD_DIR:-$REPO/build}/vm-logs}
rm -f "$NCCL_HA_VM_LOGDIR/$NAME/checked"
"$REPO/test/vm/run-pair.sh" --name "$NAME" --timeout "${NCCL_HA_VM_TEST_TIMEOUT:-600}" "$@" -- "$HERE/$NAME.guest.sh"
if ! python3 "$HERE/check.py" "$NAME" "$NCCL_HA_VM_LOGDIR/$NAME" | tee "$NCCL_HA_VM_LOGDIR/$NAME/check.log"; then
  # The checks print hundreds of lines; whoever reads a cut of this output gets the verdicts last.
  echo "vm-test $NAME: FAILED; the failed checks:"
  grep '^check: FAIL' "$NCCL_HA_VM_LOGDIR/$NAME/check.log" || echo "(none printed: check.py itself failed)"
  exit 1
fi
# Proof for CI that this test really ran in the VMs and its checks passed.
date -u +%s >"$NCCL_HA_VM_LOGDIR/$NAME/checked"
