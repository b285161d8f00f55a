#!/usr/bin/env bash
# Guest side of bed-broken-next, the second test of vm.bed-broken's group (see
# bed-broken.guest.sh): in the broken boot it must not run; in the new boot it runs and records
# the boot it ran in (checks/bed_broken_next.py).
set -euo pipefail
source "$(dirname "$0")/../vm/lib.sh"
cat /proc/sys/kernel/random/boot_id >"$VM_OUT/boot_id.txt"
# A few tries, as the group's own check does: one echo of 2 s was once lost on a loaded CI host
# right after that check had passed. The broken bed answers none of them (a permanent entry).
peer0=$(awk '$1 == 0 {print $6}' "$VM_OUT/rails.txt")
answered=0
for ((t = 1; t <= 10; t++)); do
  busybox ping -q -c 1 -W 2 -I "$(vm_rail_if 0)" "$peer0" >/dev/null 2>&1 && { answered=1; break; }
  vm_log "bed-broken-next: ping $t to $peer0 on rail 0 unanswered"
done
# Neither guest ends before the other had its answer: this is the group's last test, and a guest
# that ends powers off (on a loaded host b was answered at once and gone before a's first echo).
vm_barrier bed-broken-next-done || vm_die "the peer did not come to the end of bed-broken-next"
((answered)) || vm_die "rail 0 ($peer0) answers no ping in the new boot (10 tries)"
vm_log "bed-broken-next: boot $(<"$VM_OUT/boot_id.txt"), rail 0 answers (try $t)"
