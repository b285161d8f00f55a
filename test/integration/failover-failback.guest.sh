#!/usr/bin/env bash
# Guest side of failover-failback (issue #4): HA_NCCL_ENABLE_FAILBACK=1 with a 2 s hold.
# A --one-way stream b -> a on rxe0; a pulls rail 0 at 4 s (failover to rxe1) and restores it at
# 6 s: rxe0 is re-protected, and once it has been healthy for 2 s the sender fails back to it.
# Every byte verified; checks/failover_failback.py judges the run.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export HA_NCCL_ENABLE_FAILBACK=1 HA_NCCL_FAILBACK_HOLD_MS=2000
PL_FAULTS=("a 4000 rail-down 0" "a 6000 rail-up 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 20
