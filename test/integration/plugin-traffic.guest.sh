#!/usr/bin/env bash
# Guest side of plugin-traffic: libnccl-net-ha.so driven by ha-net-driver (loaded the way NCCL
# loads it) between the two VMs on rail 0; a runs rank 0, b rank 1.
#  post-send  ha-ping on rail 0: the wall time of a bare ibv_post_send here (the yardstick)
#  integrity  sizes 0 B .. 4 MiB mixed, grouped receives (4), 8 in flight, every byte checked
#  large      16 MiB and 64 MiB messages
#  small      12000 8-byte messages (the receive FIFO and the credits wrap hundreds of times)
#  flush      HA_NCCL_FORCE_FLUSH=1: every received group flushed by an RDMA READ (--flush-each)
#  comms      maxComms send/recv comm pairs open at once, then closed: fds and MRs back
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN HA_PING, pl_driver, test/vm/lib.sh
export NCCL_SOCKET_IFNAME=eth2 NCCL_DEBUG=${NCCL_DEBUG:-WARN} HA_NCCL_IB_HCA==rxe0

driver() { # NAME ARGS...: one driver run, rank 0 on a, rank 1 on b
  local name=$1
  shift
  pl_driver "$name" 18700 --timeout 300 "$@"
  echo "$PL_RC" >"$VM_OUT/$name.rc"
  vm_log "$name: exit $PL_RC after $((PL_MS / 1000)) s"
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

driver integrity --sizes 0,1,8,4K,64K,1M,4M --messages 600 --group 4 --inflight 8 --optional-recv
# One 64 MiB RDMA write takes ~2 s under TCG; the soft RTO allows 1 s plus the write at a tenth
# of the port's reported rate (2.15 s at rxe's 2500 Mb/s), a thin margin on a loaded host.
PL_ENV=(HA_NCCL_RTO_MS=15000)
driver large --sizes 16M,64M --messages 8 --inflight 2
PL_ENV=()
driver small --sizes 8 --messages 12000 --inflight 8
PL_ENV=(HA_NCCL_FORCE_FLUSH=1 "HA_NCCL_STATS_FILE=$VM_OUT/flush.stats.jsonl")
driver flush --sizes 0,1,8,4K,64K --messages 400 --group 4 --inflight 8 --flush-each
PL_ENV=()
max_comms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["properties"]["maxComms"])' "$VM_OUT/integrity.json" 2>/dev/null || echo 256)
echo "$max_comms" >"$VM_OUT/max-comms"
driver comms --messages 0 --comms "$max_comms"
