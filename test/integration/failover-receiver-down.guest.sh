#!/usr/bin/env bash
# Guest side of failover-receiver-down (issue #4): as failover-sender-down, but rail 0 is pulled on
# a, the receiver of the --one-way stream b -> a, 5 s in. b (the sender) gets no port event.
#   baseline  20 s without a fault
#   fault     20 s; a: fault.sh rail-down 0 at 5 s
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
pl_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 20
PL_FAULTS=("a 5000 rail-down 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 20
