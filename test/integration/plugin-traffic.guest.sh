#!/usr/bin/env bash
# Guest side of plugin-traffic: libnccl-net-ha.so driven by ha-net-driver (loaded the way NCCL
# loads it) between the two VMs on rail 0; a runs rank 0, b rank 1.
#  post-send  ha-ping on rail 0: the wall time of a bare ibv_post_send here (the yardstick)
#  integrity  sizes 0 B .. 4 MiB mixed, grouped receives (4), 8 in flight, every byte checked
#  large      16 MiB and 64 MiB messages
#  small      100000 8-byte messages
#  comms      maxComms send/recv comm pairs open at once, then closed: fds and MRs back
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/vm/lib.sh"
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
DRIVER=$BUILD/tools/ha-net-driver/ha-net-driver
PLUGIN=$BUILD/src/plugin/libnccl-net-ha.so
HA_PING=$BUILD/tools/ha-ping/ha-ping
export NCCL_SOCKET_IFNAME=eth2 NCCL_DEBUG=${NCCL_DEBUG:-WARN} HA_NCCL_IB_HCA==rxe0

driver() { # NAME ARGS...: one driver run, rank 0 on a, rank 1 on b
  local name=$1 rc=0 start=$SECONDS
  shift
  local common=(--plugin "$PLUGIN" --json "$VM_OUT/$name.json" --timeout 300 "$@")
  if [[ $VM_ROLE == a ]]; then
    "$DRIVER" "${common[@]}" --rank 0 --listen-port 18700 2>"$VM_OUT/$name.log" &
    local pid=$!
    vm_wait_listen 18700
    vm_barrier "$name"
    wait $pid || rc=$?
  else
    vm_barrier "$name"
    "$DRIVER" "${common[@]}" --rank 1 --peer "$VM_PEER_MGMT:18700" 2>"$VM_OUT/$name.log" || rc=$?
  fi
  echo "$rc" >"$VM_OUT/$name.rc"
  vm_log "$name: exit $rc after $((SECONDS - start)) s"
  tail -n 30 "$VM_OUT/$name.log" >&2
}

# The yardstick: ha-ping's bare ibv_post_send timings on rail 0.
if [[ $VM_ROLE == b ]]; then
  "$HA_PING" --rails 0 --sizes 8,64K --iters 50 --bw-iters 16 --json-file "$VM_OUT/post-send.json" >/dev/null 2>&1 &
  pid=$!
  vm_wait_listen 18600
  vm_barrier post-send
  wait $pid || true
else
  vm_barrier post-send
  "$HA_PING" --rails 0 --sizes 8,64K --iters 50 --bw-iters 16 --json-file "$VM_OUT/post-send.json" "$VM_PEER_MGMT" >/dev/null 2>&1 || true
fi

driver integrity --sizes 0,1,8,4K,64K,1M,4M --messages 1000 --group 4 --inflight 8 --optional-recv
driver large --sizes 16M,64M --messages 8 --inflight 2
driver small --sizes 8 --messages 100000 --inflight 8
max_comms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["properties"]["maxComms"])' "$VM_OUT/integrity.json" 2>/dev/null || echo 256)
echo "$max_comms" >"$VM_OUT/max-comms"
driver comms --messages 0 --comms "$max_comms"
