#!/usr/bin/env bash
# Runs several VM integration tests in ONE boot of the two-VM bed (ctest's vm.boot-GROUP, the
# fixture of those tests): group.guest.sh runs each NAME.guest.sh in turn in both guests. Then
# each test's files are moved to $NCCL_HA_VM_LOGDIR/NAME/{a,b}/ (out/, stdout.log, stderr.log,
# exit_code; console.log links to the boot's) as if it had booted alone, for
# `vm-test.sh --check-only NAME`, which judges it (ctest's vm.NAME). A boot costs ~7 s of the
# emulated guests' start and power-off: shared, it is paid once per group, not once per test.
# Between two tests the guests check the bed (group.guest.sh); found broken, the tests left and
# the one after which it was found run again in a new boot (below). Exit status: that of
# run-pair.sh, of the last boot (0 iff it ran its tests; a failed test is judged by its own
# vm.NAME, not here). Extra arguments after -- go to run-pair.sh (all tests of a group
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
  rm -rf "${LOGDIR:?}/$n/a" "$LOGDIR/$n/b" "$LOGDIR/$n/checked" "$LOGDIR/$n/summary.txt" "$LOGDIR/$n/bed.txt" \
    "$LOGDIR/$n.bed-broken"
done
pair_args=("$@")

boot_and_collect() { # BOOT NAME...: the tests in one boot, then each test's files to its own dir
  local boot=$1 rc=0 n r src dst f ms
  shift
  "$REPO/test/vm/run-pair.sh" --name "$boot" --timeout "${NCCL_HA_VM_GROUP_TIMEOUT:-1800}" \
    ${pair_args[@]+"${pair_args[@]}"} -- "$HERE/group.guest.sh" "$@" || rc=$?
  for n in "$@"; do
    for r in a b; do
      src=$LOGDIR/$boot/$r/out dst=$LOGDIR/$n/$r
      rm -rf "$dst"
      mkdir -p "$dst"
      if [[ -d $src/$n ]]; then mv "$src/$n" "$dst/out"; else mkdir -p "$dst/out"; fi
      for f in stdout.log stderr.log exit_code ms; do
        [[ ! -f $src/$n.$f ]] || mv "$src/$n.$f" "$dst/$f"
      done
      ln -sfn "../../$boot/$r/console.log" "$dst/console.log"
    done
    ms=$(cat "$LOGDIR/$n/a/ms" 2>/dev/null || echo 0)
    echo "  wall time: $((ms / 1000)).$((ms % 1000 / 100))s in the boot $boot (its logs: $LOGDIR/$boot)" \
      >"$LOGDIR/$n/summary.txt"
    echo "vm-group: $n: a exit $(cat "$LOGDIR/$n/a/exit_code" 2>/dev/null || echo none)," \
      "b exit $(cat "$LOGDIR/$n/b/exit_code" 2>/dev/null || echo none), $((ms / 1000)) s"
  done
  return "$rc"
}

rc=0
boot_and_collect "$BOOT" "${names[@]}" || rc=$?

# A bed found broken between two tests (group.guest.sh: a rail that answers no ping after the
# reset; the bed's kernel, not the code under test): the test after which it was found and those
# not run yet get a new boot (NCCL_HA_VM_BED_RETRIES times, default 1, shared with run-pair.sh's
# retry of a guest kernel panic). Their first run's files stay in NAME.bed-broken/; NAME/bed.txt
# says so, and vm-test.sh --check-only prints it. Found broken again: the tests are judged as they
# are (failing), with the same note.
retries=${NCCL_HA_VM_BED_RETRIES:-1}
round=0
while :; do
  rerun=() why=''
  for r in a b; do
    [[ -s $LOGDIR/$BOOT/$r/out/rerun.txt ]] || continue
    mapfile -t rerun <"$LOGDIR/$BOOT/$r/out/rerun.txt"
    why=$(head -n 1 "$LOGDIR/$BOOT/$r/out/bed-broken.log" 2>/dev/null) || true
    break
  done
  ((${#rerun[@]})) || break
  if ! [[ $retries =~ ^[1-9][0-9]*$ ]]; then
    echo "vm-group: $why; no boot left for ${rerun[*]} (their logs: $LOGDIR/$BOOT/{a,b}/out/bed-broken.log)"
    for n in "${rerun[@]}"; do
      echo "$why in $BOOT (each guest's view: $LOGDIR/$BOOT/{a,b}/out/bed-broken.log); no boot left" >"$LOGDIR/$n/bed.txt"
    done
    break
  fi
  retries=$((retries - 1)) round=$((round + 1))
  broken=$BOOT BOOT=boot-$GROUP.rerun$round
  echo "vm-group: $why: booting the bed once more ($BOOT) for ${rerun[*]}"
  for n in "${rerun[@]}"; do
    rm -rf "${LOGDIR:?}/$n.bed-broken"
    mv "$LOGDIR/$n" "$LOGDIR/$n.bed-broken"
    mkdir -p "$LOGDIR/$n"
  done
  NCCL_HA_VM_BREAK_BED_AFTER='' boot_and_collect "$BOOT" "${rerun[@]}" || rc=$?  # that test's break: once
  for n in "${rerun[@]}"; do
    echo "$why in $broken (each guest's view: $LOGDIR/$broken/{a,b}/out/bed-broken.log): this is its run" \
      "in a new boot, $BOOT; the first: $LOGDIR/$n.bed-broken" >"$LOGDIR/$n/bed.txt"
  done
done
exit "$rc"
