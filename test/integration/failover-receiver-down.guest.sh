#!/usr/bin/env bash
# Guest side of failover-receiver-down (issue #4): as failover-sender-down, but rail 0 is pulled on
# a, the receiver of the --one-way stream b -> a, 5 s in. b (the sender) gets no port event.
# Both runs force RDMA READ flushes (HA_NCCL_FORCE_FLUSH=1, --flush-each: every received group
# read back through the NIC before it is checked), so the flushes follow the failover to rail 1.
#   baseline  15 s without a fault
#   fault     15 s; a: fault.sh rail-down 0 at 5 s
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
PL_ENV=(HA_NCCL_FORCE_FLUSH=1)
pl_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 15 --flush-each
PL_FAULTS=("a 5000 rail-down 0")
PL_ENV=(HA_NCCL_FORCE_FLUSH=1)
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 15 --flush-each
