#!/usr/bin/env bash
# Guest side of rails-sequential (issue #12 items 4 and 5) on the rail-optimised four-rail bed
# (run-pair.sh --rails 4: rail r of a reaches rail r of b and nothing else). HA defaults.
#   spread      --comms 6 on rxe0 (each rank 6 send + 6 receive comms: 12 connections per node),
#               held open 14 s without a plugin call; 3 s into the hold b pulls rail 0: every
#               connection fails over, on the reactor alone. The standbys chosen at connect time
#               spread over rails 1-3, and so do the failovers (checked in the stats: the 'standby_port'
#               ports, the failovers' 'to' ports, the 'ports' counts).
#   home        (issue #19 item 2) failback as by default (2 s hold): a --one-way stream b -> a on
#               rxe0; b's rail 0 down at 4 s for 3 s. The stream fails over to its standby, whose
#               re-protection (rail 0 still down) lands on a third rail; when rail 0 is back the
#               standby moves there (make-before-break) and the stream fails back: from hold + 5 s
#               after rail 0 came back, at least 90 % of both hosts' packets (rxe counters) run on
#               rail 0 again.
#   double-host (issue #19 item 3) a --one-way stream b -> a on rxe0; 3 s in, b takes down the rail
#               of its comm's active path and that of its standby, at once: no RDMA path of the
#               connection is left while two rails are up at both ends. The sender builds a new
#               path over TCP (the rescue service) on one of them and the comm fails over to it,
#               replaying what was in flight: every byte arrives, exactly once.
#   double-split the same with the two ports lost on different hosts: a takes down its active
#               rail, b its standby's rail, at the same moment (a barrier). The port events come
#               up to seconds apart on the emulated guests, so the standby is lost during or right
#               after the failover to it, before re-protection rebuilt one: either way no path is left.
#               In both, re-protection is held 6 s after a standby was lost (the test setting
#               HA_NCCL_TEST_REPROTECT_DELAY_MS), so that "before re-protection finished" holds
#               however far apart the port events come; a rescue is required in both.
#               After each, the rails taken down come back up.
#   sequential  a --one-way stream b -> a on rxe0, every byte verified; the rail the stream's comm
#               runs on is pulled three times, 7 s apart (on b, a, b): after each failover
#               re-protection builds the standby on a rail still up (a third, then a fourth
#               port), and the stream completes on the last rail.
# checks/rails_sequential.py judges NAME.{rc,json,log,stats.jsonl,fault_ms} and rails.txt.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export NCCL_SOCKET_IFNAME=$VM_MGMT_IF

name=spread
rm -f "$VM_OUT/$name".*
PL_ENV=("HA_NCCL_STATS_FILE=$VM_OUT/$name.stats.jsonl")
pl_driver_start "$name" 18760 --dev 0 --comms 6 --comms-hold 14 --messages 0 --timeout 120 --phase-file "$VM_OUT/$name.phase"
PL_ENV=()
if [[ $VM_ROLE == b ]] && pl_wait_phase "$VM_OUT/$name.phase" "comms hold" "$PL_PID" >/dev/null; then
  sleep 3
  t0=$(pl_now_ms)
  vm_fault rail-down 0 || vm_log "$name: fault.sh rail-down 0 failed"
  echo "$t0 $(pl_now_ms) rail-down 0" >>"$VM_OUT/$name.fault_ms"
fi
pl_driver_wait
echo "$PL_RC" >"$VM_OUT/$name.rc"
vm_log "$name: exit $PL_RC after $PL_MS ms"
[[ $VM_ROLE == b ]] && vm_fault rail-up 0
vm_barrier "$name-done"

PL_ENV=(HA_NCCL_ENABLE_FAILBACK=1 HA_NCCL_FAILBACK_HOLD_MS=2000)  # 1: the default (pl_failover_env turns it off)
PL_COUNTERS=1
PL_FAULTS=("b 4000 rail-down 0" "b 7000 rail-up 0")
pl_stream home 18762 "${PL_STREAM_ARGS[@]}" --min-seconds 22
PL_COUNTERS=

# Brings back up every rail this side took down in stream NAME (its NAME.fault_ms).
rails_up() { # NAME
  local r
  for r in $(awk '$3 == "rail-down" { gsub(/\+/, " ", $4); print $4 }' "$VM_OUT/$1.fault_ms" 2>/dev/null); do
    vm_fault rail-up "$r" || vm_log "$1: fault.sh rail-up $r failed"
  done
  vm_barrier "$1-rails-up"
}

# Re-protection held 6 s after a standby is lost (test setting): on the emulated guests the two
# port events of a double fault can come seconds apart, and a re-protection finished in between
# would leave a standby for the second loss: no rescue to test. A rescue's own attempts are not held.
PL_ENV=(HA_NCCL_TEST_REPROTECT_DELAY_MS=6000)
PL_FAULTS=("b 3000 both-paths-down")
pl_stream double-host 18763 "${PL_STREAM_ARGS[@]}" --min-seconds 12
rails_up double-host

PL_ENV=(HA_NCCL_TEST_REPROTECT_DELAY_MS=6000)
PL_FAULTS=("a 3000 barrier split" "a 0 active-down" "b 3000 barrier split" "b 0 standby-down")
pl_stream double-split 18764 "${PL_STREAM_ARGS[@]}" --min-seconds 12
rails_up double-split

PL_FAULTS=("b 4000 active-down" "a 11000 active-down" "b 18000 active-down")
pl_stream sequential 18761 "${PL_STREAM_ARGS[@]}" --min-seconds 26
