#!/usr/bin/env bash
# Guest side of bed-retry: run-pair.sh's one boot more after the known Soft-RoCE kernel panic
# (rxe_skb_tx_dtor, a Linux 6.1 bug of the bed; see run-pair.sh). In the first boot b prints that
# panic's RIP line on the console and crashes its kernel (sysrq c: no exit code is written); in the
# second boot (NCCL_HA_VM_BED_RETRIES=0 in the guests' environment) both guests record what they
# saw and pass. checks/bed_retry.py judges both boots' logs.
set -euo pipefail
source "$(dirname "$0")/../vm/lib.sh"
left=${NCCL_HA_VM_BED_RETRIES:-unset}
vm_log "bed-retry: retries left: $left"
if [[ $VM_ROLE == b && $left != 0 ]]; then
  echo "[  115.580664] RIP: 0010:rxe_skb_tx_dtor+0x16/0x50 [rdma_rxe] (bed-retry: simulated)" >/dev/console
  echo c >/proc/sysrq-trigger
  sleep 30 # not reached
fi
echo "$left" >"$VM_OUT/retries_left.txt"
vm_barrier bed-retry-done
