#!/usr/bin/env bash
# Runs one VM integration test: boots the two-VM Soft-RoCE bed, runs NAME.guest.sh in both
# guests, then checks what they recorded with check.py NAME. Extra arguments go to run-pair.sh
# (e.g. --rails 4).
#   test/integration/vm-test.sh ha-ping-rails
# With --check-only it boots nothing: it judges what a boot group (vm-group.sh, ctest's
# vm.boot-GROUP) recorded for NAME: both guests' exit codes, then check.py NAME.
#   test/integration/vm-test.sh --check-only ha-ping-rails
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
check_only=0
[[ ${1:-} != --check-only ]] || { check_only=1; shift; }
NAME=${1:?usage: vm-test.sh [--check-only] NAME [RUN-PAIR-OPTIONS...]   (runs test/integration/NAME.guest.sh)}
shift
export NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-${NCCL_HA_BUILD_DIR:-$REPO/build}/vm-logs}
if ((check_only)); then
  # A boot group's note that the bed broke (vm-group.sh): whether this is a rerun, and why.
  [[ ! -s $NCCL_HA_VM_LOGDIR/$NAME/bed.txt ]] || echo "vm-test $NAME: note: $(<"$NCCL_HA_VM_LOGDIR/$NAME/bed.txt")"
  guests_ok=1
  for r in a b; do
    dir=$NCCL_HA_VM_LOGDIR/$NAME/$r
    code=$(cat "$dir/exit_code" 2>/dev/null || echo "none (not run: see the boot group's log)")
    [[ $code == 0 ]] && continue
    guests_ok=0
    echo "vm-test $NAME: guest $r: exit $code; the tail of its stderr.log:"
    tail -n 30 "$dir/stderr.log" 2>/dev/null || true
  done
  ((guests_ok)) || { echo "vm-test $NAME: FAILED (a guest's script failed)"; exit 1; }
else
  rm -f "$NCCL_HA_VM_LOGDIR/$NAME/checked"
  "$REPO/test/vm/run-pair.sh" --name "$NAME" --timeout "${NCCL_HA_VM_TEST_TIMEOUT:-600}" "$@" -- "$HERE/$NAME.guest.sh"
fi
if ! python3 "$HERE/check.py" "$NAME" "$NCCL_HA_VM_LOGDIR/$NAME" | tee "$NCCL_HA_VM_LOGDIR/$NAME/check.log"; then
  # The checks print hundreds of lines; whoever reads a cut of this output gets the verdicts last.
  echo "vm-test $NAME: FAILED; the failed checks:"
  grep '^check: FAIL' "$NCCL_HA_VM_LOGDIR/$NAME/check.log" || echo "(none printed: check.py itself failed)"
  exit 1
fi
# Proof for CI that this test really ran in the VMs and its checks passed.
date -u +%s >"$NCCL_HA_VM_LOGDIR/$NAME/checked"
