#!/usr/bin/env bash
# Guest side of rails-asymmetric (issue #12 items 3 and 6) on the rail-optimised four-rail bed
# whose hosts number their NICs differently (run-pair.sh --rails 4 --rail-order-b 2,3,0,1: b's
# rxe0 is on rail 2, its rxe2 on rail 0). A --one-way stream b -> a on rail 0 (a's rxe0, b's
# rxe2, as NCCL would pick them by topology), every byte verified. Each host's own first choice of
# a standby port names another rail (a: rxe1 = rail 1, b: rxe0 = rail 2), which the other host
# cannot reach; the standby both ends agree on is on one rail at both ends.
#   +5 s   b pulls rail 0 (its rxe2): failover onto the standby
#   +12 s  a pulls the rail the stream runs on then: failover onto the re-protected standby
# checks/rails_asymmetric.py judges NAME.{rc,json,log,stats.jsonl,fault_ms} and rails.txt.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export NCCL_SOCKET_IFNAME=$VM_MGMT_IF

dev=${VM_RAIL_DEV_0#rxe}  # the plugin numbers its devices by name: rxeN is device N
args=()
for x in "${PL_STREAM_ARGS[@]}"; do args+=("$x"); done
for i in "${!args[@]}"; do [[ ${args[i]} == --dev ]] && args[i + 1]=$dev; done
PL_FAULTS=("b 5000 rail-down 0" "a 12000 active-down")
pl_stream asymmetric 18763 "${args[@]}" --min-seconds 20
