#!/usr/bin/env bash
# Guest side of failover-sender-down (issue #4): a --one-way stream from b (rank 1, sender) to a
# (rank 0, receiver) on rxe0, whose shadow QP is on rxe1; every byte verified.
#   baseline  20 s without a fault (the yardstick for the stall)
#   fault     20 s; b pulls rail 0 (fault.sh rail-down 0) 5 s into the stream: b's port event,
#             one failover per data comm, the stream goes on over rail 1
# Per run and VM: NAME.{rc,ms,json,log,stats.jsonl,phase}, and NAME.fault_ms where the fault ran;
# checks/failover_sender_down.py judges them.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
pl_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 20
PL_FAULTS=("b 5000 rail-down 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 20
