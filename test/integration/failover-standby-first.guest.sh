#!/usr/bin/env bash
# Guest side of failover-standby-first (issue #4): the standby's rail (1) pulled on a 4 s into the
# --one-way stream b -> a: the plugin must report the standby down on both sides and go on on
# rail 0; then rail 0 pulled on a at 12 s: no path left, ncclSystemError on both sides.
#   slow      (issue #19) a delays rail 1's frames by 6 s (netem) 3 s in: every standby misses its
#             heartbeats (100 ms) and is marked down, though it is connected (the hardware retry
#             window, HA_NCCL_QP_TIMEOUT=19: 15 s, outlasts the delay); right after a's stats
#             say so, rail 0 down on a (the delayed answers come back, and the standby up, 6 s
#             after the delay began: with a 4 s delay, fault.sh's 2-3 s under load, when it ran as a
#             script, sometimes pulled rail 0 after that); the failover tries the slow standby (bounded by
#             HA_NCCL_FAILOVER_TIMEOUT_MS=15000 here) and the stream survives on it; 5 s later
#             the delay ends (a delay of seconds carries data at a crawl: rxe resends what is in
#             flight at every timeout) and the stream runs on rail 1 alone. (This stream
#             replaced the test's unfaulted baseline: plugin-traffic and the other failover tests
#             stream without faults.)
#   fault     a: rail-down 1 at 4 s, rail-down 0 at 12 s (a fault takes 0.1 s, the standby-down detection up to 3.6 s more: this leaves the stream on rail 0 alone
#             for a while)
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
silent='"kind":"recv".*"state":"down","why":"no.heartbeat.answered.for'
PL_ENV=(HA_NCCL_HEARTBEAT_MS=100 HA_NCCL_FAILOVER_TIMEOUT_MS=15000 HA_NCCL_QP_TIMEOUT=19)
PL_FAULTS=("a 3000 delay 1 6000" "a 0 stats-wait $silent 1" "a 0 rail-down 0" "a 0 pause 5000" "a 0 clear 1")
pl_stream slow 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 12
if [[ $VM_ROLE == a ]]; then  # both rails as they were for the next stream
  vm_fault clear 1 || vm_log "slow: fault.sh clear 1 failed"
  vm_fault clear 0 || vm_log "slow: fault.sh clear 0 failed"
fi
vm_barrier slow-cleared
PL_FAULTS=("a 4000 rail-down 1" "a 12000 rail-down 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 20 --outlive-peer 30
