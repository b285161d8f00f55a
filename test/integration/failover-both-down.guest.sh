#!/usr/bin/env bash
# Guest side of failover-both-down (issue #4): rail 0 and then at once rail 1 pulled on a (the
# receiver) 5 s into the --one-way stream b -> a. No path left: both drivers must end with
# ncclSystemError from the plugin (exit 3) within the bound, never hang or crash. --outlive-peer
# keeps each driver polling its own plugin after the other side gave up, so each side's plugin
# must report the failure by itself (a gets port events, b only its RTO and failover timeout).
#   baseline  15 s without a fault; pl_shared_stream: run once per boot for the tests of the
#             boot that ask for the same one
#   fault     a: rail-down 0 at 5 s, rail-down 1 right after
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
pl_shared_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 15
PL_FAULTS=("a 5000 rail-down 0" "a 0 rail-down 1")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 20 --outlive-peer 30
