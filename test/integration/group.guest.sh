#!/usr/bin/env bash
# Guest side of a boot group (vm-group.sh): several VM tests in one boot of the bed, one after the
# other. Each NAME.guest.sh runs as it would alone, but with VM_OUT=$VM_OUT/NAME (its own out/
# directory, run-pair.sh's rails.txt copied in); its stdout, stderr, exit code and wall time go to
# $VM_OUT/NAME.{stdout.log,stderr.log,exit_code,ms}, which vm-group.sh moves to the test's own log
# directory. A test may end with the bed as its faults left it (ha-ping-rail-down ends with rail 0
# down: alone, the power-off cleaned up), and a failed one with anything: after every test this
# guest's bed is reset (the test tools' processes killed, every rail cleared: link up, netem off,
# port ACTIVE, neighbour entries flushed), then both guests meet at a barrier before the next.
# Not after the last one: the power-off needs no bed, and bringing a link up can crash this
# guest kernel's rxe (6.1): a QP destroyed while its NIC was down is freed although frames of it
# still sit unreaped in the NIC's transmit ring; the link coming up frees them and their
# destructor (rxe_skb_tx_dtor) reads the freed QP: a kernel panic after every test had passed
# (seen once, after ha-ping-rail-down).
# A failed test does not end the group. If the guests no longer meet (the peer is still inside a
# failed test), the tests left are recorded as not started (exit code 125). Exits 0 unless the
# group itself could not run.
#   group.guest.sh NAME...
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../vm/lib.sh"
(($#)) || vm_die "usage: group.guest.sh NAME..."
base=$VM_OUT

reset_bed() {
  pkill -KILL -x 'ha-net-driver|ha-ping|ib_write_bw|ib_send_lat|ibv_rc_pingpong' 2>/dev/null || true
  local r
  for ((r = 0; r < VM_RAILS; r++)); do
    vm_fault clear "$r" 2>/dev/null || vm_log "group: reset: fault.sh clear $r failed"
    ip neigh flush dev "$(vm_rail_if "$r")" 2>/dev/null || true
  done
}
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
  ((i + 1 == ${#names[@]})) || reset_bed
done
exit 0
