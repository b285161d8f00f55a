#!/usr/bin/env bash
# Guest side of failover-standby-first (issue #4): the standby's rail (1) pulled on a 4 s into the
# --one-way stream b -> a: the plugin must report the standby down on both sides and go on on
# rail 0; then rail 0 pulled on a at 12 s: no path left, ncclSystemError on both sides.
#   baseline  20 s without a fault
#   fault     a: rail-down 1 at 4 s, rail-down 0 at 12 s (fault.sh itself may take 3 s under TCG,
#             the standby-down detection up to 3.6 s more: this leaves the stream on rail 0 alone
#             for a while)
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
pl_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 20
PL_FAULTS=("a 4000 rail-down 1" "a 12000 rail-down 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 20 --outlive-peer 30
