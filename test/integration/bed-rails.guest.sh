#!/usr/bin/env bash
# The bed's own rails test (test/vm/smoke-rails.sh) as a VM integration test; CMakeLists.txt
# boots it with --rails 4 --islands 0-1,2-3 --rail-order-b 2,3,0,1: every rail reaches the
# same rail of the peer whatever the device numbering, cross-rail RoCE works inside an island
# and fails across islands, fault.sh acts per rail. First, the plugin's view of the four rails
# (ha-ping --list --json: railId, planeId, speed per device) into $VM_OUT/list.json, and again
# with NCCL_IB_HCA naming each device's rail (10 + the bed's rail) and plane (its island) into
# list-hca.json, before smoke-rails takes a rail down; that run also asks makeVDevice to fuse
# ports (--fuse: inside an island, across islands, all four, a port twice, a port that is not
# there), and once more with NCCL_IB_MERGE_NICS=0 (list-nomerge.json). Then a --one-way stream b -> a
# on the fused device of each host's devices 0 and 1 (ha-net-driver --fuse 0,1; islands known,
# HA_NCCL_ISLAND_PREFIX_LEN=15): a's are rails 0 and 1, b's rails 2 and 3, so each member's own pair
# crosses islands and must never be tried (issue #33 item 4): each member starts on a pair inside an
# island (fused-islands.*). Checked by checks/bed_rails.py.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
rc=0
"$BUILD/tools/ha-ping/ha-ping" --list --json --plugin "$BUILD/src/plugin/libnccl-net-ha.so" >"$VM_OUT/list.json" \
  2>"$VM_OUT/list.log" || rc=$?
echo "$rc" >"$VM_OUT/list.rc"
hca= rc=0
while read -r rail _ dev _ _ _ island; do
  [[ $rail == \#* ]] || hca+=${hca:+,}$dev:1:$((10 + rail)):$island
done <"$VM_OUT/rails.txt"
NCCL_IB_HCA=$hca "$BUILD/tools/ha-ping/ha-ping" --list --json --plugin "$BUILD/src/plugin/libnccl-net-ha.so" \
  --fuse 0,1 --fuse 0,2 --fuse 0,1,2,3 --fuse 1,1 --fuse 0,9 >"$VM_OUT/list-hca.json" 2>"$VM_OUT/list-hca.log" || rc=$?
echo "$rc" >"$VM_OUT/list-hca.rc"
rc=0
NCCL_IB_HCA=$hca NCCL_IB_MERGE_NICS=0 "$BUILD/tools/ha-ping/ha-ping" --list --json \
  --plugin "$BUILD/src/plugin/libnccl-net-ha.so" --fuse 0,1 >"$VM_OUT/list-nomerge.json" 2>"$VM_OUT/list-nomerge.log" \
  || rc=$?
echo "$rc" >"$VM_OUT/list-nomerge.rc"
(
  source "$REPO/test/integration/plugin-lib.sh"
  pl_failover_env
  export NCCL_SOCKET_IFNAME=$VM_MGMT_IF HA_NCCL_ISLAND_PREFIX_LEN=15
  pl_stream fused-islands 18790 "${PL_STREAM_ARGS[@]}" --fuse 0,1 --min-seconds 6
)
exec "$REPO/test/vm/smoke-rails.sh" "$@"
