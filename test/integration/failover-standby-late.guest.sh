#!/usr/bin/env bash
# Guest side of failover-standby-late (issue #10, found by the 30-minute soak: a churn comm whose
# primary died while its standby was still being connected ended with "standby ... is
# connecting"). Every new comm connects its standby 8 s late (the test setting
# HA_NCCL_TEST_STANDBY_DELAY_MS, both sides); a --one-way stream b -> a on rxe0 starts at once,
# and a pulls rail 0 0.5 s into it, inside that window: the failover waits for the standby and
# then moves the stream to it (NCCL sees a delay, not an error). Rail 0 comes back at 14 s and is
# re-protected. checks/failover_standby_late.py judges the run.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export HA_NCCL_TEST_STANDBY_DELAY_MS=8000
PL_FAULTS=("a 500 rail-down 0" "a 14000 rail-up 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 22
