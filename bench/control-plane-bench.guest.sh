#!/usr/bin/env bash
# Guest side of bench/control-plane-bench.sh: a = rank 0 (listener), b = rank 1. The "before"
# plugin (NCCL_HA_CP_BEFORE_PLUGIN) and the "after" plugin (NCCL_HA_CP_AFTER_PLUGIN) driven by the
# current ha-net-driver, HA on, --dev 0 = rxe0 (standby on rxe1), handshake over eth2.
# Per round: before, after, after, before (so that a linear drift of the emulator hits both alike);
# per run: --bw (both directions, 8 in flight, 64K/1M/4M) and --pingpong (8 B, 64 KiB).
# A failed driver run ends the script with exit 1 on both sides (after NCCL_HA_BENCH_RETRIES
# retries, default 0; every failed attempt is kept as NAME.failedN.{json,log} and in failed-runs.tsv).
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver
pl_failover_env  # NCCL_SOCKET_IFNAME=eth2, NCCL_DEBUG=INFO (NET), both rxe devices visible
# HA on; other HA_NCCL_* settings come from the caller (run-pair passes them through) or default.
export NCCL_DEBUG=${NCCL_HA_BENCH_NCCL_DEBUG:-INFO} HA_NCCL_ENABLE_STANDBY=1 HA_NET_DRIVER_QUIET=1
QUICK=${NCCL_HA_BENCH_QUICK:-0}
if [[ $QUICK == 1 ]]; then d_rounds=1 d_bytes=16M d_iters=200; else d_rounds=3 d_bytes=128M d_iters=1000; fi
ROUNDS=${NCCL_HA_BENCH_ROUNDS:-$d_rounds}
BW_BYTES=${NCCL_HA_BENCH_BW_BYTES:-$d_bytes}
LAT_ITERS=${NCCL_HA_BENCH_LAT_ITERS:-$d_iters}
RETRIES=${NCCL_HA_BENCH_RETRIES:-0}  # failed driver runs retried (each one recorded); 0: the first failure ends the bench
declare -A SO=([before]=${NCCL_HA_CP_BEFORE_PLUGIN:?} [after]=${NCCL_HA_CP_AFTER_PLUGIN:?})
for v in before after; do [[ -f ${SO[$v]} ]] || { vm_log "missing $v plugin ${SO[$v]}"; exit 1; }; done
[[ -x $DRIVER ]] || { vm_log "missing driver $DRIVER"; exit 1; }

BW=(--dev 0 --messages 0 --bw --sizes 64K,1M,4M --inflight 8 --bw-bytes "$BW_BYTES" --timeout 900)
LAT=(--dev 0 --messages 0 --pingpong --sizes 8,64K --iters "$LAT_ITERS" --timeout 900)
port=18760

run() { # NAME VARIANT ARGS...: one driver pair with VARIANT's plugin; a failure ends the script
  local name=$1 variant=$2 attempt=0 peer_rc why
  shift 2
  PLUGIN=${SO[$variant]}  # pl_driver_start passes --plugin "$PLUGIN"
  while :; do
    port=$((port + 1))
    [[ $VM_ROLE == b ]] || printf '%s\n' "$name: NCCL_DEBUG=$NCCL_DEBUG NCCL_DEBUG_SUBSYS=$NCCL_DEBUG_SUBSYS NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME $(env | grep '^HA_NCCL_' | sort | paste -sd' ') $DRIVER --plugin $PLUGIN --json \$VM_OUT/$name.json $* --rank 0|1 --listen-port $port|--peer $VM_SELF_MGMT:$port" >>"$VM_OUT/commands.txt"
    pl_driver "$name" "$port" "$@"
    # Both sides take the same decision (a run that failed on one side only would desynchronize them).
    peer_rc=$(vm_exchange "$name-rc-$attempt" "$PL_RC")
    echo "$PL_RC" >"$VM_OUT/$name.rc"
    echo "$PL_MS" >"$VM_OUT/$name.ms"
    if ((PL_RC == 0 && peer_rc == 0)); then
      vm_log "$name: ok in $PL_MS ms"
      return 0
    fi
    attempt=$((attempt + 1))
    why=$(grep -m1 -h 'NCCL WARN' "$VM_OUT/$name.log" || grep -m1 -h 'error:' "$VM_OUT/$name.log" || echo "exit $PL_RC")
    vm_log "$name ($variant, ${SO[$variant]}): driver exit $PL_RC here, $peer_rc at the peer; the end of $VM_OUT/$name.log:"
    tail -n 30 "$VM_OUT/$name.log" >&2 || true
    # Kept, and listed by the report: a retried run is never silent.
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$variant" "$PL_RC" "$peer_rc" "$why" >>"$VM_OUT/failed-runs.tsv"
    for f in json log; do [[ ! -e $VM_OUT/$name.$f ]] || mv "$VM_OUT/$name.$f" "$VM_OUT/$name.failed$attempt.$f"; done
    if ((attempt > RETRIES)); then
      vm_log "$name: failed $attempt time(s), NCCL_HA_BENCH_RETRIES=$RETRIES: giving up"
      exit 1
    fi
    vm_log "$name: retrying ($attempt of NCCL_HA_BENCH_RETRIES=$RETRIES)"
  done
}

# Warm-up (not reported): both plugins load, connect and move data once before anything is timed.
for v in before after; do
  run "warmup-$v" "$v" --dev 0 --messages 64 --sizes 8,64K,1M --inflight 8 --timeout 300
done
for r in $(seq "$ROUNDS"); do
  declare -A nth=([before]=0 [after]=0)
  for v in before after after before; do
    k=$((++nth[$v]))
    run "r$r-$v-$k-bw" "$v" "${BW[@]}"
    run "r$r-$v-$k-lat" "$v" "${LAT[@]}"
  done
done
vm_log "control-plane bench: $ROUNDS round(s) done"
