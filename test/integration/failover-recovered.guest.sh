#!/usr/bin/env bash
# Guest side of failover-recovered (issue #4): as failover-sender-down, but rail 0 of b has flapped
# (down, then up again) before the streams start, as after a cable reseat. The plugin connects
# on the recovered rail 0 as usual, and b's rail 0 going down again mid-stream must fail over
# just as fast as the first time.
#   flap      b: fault.sh rail-down 0, fault.sh rail-up 0 (before any plugin traffic)
#   baseline  20 s without a fault
#   fault     20 s; b: fault.sh rail-down 0 at 5 s
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
if [[ $VM_ROLE == b ]]; then
  vm_fault rail-down 0
  vm_fault rail-up 0
fi
vm_barrier flapped
pl_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 20
PL_FAULTS=("b 5000 rail-down 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 20
