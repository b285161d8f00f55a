#!/usr/bin/env bash
# Guest side of rails-islands (issue #12 items 2, 3 and 6) on the four-rail bed with islands
# (run-pair.sh --rails 4 --islands 0-1,2-3: rails 0 and 1 reach each other across the two hosts,
# so do rails 2 and 3, nothing crosses between the islands), HA_NCCL_ISLAND_PREFIX_LEN=15 (rails
# 10.20-10.23.0.0/24: islands 10.20.0.0/15 and 10.22.0.0/15). A --one-way stream b -> a on rxe0,
# every byte verified:
#   +4 s   b pulls rails 1 and 2, +6 s a pulls rail 3: the only standby both ends can reach is
#          b's rxe3 <-> a's rxe2, a cross-rail pair inside the island of rails 2-3; b's rxe3 <->
#          a's rxe1 (rail 1 is a's natural standby port) would cross islands and must never be tried.
#          The sender's first choices are refused by a (its ports down) and it falls back to the
#          next pair at once.
#   then   b waits until its stream comm's standby is up on its rxe3 <-> a's device 2, and pulls
#          rail 0 (+14 s at the earliest): the failover goes onto the cross-rail path, the stream completes there.
# checks/rails_islands.py judges NAME.{rc,json,log,stats.jsonl,fault_ms} and rails.txt.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export NCCL_SOCKET_IFNAME=$VM_MGMT_IF HA_NCCL_ISLAND_PREFIX_LEN=15

PL_FAULTS=("b 4000 rail-down 1" "b 4000 rail-down 2" "a 6000 rail-down 3"
  'b 8000 stats-wait "kind":"send".*"standby_port":"rxe3:1".*"standby_peer_dev":2,.*"state":"up" 1' "b 14000 rail-down 0")
pl_stream islands 18762 "${PL_STREAM_ARGS[@]}" --min-seconds 26
