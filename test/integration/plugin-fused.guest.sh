#!/usr/bin/env bash
# Guest side of plugin-fused (issue #33) on the four-rail bed (run-pair.sh --rails 4). Each stream
# is a --one-way stream b -> a on a fused device of rails 0 and 1 (ha-net-driver --fuse 0,1:
# makeVDevice, as NCCL asks for the ports it merges), every byte verified: the connection is one
# connection per member (rxe0 <-> rxe0, rxe1 <-> rxe1), each with its standby on the next member's
# port (rxe1 for member 1, rxe0 for member 2: preferred over rails 2 and 3), and each message goes
# half over each (equal speeds). Both hosts sample their rails'
# packet counters (PL_COUNTERS). Cases (checks/plugin_fused.py):
#   calm    no fault: both members carry their weight (each rail within 10 % of half the packets);
#           HA_NCCL_FORCE_FLUSH=1 and --flush-each: every received group is read back through each
#           member's loopback QP (a fused iflush is one per member)
#   weights b (the sender: the split is the sender's) reads HA_NCCL_STRIPE_WEIGHTS_FILE, "rxe0 3,
#           rxe1 1" at the start, rewritten to "rxe0 1, rxe1 3" 6 s into the stream (weights.changed_ms: when):
#           rail 0 carries 3/4 of the packets, then 1/4
#   member  b pulls rail 1 at 4 s and restores it at 9 s, failback on with a 2 s hold: member 1's
#           connection fails over to rail 0 (its parts in flight replayed there exactly once, the
#           survivor carries everything), is re-protected on rail 1 when it is back, and fails back
#           after the hold: both rails carry again at the end
#   both    b pulls rail 1 at 4 s; once both members' send comms have their standby up again on
#           rail 2 or 3 (re-protection: no member port is left for them), b pulls rail 0: both
#           members fail over there, the stream completes on rails 2 and 3
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export NCCL_SOCKET_IFNAME=$VM_MGMT_IF
PL_COUNTERS=1
FUSED=("${PL_STREAM_ARGS[@]}" --fuse 0,1)

PL_ENV=(HA_NCCL_FORCE_FLUSH=1)
pl_stream calm 18780 "${FUSED[@]}" --min-seconds 8 --flush-each

# write_weights TEXT: the weights file replaced whole (a new file renamed over it, mode 0644).
WEIGHTS=$VM_OUT/weights.txt
write_weights() { printf '%b' "$1" >"$WEIGHTS.new" && chmod 0644 "$WEIGHTS.new" && mv -f "$WEIGHTS.new" "$WEIGHTS"; }
# reweigh: 6 s after the stream's integrity phase began (its phase file), the weights turn around
# ("<unix_ms>" into weights.changed_ms). At most 120 s of waiting; nothing once the driver ended.
reweigh() {
  local line='' start now deadline=$((SECONDS + 120))
  until [[ $line == "integrity "* ]]; do
    ((SECONDS < deadline)) || return 0
    if [[ -s $VM_OUT/weights.phase ]]; then { read -r line <"$VM_OUT/weights.phase"; } 2>/dev/null || true; fi
    [[ $line == exit-* ]] && return 0
    vm_nap 0.05
  done
  start=${line#integrity }
  pl_now_ms_to now
  ((start + 6000 <= now)) || vm_nap_ms $((start + 6000 - now))
  write_weights 'rxe0 1\nrxe1 3\n'
  pl_now_ms >"$VM_OUT/weights.changed_ms"
  vm_log "weights: rxe0 1, rxe1 3"
}
rm -f "$VM_OUT/weights.phase" "$VM_OUT/weights.changed_ms"
if [[ $VM_ROLE == b ]]; then
  write_weights '# issue 33: the sender splits\nrxe0 3\nrxe1 1\n'
  PL_ENV=("HA_NCCL_STRIPE_WEIGHTS_FILE=$WEIGHTS")
  reweigh &
else
  sleep 0 &
fi
reweigher=$!
pl_stream weights 18782 "${FUSED[@]}" --min-seconds 12
wait "$reweigher" || true

export HA_NCCL_ENABLE_FAILBACK=1 HA_NCCL_FAILBACK_HOLD_MS=2000
# (5 s down: the check judges the survivor's share by the rails' counters from 1 s after the fault
# to the rail's return, sampled every 0.5-1.3 s on a loaded host; 3 s down left one sample there)
PL_FAULTS=("b 4000 rail-down 1" "b 9000 rail-up 1")
pl_stream member 18781 "${FUSED[@]}" --min-seconds 20

export HA_NCCL_ENABLE_FAILBACK=0
up='.*"standby_port":"rxe[23]:1".*"standby":"up"'
PL_FAULTS=("b 4000 rail-down 1" "b 4500 stats-wait \"kind\":\"send\",\"member\":\"rxe0\\+rxe1.1/2\"$up 1"
  "b 4500 stats-wait \"kind\":\"send\",\"member\":\"rxe0\\+rxe1.2/2\"$up 1" "b 4500 rail-down 0")
pl_stream both 18783 "${FUSED[@]}" --min-seconds 16
