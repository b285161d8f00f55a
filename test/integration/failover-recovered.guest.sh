#!/usr/bin/env bash
# Guest side of failover-recovered (issue #4): as failover-sender-down, but rail 0 of b has flapped
# (down, then up again) before the streams start, as after a cable reseat. The plugin connects
# on the recovered rail 0 as usual, and b's rail 0 going down again mid-stream must fail over
# just as fast as the first time.
#   flap      b: fault.sh rail-down 0, fault.sh rail-up 0 (before any plugin traffic)
#   baseline  15 s without a fault (pl_shared_stream: the boot's one, as sender-down's)
#   fault     15 s; b: fault.sh rail-down 0 at 5 s
#   readdress (issue #19) the plugin already running, b's rail 0 moves to another address (a new
#             GID, GID_CHANGE) 1 s into a --one-way stream on rail 1 (once churn pair 0 is closed); 8 single-path comm pairs
#             (HA_NCCL_ENABLE_STANDBY=0: nothing masks a bad endpoint) are opened on rail 0 one
#             after another meanwhile (--churn): those after the change must connect with the
#             port's address as it is now and carry their messages. A pair that connects while the
#             address moves (for a moment the port has none) may fail: --churn-retry opens it again
#             1 s later. b's address comes back after.
#   home-down (issue #19) a's rail 0 is down before the stream: the stream's comms (on rail 0) and
#             6 churn pairs on rail 0 (both directions, no --churn-retry: a failed connect fails the
#             run) must connect on the pair that is up (rail 1), carry every message, and go home
#             when a's rail 0 returns at 5 s (re-protected there, failback after a 1 s hold).
#   blackhole-connect (issue #19) both ports of rail 0 up but the rail a black hole (b drops all its
#             egress there, both forget their neighbours on it): 4 churn pairs on rail 0 (both
#             directions, no --churn-retry) beside a stream on rail 1; their primary QPs cannot be
#             connected (RoCE finds no neighbour), so each connection starts on its standby pair
#             (rail 1) instead of failing.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
if [[ $VM_ROLE == b ]]; then
  vm_fault rail-down 0
  vm_fault rail-up 0
fi
vm_barrier flapped
pl_shared_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 15
PL_FAULTS=("b 5000 rail-down 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 15

if [[ $VM_ROLE == b ]]; then vm_fault rail-up 0 || vm_log "readdress: fault.sh rail-up 0 failed"; fi
vm_barrier rail0-back
PL_ENV=(HA_NCCL_ENABLE_STANDBY=0)
# The move waits for b's churn pair 0 (due at 0.75 s) to be closed: a pair whose traffic spans the
# move has no standby to go to and fails (correctly); on a loaded CI machine pair 0 was still busy
# at 1 s. Pair 1 is due at 2.25 s, the move takes about 0.5 s.
PL_FAULTS=("b 0 stats-wait \"event\":\"close\" 2" "b 1000 readdress 0")
pl_stream readdress 18722 --one-way --dev 1 --sizes 4K,64K --group 4 --inflight 8 --messages 200 --timeout 120 \
  --churn 8 --churn-dev 0 --churn-retry --min-seconds 12
if [[ $VM_ROLE == b ]]; then vm_fault clear 0 || vm_log "readdress: fault.sh clear 0 failed"; fi
vm_barrier readdress-cleared

# home-down: a's rail 0 down before any comm of the stream exists.
if [[ $VM_ROLE == a ]]; then vm_fault rail-down 0; fi
vm_barrier home-down
PL_ENV=(HA_NCCL_ENABLE_FAILBACK=1 HA_NCCL_FAILBACK_HOLD_MS=1000)
PL_FAULTS=("a 5000 rail-up 0")
pl_stream home-down 18723 "${PL_STREAM_ARGS[@]}" --churn 6 --churn-dev 0 --min-seconds 14

# blackhole-connect: rail 0 up at both ends, but nothing crosses it.
[[ $VM_ROLE == b ]] && vm_fault loss 0 100
ip neigh flush dev "$(vm_rail_if 0)" || vm_log "blackhole-connect: ip neigh flush failed"
vm_barrier blackhole-connect
PL_ENV=(HA_NCCL_ENABLE_FAILBACK=0)
pl_stream blackhole-connect 18724 --one-way --dev 1 --sizes 4K,64K --group 4 --inflight 8 --messages 200 --timeout 120 \
  --churn 4 --churn-dev 0 --min-seconds 10
if [[ $VM_ROLE == b ]]; then vm_fault clear 0 || vm_log "blackhole-connect: fault.sh clear 0 failed"; fi
vm_barrier blackhole-connect-cleared
