#!/usr/bin/env bash
# Guest side of failover-scale (issue #21): exactly once under a port fault with 256 comm pairs.
# Each rank opens 256 send/recv comm pairs on rxe0 (standby rxe1) and moves ROUNDS verified
# 64-byte messages over every pair in both directions, each pair its next as soon as its last
# completed (ha-net-driver --comms-rounds: each round's bytes are its own, so a copy delivered
# twice or lost fails the driver's check). FAULT_MS into the rounds a's rail 0 goes down: every
# comm fails over (the port event on a, the notices on b) with messages in flight, and the
# rounds go on over rail 1. Files: scale.{json,log,rc,ms,phase,stats.jsonl,fault_ms,rounds_ms}.
# checks/failover_scale.py judges them.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export NCCL_DEBUG=WARN  # 512 comms' INFO lines would cost more than the test: the stats file tells
N=256
ulimit -n 4096 2>/dev/null || true  # a listen comm and a handshake socket per pair while connecting
ROUNDS=${NCCL_HA_SCALE_ROUNDS:-70}
FAULT_MS=3000
name=scale
PL_ENV=("HA_NCCL_STATS_FILE=$VM_OUT/$name.stats.jsonl" "HA_NCCL_ENABLE_FAILBACK=0")
# --linger: a's 512 retired QPs on the dead rxe0 may still be in the kernel's destruction after
# finalize (its wait for their last references; all of them gone by finalize here, 431 left 60 s
# after it in one CI run): the checks that the plugin gave back every fd, QP and thread apply
# once its background reaper is done, within 300 s, not at finalize (see the driver's --linger).
pl_driver_start "$name" 18760 --dev 0 --messages 0 --comms $N --comms-rounds "$ROUNDS" --timeout 300 \
  --phase-file "$VM_OUT/$name.phase" --linger 300
PL_ENV=()
if t0=$(pl_wait_phase "$VM_OUT/$name.phase" "comms rounds" "$PL_PID" 300); then
  t0=${t0##* }  # "comms rounds T": the phase's name has a space
  if [[ $VM_ROLE == a ]]; then
    sleep "$((FAULT_MS / 1000)).$((FAULT_MS % 1000))"
    t1=$(pl_now_ms)
    vm_fault rail-down 0 || vm_log "$name: fault.sh rail-down 0 failed"
    echo "$t1 $(pl_now_ms) rail-down 0" >"$VM_OUT/$name.fault_ms"
  fi
  if t2=$(pl_wait_phase "$VM_OUT/$name.phase" "comms close" "$PL_PID" 300); then
    echo "$t0 ${t2##* }" >"$VM_OUT/$name.rounds_ms"
  fi
else
  vm_log "$name: the rounds never began here"
fi
pl_driver_wait
echo "$PL_RC" >"$VM_OUT/$name.rc"
echo "$PL_MS" >"$VM_OUT/$name.ms"
vm_log "$name: exit $PL_RC after $PL_MS ms"
vm_barrier "$name-done"
