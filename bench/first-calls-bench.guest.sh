#!/usr/bin/env bash
# Guest side of bench/first-calls-bench.sh: a = rank 0, b = rank 1, rail 0 (standby on rail 1).
# Each run is a fresh process: init, one connection, its buffers registered, then at once a short
# stream (the calls right after connect, while HA brings the standby pair up), for every API
# version and with HA on and off (HA_NCCL_ENABLE_STANDBY=0), in an order that alternates by round
# and version. NCCL_HA_BENCH_ARGS: the stream (default 32 messages of 4 MiB, 8 in flight).
# NCCL_HA_BENCH_BEFORE_PLUGIN (first-calls-bench.sh --baseline): a third mode, `before`, that
# plugin with HA on.
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver, test/vm/lib.sh
export NCCL_SOCKET_IFNAME=eth2 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
unset HA_NCCL_IB_HCA NCCL_IB_HCA
ROUNDS=${NCCL_HA_BENCH_ROUNDS:-3}
APIS=(${NCCL_HA_BENCH_APIS:-6 7 8 9 10 11 12})
BENCH_ARGS=${NCCL_HA_BENCH_ARGS:---sizes 4194304 --messages 32 --inflight 8}
ARGS=(--dev 0 $BENCH_ARGS --timeout 120)
echo "$BENCH_ARGS" >"$VM_OUT/args.txt"

AFTER=$PLUGIN
MODES=(on off)
[[ -z ${NCCL_HA_BENCH_BEFORE_PLUGIN:-} ]] || MODES+=(before)
run() { # NAME MODE API
  local name=$1 mode=$2 api=$3 standby=1
  [[ $mode != off ]] || standby=0
  PL_ENV=(HA_NCCL_ENABLE_STANDBY=$standby)
  PLUGIN=$AFTER
  [[ $mode != before ]] || PLUGIN=$NCCL_HA_BENCH_BEFORE_PLUGIN
  pl_driver "$name" 18760 "${ARGS[@]}" --api "$api"
  PL_ENV=() PLUGIN=$AFTER
  ((PL_RC == 0)) || vm_log "$name: rank $([[ $VM_ROLE == a ]] && echo 0 || echo 1) exit $PL_RC"
}

# The boot's first run pays for a cold start (its registrations took 4-6 times the later ones):
# one run of each mode first, not counted, in the order NCCL_HA_BENCH_WARMUP gives (the modes').
for mode in ${NCCL_HA_BENCH_WARMUP:-${MODES[*]}}; do run "warmup-$mode" "$mode" 12; done
for round in $(seq "$ROUNDS"); do
  for api in "${APIS[@]}"; do
    k=$(((round + api) % ${#MODES[@]}))  # the order turns by round and version
    for mode in "${MODES[@]:k}" "${MODES[@]:0:k}"; do
      run "r$round-v$api-$mode" "$mode" "$api"
    done
  done
done
