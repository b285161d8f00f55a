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
# failed test), the tests left are recorded as not started (exit code 125).
# After the reset, both guests check the bed itself: every rail must answer a ping from the peer's
# address on it. A rail that does not, although its link is up and no fault is set, is the bed's
# kernel broken (Linux 6.1's Soft-RoCE and virtio-net: once in CI, a rail stopped carrying frames
# for good; QPs could not be destroyed for a minute, handshakes timed out resolving the peer, and
# every test after it failed for the bed's sake). Then the group ends there: each guest writes what
# it saw ($VM_OUT/bed-broken.log: the rails, links, neighbours, qdiscs, rxe ports, the kernel's last
# lines), the test after which it was found and those not run yet go to $VM_OUT/rerun.txt (the
# latter with exit code 124), and vm-group.sh boots the bed once more for them. Exits 0 unless the
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
# Every rail of this guest answers from the peer's address on it (rails.txt): prints "ok", or
# what is wrong, on one line. A few tries: the neighbour entries were just flushed.
# The cause seen so far (a CI run, a long benchmark): the NIC's virtio transmit queue stalls (the
# kernel's NETDEV WATCHDOG "transmit queue 0 timed out" for it, every 5 s), and it stays so;
# named when the kernel said so.
bed_health() {
  local rail ifc dev addr pdev paddr island t bad='' stall
  while read -r rail ifc dev addr pdev paddr island; do
    [[ $rail =~ ^[0-9]+$ && -n $paddr ]] || continue
    for ((t = 0; t < 5; t++)); do
      busybox ping -q -c 1 -W 1 -I "$ifc" "$paddr" >/dev/null 2>&1 && continue 2
    done
    stall=''
    dmesg | grep -q "$ifc: NETDEV WATCHDOG" && stall=", its virtio transmit queue stalled (NETDEV WATCHDOG)"
    bad+="${bad:+; }rail $rail ($ifc $addr -> $paddr) answers no ping (link $(<"/sys/class/net/$ifc/operstate"), $dev port $(cut -d: -f2 "/sys/class/infiniband/$dev/ports/1/state" 2>/dev/null | tr -d ' ')$stall)"
  done <"$base/rails.txt"
  echo "${bad:-ok}"
}

bed_report() { # WHAT: this guest's view of a broken bed, into bed-broken.log
  local r ifc
  {
    echo "$1"
    for ((r = 0; r < VM_RAILS; r++)); do
      ifc=$(vm_rail_if "$r")
      echo "--- rail $r: $ifc"
      ip -s link show dev "$ifc"; ip -4 addr show dev "$ifc"; ip neigh show dev "$ifc"; tc qdisc show dev "$ifc"
      cat "/sys/class/infiniband/$(vm_rdma_dev "$r")/ports/1/state"
    done
    echo "--- the kernel's last lines"
    dmesg | tail -n 80
  } >"$base/bed-broken.log" 2>&1
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
  ((i + 1 == ${#names[@]})) && break
  reset_bed
  vm_barrier "group-reset-$name" || continue  # the next start's barrier says what is left
  # The check's own test: NCCL_HA_VM_BREAK_BED_AFTER=NAME breaks a's rail 0 after NAME's reset in
  # a way the reset does not mend (a permanent neighbour entry with a MAC nobody has for the peer's
  # rail-0 address: the flush spares permanent entries).
  if [[ ${NCCL_HA_VM_BREAK_BED_AFTER:-} == "$name" && $VM_ROLE == a ]]; then
    read -r _ i0 _ _ _ p0 _ < <(grep '^0 ' "$base/rails.txt")
    ip neigh replace "$p0" lladdr 02:00:00:00:00:01 nud permanent dev "$i0" &&
      vm_log "group: NCCL_HA_VM_BREAK_BED_AFTER: rail 0's frames to $p0 go nowhere"
  fi
  mine=$(bed_health)
  peer=$(vm_exchange "group-health-$name" "$mine") || continue
  [[ $mine == ok && $peer == ok ]] && continue
  other=b; [[ $VM_ROLE == a ]] || other=a
  why="the bed broke (found after $name): $VM_ROLE: $mine; $other: $peer"
  vm_log "group: $why"
  bed_report "$why"
  printf '%s\n' "${names[@]:i}" >"$base/rerun.txt"
  for ((j = i + 1; j < ${#names[@]}; j++)); do echo 124 >"$base/${names[j]}.exit_code"; done
  break
done
exit 0
