#!/usr/bin/env bash
# Guest side of failover-reprotect (issue #4): a second failure after re-protection is survived,
# six times in a row in one boot (fault1 .. fault6, each its own driver pair and port).
# Each is a --one-way stream from b (sender) to a (receiver) on rxe0 with its standby on rxe1:
#   b: rail-down 0 at 3 s    -> failover rxe0 -> rxe1
#   b: rail-up 0             -> re-protection builds a new standby on rxe0 (GID resolved afresh)
#   b: rail-down 1           -> the second failure: failover rxe1 -> rxe0
#   b: rail-up 1             -> re-protected again on rxe1; then b ends the stream (stop)
# Each fault follows the plugin, not a clock: a rail comes up once this side's failover records of
# both of its comms (the stream's and the ring's idle one) are written, and rail 1 goes down once
# both sides' records say both comms are protected again (each side waits for its own, then the
# two meet at a barrier). So the second failure never takes both paths at once however slow
# a fault (0.05-0.1 s, 2-7 s when fault.sh ran as a script in a loaded guest) or re-protection is,
# and no stream waits longer than its faults need (these streams ran a fixed 26 s each before).
# Every byte verified; each stream ends with both rails up, so the next starts clean. Then, once,
# the same faults with HA_NCCL_MAX_RETRIES=1 (see below).
# checks/failover_reprotect.py judges every run.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
REPEATS=6       # checks/failover_reprotect.py: REPEATS
MIN=6           # --min-seconds of each faultN stream (checks/failover_reprotect.py: MIN_SECONDS)
# Stats regexes (no spaces): KIND's failover record; KIND's standby up after its Nth failover.
failed_over() { echo "\"event\":\"failover\".*\"kind\":\"$1\""; }
protected() { echo "\"kind\":\"$1\".*\"standby\":\"up\",\"failovers\":$2,"; }
# Appended to PL_FAULTS: b takes RAIL down (AT ms into the stream, or as soon as the steps before
# are done), waits for failover N of both its comms, brings RAIL up.
fail_rail() { # RAIL N [AT]
  PL_FAULTS+=("b ${3:-0} rail-down $1" "b 0 stats-wait $(failed_over send) $2" "b 0 stats-wait $(failed_over recv) $2"
              "b 0 rail-up $1")
}
# Appended to PL_FAULTS: each side waits until both of its comms are protected again after failover
# N, and the two meet (barrier TAG).
reprotected() { # N TAG
  PL_FAULTS+=("a 0 stats-wait $(protected recv "$1") 1" "a 0 stats-wait $(protected send "$1") 1" "a 0 barrier $2"
              "b 0 stats-wait $(protected send "$1") 1" "b 0 stats-wait $(protected recv "$1") 1" "b 0 barrier $2")
}
for i in $(seq "$REPEATS"); do
  PL_FAULTS=()
  fail_rail 0 1 3000
  reprotected 1 up0
  fail_rail 1 2
  reprotected 2 up1
  PL_FAULTS+=("b 0 stop")
  pl_stream "fault$i" $((18730 + i)) "${PL_STREAM_ARGS[@]}" --min-seconds $MIN
done
# maxretries: the same faults with HA_NCCL_MAX_RETRIES=1: the second failure is fatal
# (ncclSystemError on both sides, WARN naming HA_NCCL_MAX_RETRIES), never a hang. The stream ends
# with that error (its --min-seconds is never reached); rail 1 comes back 3 s after it went down.
PL_ENV=(HA_NCCL_MAX_RETRIES=1)
PL_FAULTS=()
fail_rail 0 1 3000
reprotected 1 up0
PL_FAULTS+=("b 0 rail-down 1" "b 0 pause 3000" "b 0 rail-up 1")
pl_stream maxretries 18722 "${PL_STREAM_ARGS[@]}" --min-seconds 26 --outlive-peer 30
