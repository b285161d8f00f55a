#!/usr/bin/env bash
# Guest side of bench/plugin-bench.sh: a = client / rank 0 side, b = server / rank 1, rail 0.
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver, test/vm/lib.sh
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

run_driver() { # NAME ARGS...
  local name=$1
  shift
  pl_driver "$name" 18700 --messages 0 --timeout 600 "$@"
  ((PL_RC == 0)) || vm_log "$name: rank $([[ $VM_ROLE == a ]] && echo 0 || echo 1) exit $PL_RC"
}

# NAME ARGS...: this tree's plugin as NAME; with a baseline (NCCL_HA_BENCH_BEFORE_PLUGIN) also the
# baseline's as before-NAME, with NCCL_HA_BENCH_HA_OFF=1 this tree's with HA off
# (HA_NCCL_ENABLE_STANDBY=0: no standby pair, no heartbeats) as off-NAME, and with
# NCCL_HA_BENCH_FUSE=1 this tree's on the fused device of rails 0 and 1 as fused-NAME, with
# NCCL_HA_BENCH_SHARP_PLUGIN NVIDIA's sharp plugin on rail 0 as sharp-NAME and on the fused device as
# sharp-fused-NAME; their order turns by one each round, so that no variant always runs first after
# perftest.
BEFORE=${NCCL_HA_BENCH_BEFORE_PLUGIN:-}
AFTER=$PLUGIN
VARIANTS=(after)
[[ -z $BEFORE ]] || VARIANTS+=(before)
[[ ${NCCL_HA_BENCH_HA_OFF:-0} != 1 ]] || VARIANTS+=(off)
[[ ${NCCL_HA_BENCH_FUSE:-0} != 1 ]] || VARIANTS+=(fused)
SHARP=${NCCL_HA_BENCH_SHARP_PLUGIN:-}
[[ -z $SHARP ]] || VARIANTS+=(sharp sharp-fused)
driver() {
  local name=$1 i n=${#VARIANTS[@]} which
  shift
  for ((i = 0; i < n; i++)); do
    which=${VARIANTS[(i + round - 1) % n]}
    case $which in
      after) PLUGIN=$AFTER run_driver "$name" "$@" ;;
      before) PLUGIN=$BEFORE run_driver "before-$name" "$@" ;;
      off) PL_ENV=(HA_NCCL_ENABLE_STANDBY=0); PLUGIN=$AFTER run_driver "off-$name" "$@"; PL_ENV=() ;;
      # rails 0 and 1 fused (makeVDevice): each message striped over a connection on each, every
      # member's bytes in the stats file (the members' shares)
      fused)
        PL_ENV=("HA_NCCL_IB_HCA==rxe0,rxe1" "HA_NCCL_STATS_FILE=$VM_OUT/fused-$name.stats.jsonl")
        PLUGIN=$AFTER run_driver "fused-$name" "$@" --fuse 0,1
        PL_ENV=() ;;
      # The sharp plugin's IB transport reads NCCL's own variables (NCCL_SOCKET_IFNAME as exported).
      # NCCL_DEBUG=NONE: its WARN for a device without a PCI path (rxe's) passes a char for a %s,
      # which NCCL (and the driver) format only when NCCL_DEBUG asks for WARN lines. It keeps its
      # async thread and the device's fds after finalize: not checked (--no-release-checks), and
      # it stays loaded (--no-dlclose: that thread runs on).
      sharp)
        PL_ENV=("NCCL_IB_HCA==rxe0" NCCL_DEBUG=NONE)
        PLUGIN=$SHARP run_driver "sharp-$name" "$@" --no-release-checks --no-dlclose
        PL_ENV=() ;;
      sharp-fused)
        PL_ENV=("NCCL_IB_HCA==rxe0,rxe1" NCCL_DEBUG=NONE)
        PLUGIN=$SHARP run_driver "sharp-fused-$name" "$@" --fuse 0,1 --no-release-checks --no-dlclose
        PL_ENV=() ;;
    esac
  done
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
  driver "r$round-plugin-lat-jit" --pingpong --sizes "$(sizes_csv "${LAT_SIZES[@]}")" --iters 300 --lat-ahead 1
done
run_driver plugin-comms --comms 256  # memory of this tree only
