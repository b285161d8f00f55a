#!/usr/bin/env bash
# Guest side of bench/plugin-bench.sh: a = client / rank 0 side, b = server / rank 1, rail 0.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
source "$REPO/test/vm/lib.sh"
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
DRIVER=$BUILD/tools/ha-net-driver/ha-net-driver
PLUGIN=$BUILD/src/plugin/libnccl-net-ha.so
export NCCL_SOCKET_IFNAME=eth2 HA_NCCL_IB_HCA==rxe0
ROUNDS=${NCCL_HA_BENCH_ROUNDS:-2}
BW_SIZES=(65536 262144 1048576 4194304 16777216)
LAT_SIZES=(8 64 512 4096 65536)
BW_BYTES=$((64 * 1024 * 1024))  # per size and run

perftest() { # NAME TOOL ARGS...: server on b, client on a
  local name=$1 tool=$2 port=18800
  shift 2
  if [[ $VM_ROLE == b ]]; then
    timeout 300 "$tool" -d rxe0 -x 1 -F -p $port "$@" >"$VM_OUT/$name.log" 2>&1 &
    local pid=$!
    vm_wait_listen $port
    vm_barrier "$name"
    wait $pid || vm_log "$name: server exit $?"
  else
    vm_barrier "$name"
    timeout 300 "$tool" -d rxe0 -x 1 -F -p $port "$@" "$VM_PEER_RAIL0" >"$VM_OUT/$name.log" 2>&1 || vm_log "$name: client exit $?"
  fi
}

driver() { # NAME ARGS...
  local name=$1
  shift
  local common=(--plugin "$PLUGIN" --messages 0 --timeout 600 --json "$VM_OUT/$name.json" "$@")
  if [[ $VM_ROLE == a ]]; then
    "$DRIVER" "${common[@]}" --rank 0 --listen-port 18700 2>"$VM_OUT/$name.log" &
    local pid=$!
    vm_wait_listen 18700
    vm_barrier "$name"
    wait $pid || vm_log "$name: rank 0 exit $?"
  else
    vm_barrier "$name"
    "$DRIVER" "${common[@]}" --rank 1 --peer "$VM_PEER_MGMT:18700" 2>"$VM_OUT/$name.log" || vm_log "$name: rank 1 exit $?"
  fi
}

sizes_csv() { local IFS=,; echo "$*"; }

for round in $(seq "$ROUNDS"); do
  for s in "${BW_SIZES[@]}"; do
    n=$((BW_BYTES / s)); ((n >= 16)) || n=16
    perftest "r$round-write_bw-$s" ib_write_bw -b -s "$s" -n "$n" -t 8  # both directions, like the driver
  done
  driver "r$round-plugin-bw" --bw --sizes "$(sizes_csv "${BW_SIZES[@]}")" --inflight 8 --bw-messages 64
  for s in "${LAT_SIZES[@]}"; do
    perftest "r$round-write_lat-$s" ib_write_lat -s "$s" -n 300
  done
  driver "r$round-plugin-lat" --pingpong --sizes "$(sizes_csv "${LAT_SIZES[@]}")" --iters 300
done
driver plugin-comms --comms 256
