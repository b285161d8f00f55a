#!/usr/bin/env bash
# Guest side of failover-reprotect (issue #4): a second failure after re-protection is survived,
# ten times in a row in one boot (fault1 .. fault10, each its own driver pair and port).
# Each is a --one-way stream from b (sender) to a (receiver) on rxe0 with its shadow on rxe1:
#   b: rail-down 0 at 4 s    -> failover rxe0 -> rxe1
#   b: rail-up 0 at 7 s      -> re-protection builds a new standby on rxe0 (GID resolved afresh)
#   b: rail-down 1 at 14 s   -> the second failure: failover rxe1 -> rxe0
#   b: rail-up 1 at 17 s     -> re-protected again on rxe1
# The schedule is not shortened: fault.sh takes 0.1-3 s under TCG (5-7 s seen under host load),
# and re-protection up to 3.2 s more (its back-off) after the port is back; a shorter gap between
# rail-up 0 and rail-down 1 took both paths at once in a loaded run. 10 x ~30 s.
# Every byte verified; each stream ends with both rails up, so the next starts clean. Then, once,
# the same faults with HA_NCCL_MAX_RETRIES=1 (see below).
# checks/failover_reprotect.py judges every run.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
REPEATS=10      # checks/failover_reprotect.py: REPEATS
MIN=26          # --min-seconds of each faultN stream (checks/failover_reprotect.py: MIN_SECONDS)
for i in $(seq "$REPEATS"); do
  PL_FAULTS=("b 4000 rail-down 0" "b 7000 rail-up 0" "b 14000 rail-down 1" "b 17000 rail-up 1")
  pl_stream "fault$i" $((18730 + i)) "${PL_STREAM_ARGS[@]}" --min-seconds $MIN
done
# maxretries: the same faults with HA_NCCL_MAX_RETRIES=1: the second failure is fatal
# (ncclSystemError on both sides, WARN naming HA_NCCL_MAX_RETRIES), never a hang.
PL_ENV=(HA_NCCL_MAX_RETRIES=1)
PL_FAULTS=("b 4000 rail-down 0" "b 7000 rail-up 0" "b 14000 rail-down 1" "b 17000 rail-up 1")
pl_stream maxretries 18722 "${PL_STREAM_ARGS[@]}" --min-seconds 26 --outlive-peer 30
