#!/usr/bin/env bash
# Guest side of plugin-qos (issue #11 item 3): the traffic class the plugin gives its QPs reaches
# the wire. Soft-RoCE copies a QP's GRH traffic class into the IP header's TOS byte of every RoCE
# v2 packet, so tcpdump (-i any: it survives a link going down; rail 0 = 10.20/16 on eth0 = rxe0,
# rail 1 = 10.21/16 on eth1 = rxe1; both directions) shows what every primary and standby QP was
# set to. Each case is a --one-way stream b -> a on rxe0 (standby rxe1); capture $VM_OUT/CASE.pcap.
#   env       NCCL_IB_TC=96 NCCL_IB_SL=3, 20 s; a pulls rail 0 at 3 s (the data moves to the standby QP on
#             rail 1) and restores it at 6 s (re-protection builds a new standby QP on rail 0):
#             every RoCE packet on both rails, before and after, carries TOS 96
#   config    no variable; ncclConfig_t.trafficClass 104 (the driver's --traffic-class: init()'s
#             ncclNetCommConfig, API v12): TOS 104, also on the listener's QPs
#   override  NCCL_IB_TC=96 HA_NCCL_IB_TC=40 and trafficClass 104: HA_NCCL_IB_TC wins (40)
#   default   nothing set: TOS 0 (the control: the captures do tell the cases apart); also NCCL's
#             default subsystems (INIT): the plugin's INIT|NET line shows, its NET lines do not
#   fifo      NCCL_IB_TC=96 NCCL_IB_FIFO_TC=104: what a receive comm's QPs send (clear-to-send
#             writes, acknowledgements) carries 104, what a send comm's QPs send 96 (told apart by
#             the destination QP of each packet's BTH)
#   ar        NCCL_IB_ADAPTIVE_ROUTING=1 NCCL_IB_AR_THRESHOLD=65536 (issue #32), 12 s; a pulls rail 0
#             at 3 s and restores it at 6 s: on the wire (each packet's BTH opcode and RETH length),
#             the 1 MiB messages go as plain writes, each followed by a 4-byte write with immediate
#             data (the size notice), also those replayed on rail 1; 8 B, 4 KiB and 64 KiB ones (not
#             larger than the threshold) as one write with immediate data, as in `default`
# Relaxed ordering (NCCL's rule, in each case's INIT line): env and default leave it at auto (off
# on Soft-RoCE: no PCIe DMA), config sets NCCL_IB_PCI_RELAXED_ORDERING=0 (off), override adds
# HA_NCCL_IB_PCI_RELAXED_ORDERING=1 over it (on: the flag is passed, rxe ignores the optional
# flag, the stream still verifies). Last, no traffic: `ha-ping --list --json` (list-memory.json): Soft-RoCE has no
# dma-buf (the probe answers EOPNOTSUPP), so ptrSupport has no DMABUF.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
ARGS=(--one-way --dev 0 --sizes 8,4K,64K,1M --group 4 --inflight 8 --timeout 120)

qos_case() { # CASE PORT ENV... -- DRIVER-ARGS...
  local name=$1 port=$2
  shift 2
  local env=()
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  pl_capture_start "$name"
  vm_barrier "$name-capturing"
  PL_ENV=(${env[@]+"${env[@]}"})
  pl_stream "$name" "$port" "${ARGS[@]}" "$@"
  pl_capture_stop
}

PL_FAULTS=("a 3000 rail-down 0" "a 6000 rail-up 0")
qos_case env 18760 NCCL_IB_TC=96 NCCL_IB_SL=3 -- --messages 300 --min-seconds 20
vm_fault clear 0 >/dev/null 2>&1 || true
qos_case config 18761 NCCL_IB_PCI_RELAXED_ORDERING=0 -- --messages 300 --traffic-class 104
qos_case override 18762 NCCL_IB_TC=96 HA_NCCL_IB_TC=40 NCCL_IB_PCI_RELAXED_ORDERING=0 HA_NCCL_IB_PCI_RELAXED_ORDERING=1 \
  -- --messages 300 --traffic-class 104
qos_case default 18763 NCCL_DEBUG_SUBSYS=INIT -- --messages 300
qos_case fifo 18764 NCCL_IB_TC=96 NCCL_IB_FIFO_TC=104 -- --messages 300
PL_FAULTS=("a 3000 rail-down 0" "a 6000 rail-up 0")
qos_case ar 18765 NCCL_IB_ADAPTIVE_ROUTING=1 NCCL_IB_AR_THRESHOLD=65536 -- --messages 300 --min-seconds 12
vm_fault clear 0 >/dev/null 2>&1 || true

rc=0
"$HA_PING" --list --json --plugin "$BUILD/src/plugin/libnccl-net-ha.so" >"$VM_OUT/list-memory.json" \
  2>"$VM_OUT/list-memory.log" || rc=$?
echo "$rc" >"$VM_OUT/list-memory.rc"
