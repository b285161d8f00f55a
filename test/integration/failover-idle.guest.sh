#!/usr/bin/env bash
# Guest side of failover-idle: the HA control plane must run while a rank makes no plugin call
# (an NCCL proxy busy with GPU compute or a checkpoint). The --one-way stream b (sender, rank 1)
# -> a (receiver, rank 0) on rxe0 with its standby on rxe1; one side idles (ha-net-driver --idle:
# no isend/irecv/test/iflush/irecvConsumed at all) for IDLE while a rail goes down.
#   idle-sender    b idle; b: rail-down 0 at 4 s          -> both fail over while b is idle
#   idle-receiver  a idle; a: rail-down 0 at 4 s          -> the same, mirrored
#   busy-fault     b idle; a (still calling): rail-down 0 -> b must confirm a's failover while idle
#   idle-standby   b idle; b: rail-down 1 at 4 s          -> standby down noticed while idle, the
#                                                            stream itself undisturbed
#   stopped-peer   b's driver SIGSTOPped from 3 s to 7 s (not even its progress thread runs; its
#                  kernel still acknowledges RDMA writes); a: rail-down 0 at 4 s -> a's notice is
#                  acknowledged, the new path proven: a waits for b beyond
#                  HA_NCCL_FAILOVER_TIMEOUT_MS, no deadline, until b runs again and confirms
# The rail that went down comes back up between the cases (fault.sh rail-up, then a barrier).
# checks/failover_idle.py judges them (each case on its own, then one verdict).
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
IDLE=3000:8000   # from 3 s to 11 s of the integrity phase (checks/failover_idle.py: IDLE_AT/IDLE_MS)
MIN=13           # --min-seconds of every case (checks/failover_idle.py: MIN_SECONDS)

# idle_args ROLE: --idle for the driver on VM ROLE only.
idle_args() { [[ $VM_ROLE == "$1" ]] && echo "--idle $IDLE" || true; }

# restore ROLE RAIL NAME: the rail pulled in case NAME back up on VM ROLE, then both go on.
restore() {
  if [[ $VM_ROLE == "$1" ]]; then vm_fault rail-up "$2" || vm_log "$3: fault.sh rail-up $2 failed"; fi
  vm_barrier "$3-restored"
}

PL_FAULTS=("b 4000 rail-down 0")
pl_stream idle-sender 18741 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN $(idle_args b)
restore b 0 idle-sender

PL_FAULTS=("a 4000 rail-down 0")
pl_stream idle-receiver 18742 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN $(idle_args a)
restore a 0 idle-receiver

PL_FAULTS=("a 4000 rail-down 0")
pl_stream busy-fault 18743 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN $(idle_args b)
restore a 0 busy-fault

PL_FAULTS=("b 4000 rail-down 1")
pl_stream idle-standby 18744 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN $(idle_args b)
restore b 1 idle-standby

PL_FAULTS=("b 3000 proc-stop" "a 4000 rail-down 0" "b 7000 proc-cont")
pl_stream stopped-peer 18745 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN
restore a 0 stopped-peer
