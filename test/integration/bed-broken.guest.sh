#!/usr/bin/env bash
# Guest side of bed-broken, the first of the two tests of its group (vm.bed-broken runs
# vm-group.sh bedcheck bed-broken bed-broken-next): the group's check of the bed between two tests.
# After this test, with NCCL_HA_VM_BREAK_BED_AFTER=bed-broken, group.guest.sh breaks a's rail 0
# where the bed's reset does not mend it; the check finds it, and vm-group.sh boots the bed once
# more for this test and the next. Each run records the boot it ran in (the kernel's boot_id);
# checks/bed_broken.py judges both boots' files.
set -euo pipefail
source "$(dirname "$0")/../vm/lib.sh"
cat /proc/sys/kernel/random/boot_id >"$VM_OUT/boot_id.txt"
vm_log "bed-broken: boot $(<"$VM_OUT/boot_id.txt")"
