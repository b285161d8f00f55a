#!/usr/bin/env bash
# Runs several VM integration tests in ONE boot of the two-VM bed (ctest's vm.boot-GROUP, the
# fixture of those tests): group.guest.sh runs each NAME.guest.sh in turn in both guests. Then
# each test's files are moved to $NCCL_HA_VM_LOGDIR/NAME/{a,b}/ (out/, stdout.log, stderr.log,
# exit_code; console.log links to the boot's) as if it had booted alone, for
# `vm-test.sh --check-only NAME`, which judges it (ctest's vm.NAME). A boot costs ~7 s of the
# emulated guests' start and power-off: shared, it is paid once per group, not once per test.
# Exit status: that of run-pair.sh (0 iff the boot ran the whole group; a failed test is judged by
# its own vm.NAME, not here). Extra arguments after -- go to run-pair.sh (all tests of a group
# share the bed).
#   test/integration/vm-group.sh GROUP NAME... [-- RUN-PAIR-OPTIONS...]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GROUP=${1:?usage: vm-group.sh GROUP NAME... [-- RUN-PAIR-OPTIONS...]}
shift
names=()
while (($#)) && [[ $1 != -- ]]; do names+=("$1"); shift; done
(($#)) && shift
((${#names[@]})) || { echo "vm-group: no tests named" >&2; exit 2; }
export NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-${NCCL_HA_BUILD_DIR:-$REPO/build}/vm-logs}
LOGDIR=$NCCL_HA_VM_LOGDIR
BOOT=boot-$GROUP
for n in "${names[@]}"; do
  [[ -x $HERE/$n.guest.sh ]] || { echo "vm-group: no test script $HERE/$n.guest.sh" >&2; exit 2; }
  rm -rf "${LOGDIR:?}/$n/a" "$LOGDIR/$n/b" "$LOGDIR/$n/checked" "$LOGDIR/$n/summary.txt"
done
rc=0
"$REPO/test/vm/run-pair.sh" --name "$BOOT" --timeout "${NCCL_HA_VM_GROUP_TIMEOUT:-1800}" "$@" \
  -- "$HERE/group.guest.sh" "${names[@]}" || rc=$?

for n in "${names[@]}"; do
  for r in a b; do
    src=$LOGDIR/$BOOT/$r/out dst=$LOGDIR/$n/$r
    mkdir -p "$dst"
    if [[ -d $src/$n ]]; then mv "$src/$n" "$dst/out"; else mkdir -p "$dst/out"; fi
    for f in stdout.log stderr.log exit_code ms; do
      [[ ! -f $src/$n.$f ]] || mv "$src/$n.$f" "$dst/$f"
    done
    ln -sfn "../../$BOOT/$r/console.log" "$dst/console.log"
  done
  ms=$(cat "$LOGDIR/$n/a/ms" 2>/dev/null || echo 0)
  echo "  wall time: $((ms / 1000)).$((ms % 1000 / 100))s in the boot $BOOT (its logs: $LOGDIR/$BOOT)" \
    >"$LOGDIR/$n/summary.txt"
  echo "vm-group: $n: a exit $(cat "$LOGDIR/$n/a/exit_code" 2>/dev/null || echo none)," \
    "b exit $(cat "$LOGDIR/$n/b/exit_code" 2>/dev/null || echo none), $((ms / 1000)) s"
done
exit "$rc"
