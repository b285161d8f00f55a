#!/usr/bin/env bash
# Guest side of failover-reprotect (issue #4): a second failure after re-protection is survived.
# A --one-way stream from b (sender) to a (receiver) on rxe0 with its shadow on rxe1:
#   b: rail-down 0 at 4 s    -> failover rxe0 -> rxe1
#   b: rail-up 0 at 7 s      -> re-protection builds a new standby on rxe0 (GID resolved afresh)
#   b: rail-down 1 at 14 s   -> the second failure: failover rxe1 -> rxe0
#   b: rail-up 1 at 17 s     -> re-protected again on rxe1
# Every byte verified. Then the same with HA_NCCL_MAX_RETRIES=1 (see below).
# checks/failover_reprotect.py judges both runs.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
PL_FAULTS=("b 4000 rail-down 0" "b 7000 rail-up 0" "b 14000 rail-down 1" "b 17000 rail-up 1")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 26
# maxretries: the same faults with HA_NCCL_MAX_RETRIES=1: the second failure is fatal
# (ncclSystemError on both sides, WARN naming HA_NCCL_MAX_RETRIES), never a hang.
PL_ENV=(HA_NCCL_MAX_RETRIES=1)
PL_FAULTS=("b 4000 rail-down 0" "b 7000 rail-up 0" "b 14000 rail-down 1" "b 17000 rail-up 1")
pl_stream maxretries 18722 "${PL_STREAM_ARGS[@]}" --min-seconds 26 --outlive-peer 30
