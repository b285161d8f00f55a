#!/usr/bin/env bash
# Guest side of bench/failover-bench.sh: a = rank 0 (receiver of the one-way streams, perftest
# server), b = rank 1 (sender, perftest client). Everything on --dev 0 = rxe0 = rail 0; its standby
# is wherever the plugin puts it (rxe1 on the two-rail bed; on four rails the pair both ends rank
# first: another NIC, another rail, the least loaded ports). Handshakes over $VM_MGMT_IF.
#  overhead  --bw (both directions, 96 MiB per size) with HA_NCCL_ENABLE_STANDBY=1 vs 0, interleaved
#  memory    --comms N send/recv pairs open at once, with and without the standby QPs
#  stall     one-way 64 KiB streams (--verify sampled: the timeline measures the network, not the
#            emulated CPU); per case an unfaulted run, then the same with the fault at 4 s:
#            sender (b) rail-down 0, receiver (a) rail-down 0, black hole (a: 100 % loss on rail 0);
#            the rail is restored (fault.sh clear 0) after each case; NCCL_HA_BENCH_STALL_RUNS=N
#            faulted runs per case (stall-NAME, stall-NAME-r2, ..., the rail restored after each)
#  member    (issue #33) the stall stream on a fused device of rails 0 and 1 (--fuse 0,1: a
#            connection on each, each message split between them, each member's standby on the
#            other member's port), b's rail 1 pulled at 4 s: only that member fails over, onto rail 0
#  backup-bw a one-way 4 MiB stream (sampled verification), b's rail 0 pulled at 5 s: the rest
#            runs on the standby; then ib_write_bw (same direction, 4 MiB, 8 in flight) on the rail
#            the stream failed over to (each side's from its stats: pl_stream_rail; written to
#            backup-rail.txt) and on rail 0
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"
pl_failover_env
export NCCL_SOCKET_IFNAME=$VM_MGMT_IF  # pl_failover_env's eth2 is a rail on the four-rail bed
# The plugin numbers its devices by name (--dev 0 = rxe0); the faults below name rail 0.
[[ $(vm_rdma_dev 0) == rxe0 ]] || vm_die "rail 0 is $(vm_rdma_dev 0), not rxe0 (--rail-order is not supported)"
export NCCL_DEBUG=${NCCL_HA_BENCH_NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET}
# Every log line stamped with the wall clock in ms (a failover's timeline read from the logs)
export NCCL_DEBUG_TIMESTAMP_LEVELS=WARN,INFO NCCL_DEBUG_TIMESTAMP_FORMAT='%s.%3f '
ROUNDS=${NCCL_HA_BENCH_ROUNDS:-4}
# The parts to run (NCCL_HA_BENCH_PARTS, failover-bench.sh --parts): all by default.
PARTS=" ${NCCL_HA_BENCH_PARTS:-overhead memory stall member backup} "
part() { [[ $PARTS == *" $1 "* ]]; }
STALL_SECONDS=${NCCL_HA_BENCH_STALL_SECONDS:-12}
STALL_RUNS=${NCCL_HA_BENCH_STALL_RUNS:-1}
# NAME ROLE RAIL FAULT...: after stall-NAME-base (unfaulted), the faulted stream STALL_RUNS times
# (stall-NAME, stall-NAME-r2, ...), ROLE's FAULT at 4 s, its rail RAIL restored after each run.
stall_case() {
  local name=$1 role=$2 rail=$3 fault=$4 run
  shift 4
  bench_stream "stall-$name-base" "$@"
  for ((run = 1; run <= STALL_RUNS; run++)); do
    PL_FAULTS=("$role 4000 $fault")
    bench_stream "stall-$name$( ((run == 1)) || echo "-r$run")" "$@"
    restore "$role" "$rail"
  done
}
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

perftest_bw() { # NAME RAIL_A RAIL_B ARGS...: ib_write_bw, server on a's rail RAIL_A, client on b's
  local name=$1 rail=$2 p=18800 peer=VM_PEER_RAIL$2  # rail RAIL_B (b -> a like the streams)
  [[ $VM_ROLE == b ]] && rail=$3
  local dev
  dev=$(vm_rdma_dev "$rail")
  shift 3
  if [[ $VM_ROLE == a ]]; then
    timeout 300 ib_write_bw -d "$dev" -x 1 -F -p $p "$@" >"$VM_OUT/$name.log" 2>&1 &
    local pid=$!
    vm_wait_listen $p
    vm_barrier "$name"
    wait $pid || vm_log "$name: server exit $?"
  else
    vm_barrier "$name"
    timeout 300 ib_write_bw -d "$dev" -x 1 -F -p $p "$@" "${!peer}" >"$VM_OUT/$name.log" 2>&1 || vm_log "$name: client exit $?"
  fi
  vm_barrier "$name-done"
}

restore() { # ROLE [RAIL]: undo the fault of the last case on ROLE's rail RAIL (0)
  local rail=${2:-0}
  [[ $VM_ROLE == "$1" ]] && { vm_fault clear "$rail" || vm_log "fault.sh clear $rail failed"; }
  vm_barrier "restored-$port"
}

# (i) HA overhead: the same --bw run with and without the standby QP, interleaved A-B, B-A, ...
# so that the emulator's drift hits both alike; every size moves the same volume.
BW=(--dev 0 --messages 0 --bw --sizes 64K,1M,4M --inflight 8 --bw-bytes "${NCCL_HA_BENCH_BW_BYTES:-96M}" --timeout 600)
part overhead || ROUNDS=0
for r in $(seq "$ROUNDS"); do
  order=(ha single)
  ((r % 2)) || order=(single ha)
  for mode in "${order[@]}"; do
    [[ $mode == single ]] && PL_ENV=(HA_NCCL_ENABLE_STANDBY=0)
    bench_driver "r$r-bw-$mode" "${BW[@]}"
  done
done

# (iv) Memory per comm with and without the standby.
if part memory; then
  bench_driver comms-ha --dev 0 --messages 0 --comms "$COMMS" --timeout 600
  PL_ENV=(HA_NCCL_ENABLE_STANDBY=0)
  bench_driver comms-single --dev 0 --messages 0 --comms "$COMMS" --timeout 600
fi

# (ii) Stall excess: each fault against an unfaulted run of the same length.
STALL=(--one-way --dev 0 --sizes 64K --inflight 8 --messages 100 --timeout 120 --min-seconds "$STALL_SECONDS"
  --verify sampled)
cases=()
part stall && cases=("sender b rail-down 0" "receiver a rail-down 0" "blackhole a loss 0 100")
for case in ${cases[@]+"${cases[@]}"}; do
  read -r name role fault <<<"$case"
  stall_case "$name" "$role" 0 "$fault" "${STALL[@]}"
done
# A fused device's member lost: the same stream on --fuse 0,1, b's rail 1 pulled.
if part member; then
  stall_case member b 1 "rail-down 1" --one-way --fuse 0,1 --sizes 64K --inflight 8 --messages 100 --timeout 120 \
    --min-seconds "$STALL_SECONDS" --verify sampled
fi
part backup || exit 0

# (iii) Bandwidth on the standby after a failover, against perftest on the rail the stream
# failed over to (and on rail 0).
PL_FAULTS=("b 5000 rail-down 0")
bench_stream backup-bw --one-way --dev 0 --sizes 4M --inflight 8 --messages 16 --timeout 120 --min-seconds 20 \
  --verify sampled
restore b
# The rail each side's data comm ran on at the end (its last stats record's `active`: where the
# failover took it); on a the receive comm, on b the send comm.
mine=$(pl_stream_rail backup-bw active) || { mine=-; vm_log "backup-bw: no active port in the stats"; }
peer=$(vm_exchange backup-rail "$mine")
echo "$mine $peer" >"$VM_OUT/backup-rail.txt"  # this side's rail, the peer's
rail_a=$mine rail_b=$peer
[[ $VM_ROLE == a ]] || { rail_a=$peer rail_b=$mine; }
PERF=(-s 4194304 -n 64 -t 8)
if [[ $rail_a == - || $rail_b == - ]]; then
  vm_log "backup-bw: the backup's rail is not known on both sides: no ib_write_bw on it"
else
  backup_log=write_bw-rail$rail_a
  [[ $rail_a == "$rail_b" ]] || backup_log+=-$rail_b
  perftest_bw "$backup_log" "$rail_a" "$rail_b" "${PERF[@]}"
fi
perftest_bw write_bw-rail0 0 0 "${PERF[@]}"
