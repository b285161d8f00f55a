#!/usr/bin/env bash
# Guest side of failover-blackhole (issue #4): a silently drops every frame it sends on rail 0
# (fault.sh loss 0 100: netem, the port stays ACTIVE, no port event anywhere) 5 s into the 15 s
# --one-way stream b -> a. Only the plugin's soft RTO (HA_NCCL_RTO_MS, default 1000) can notice.
#   baseline  15 s without a fault; pl_shared_stream: run once per boot for the tests of the
#             boot that ask for the same one
#   fault     15 s; a: fault.sh loss 0 100 at 5 s
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
pl_shared_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 15
PL_FAULTS=("a 5000 loss 0 100")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 15
