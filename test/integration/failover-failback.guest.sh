#!/usr/bin/env bash
# Guest side of failover-failback (issues #4, #19): failback as it is by default (on, with HA), with
# a 2 s hold. A --one-way stream b -> a on rxe0; a pulls rail 0 at 4 s (failover to rxe1) and
# restores it at 6 s: rxe0 is re-protected, and once it has been healthy for 2 s the sender fails
# back to it. Both hosts sample their rails' packet counters (PL_COUNTERS): from hold + 5 s after
# the rail came back, at least 90 % of the packets run on rail 0 again.
# Every byte verified; checks/failover_failback.py judges the run.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
unset HA_NCCL_ENABLE_FAILBACK  # the default
export HA_NCCL_FAILBACK_HOLD_MS=2000
PL_COUNTERS=1
PL_FAULTS=("a 4000 rail-down 0" "a 6000 rail-up 0")
# 24 s: the samples from hold + 5 s after rail 0 is ACTIVE again need 2 s of stream left even when
# the port takes 3-4 s to come up under load (one CI run had 1.5 s of it left at 20 s).
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 24
