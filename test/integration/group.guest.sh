#!/usr/bin/env bash
# Guest side of a boot group (vm-group.sh): several VM tests in one boot of the bed, one after the
# other. Each NAME.guest.sh runs as it would alone, but with VM_OUT=$VM_OUT/NAME (its own out/
# directory, run-pair.sh's rails.txt copied in); its stdout, stderr, exit code and wall time go to
# $VM_OUT/NAME.{stdout.log,stderr.log,exit_code,ms}, which vm-group.sh moves to the test's own log
# directory. Both guests meet at a barrier before each test. A failed test does not end the group:
# this guest's rails are cleared (links up, netem off) and the next test starts. If the guests no
# longer meet (the peer is still inside a failed test), the tests left are recorded as not started
# (exit code 125). Exits 0 unless the group itself could not run.
#   group.guest.sh NAME...
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../vm/lib.sh"
(($#)) || vm_die "usage: group.guest.sh NAME..."
base=$VM_OUT
names=("$@")
for ((i = 0; i < ${#names[@]}; i++)); do
  name=${names[i]}
  [[ -x $HERE/$name.guest.sh ]] || vm_die "group: no test script $HERE/$name.guest.sh"
  mkdir -p "$base/$name"
  cp "$base/rails.txt" "$base/$name/" 2>/dev/null || true
  if ! vm_barrier "group-start-$name"; then
    for ((j = i; j < ${#names[@]}; j++)); do
      vm_log "group: ${names[j]}: not started (the peer did not come to its start)"
      echo 125 >"$base/${names[j]}.exit_code"
    done
    break
  fi
  vm_log "group: $name: start"
  start=$(date +%s%N)
  VM_OUT=$base/$name "$HERE/$name.guest.sh" </dev/null >"$base/$name.stdout.log" 2>"$base/$name.stderr.log"
  rc=$?
  echo $((($(date +%s%N) - start) / 1000000)) >"$base/$name.ms"
  echo "$rc" >"$base/$name.exit_code"
  vm_log "group: $name: exit $rc after $(($(<"$base/$name.ms") / 1000)) s"
  if ((rc != 0)); then  # leave a clean bed to the next test
    for ((r = 0; r < VM_RAILS; r++)); do vm_fault clear "$r" >&2 || true; done
  fi
done
exit 0
