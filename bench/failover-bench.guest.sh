#!/usr/bin/env bash
# Guest side of bench/failover-bench.sh: a = rank 0 (receiver of the one-way streams, perftest
# server), b = rank 1 (sender, perftest client). Everything on --dev 0 = rxe0, backup rxe1.
#  overhead  --bw (both directions, 96 MiB per size) with HA_NCCL_ENABLE_BACKUP=1 vs 0, interleaved
#  memory    --comms N send/recv pairs open at once, with and without the shadow QPs
#  stall     one-way 64 KiB streams (--verify sampled: the timeline measures the network, not the
#            emulated CPU); per case an unfaulted run, then the same with the fault at 4 s:
#            sender (b) rail-down 0, receiver (a) rail-down 0, black hole (a: 100 % loss on rail 0);
#            the rail is restored (fault.sh clear 0) after each case
#  backup-bw a one-way 4 MiB stream (sampled verification), b's rail 0 pulled at 5 s: the rest
#            runs on rxe1; then ib_write_bw (same direction, 4 MiB, 8 in flight) on rail 1 and 0
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"
pl_failover_env
export NCCL_DEBUG=${NCCL_HA_BENCH_NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}
ROUNDS=${NCCL_HA_BENCH_ROUNDS:-4}
STALL_SECONDS=${NCCL_HA_BENCH_STALL_SECONDS:-12}
COMMS=${NCCL_HA_BENCH_COMMS:-256}
port=18740

bench_driver() { # NAME ARGS...: pl_driver on the next port, records NAME.rc
  port=$((port + 1))
  pl_driver "$1" "$port" "${@:2}"
  echo "$PL_RC" >"$VM_OUT/$1.rc"
  ((PL_RC == 0)) || vm_log "$1: exit $PL_RC"
  PL_ENV=()
}

bench_stream() { # NAME ARGS...: pl_stream (PL_FAULTS apply) on the next port
  port=$((port + 1))
  pl_stream "$1" "$port" "${@:2}"
}

perftest_bw() { # NAME RAIL ARGS...: ib_write_bw, server on a, client on b (b -> a like the streams)
  local name=$1 rail=$2 p=18800
  shift 2
  if [[ $VM_ROLE == a ]]; then
    timeout 300 ib_write_bw -d "rxe$rail" -x 1 -F -p $p "$@" >"$VM_OUT/$name.log" 2>&1 &
    local pid=$!
    vm_wait_listen $p
    vm_barrier "$name"
    wait $pid || vm_log "$name: server exit $?"
  else
    local peer=$VM_PEER_RAIL0
    [[ $rail == 1 ]] && peer=$VM_PEER_RAIL1
    vm_barrier "$name"
    timeout 300 ib_write_bw -d "rxe$rail" -x 1 -F -p $p "$@" "$peer" >"$VM_OUT/$name.log" 2>&1 || vm_log "$name: client exit $?"
  fi
  vm_barrier "$name-done"
}

restore() { # ROLE: undo the fault of the last case on ROLE's rail 0
  [[ $VM_ROLE == "$1" ]] && { vm_fault clear 0 || vm_log "fault.sh clear 0 failed"; }
  vm_barrier "restored-$port"
}

# (i) HA overhead: the same --bw run with and without the shadow QP, interleaved A-B, B-A, ...
# so that the emulator's drift hits both alike; every size moves the same volume.
BW=(--dev 0 --messages 0 --bw --sizes 64K,1M,4M --inflight 8 --bw-bytes "${NCCL_HA_BENCH_BW_BYTES:-96M}" --timeout 600)
for r in $(seq "$ROUNDS"); do
  order=(ha single)
  ((r % 2)) || order=(single ha)
  for mode in "${order[@]}"; do
    [[ $mode == single ]] && PL_ENV=(HA_NCCL_ENABLE_BACKUP=0)
    bench_driver "r$r-bw-$mode" "${BW[@]}"
  done
done

# (iv) Memory per comm with and without the backup.
bench_driver comms-ha --dev 0 --messages 0 --comms "$COMMS" --timeout 600
PL_ENV=(HA_NCCL_ENABLE_BACKUP=0)
bench_driver comms-single --dev 0 --messages 0 --comms "$COMMS" --timeout 600

# (ii) Stall excess: each fault against an unfaulted run of the same length.
STALL=(--one-way --dev 0 --sizes 64K --inflight 8 --messages 100 --timeout 120 --min-seconds "$STALL_SECONDS"
  --verify sampled)
for case in "sender b rail-down 0" "receiver a rail-down 0" "blackhole a loss 0 100"; do
  read -r name role fault <<<"$case"
  bench_stream "stall-$name-base" "${STALL[@]}"
  PL_FAULTS=("$role 4000 $fault")
  bench_stream "stall-$name" "${STALL[@]}"
  restore "$role"
done

# (iii) Bandwidth on the backup after a failover, against perftest on rail 1 (and rail 0).
PL_FAULTS=("b 5000 rail-down 0")
bench_stream backup-bw --one-way --dev 0 --sizes 4M --inflight 8 --messages 16 --timeout 120 --min-seconds 20 \
  --verify sampled
restore b
perftest_bw write_bw-rail1 1 -s 4194304 -n 64 -t 8
perftest_bw write_bw-rail0 0 -s 4194304 -n 64 -t 8
