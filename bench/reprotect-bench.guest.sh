#!/usr/bin/env bash
# Guest side of bench/reprotect-bench.sh: how long a port event waits for the progress thread
# while many comms re-protect at once. a = rank 0, b = rank 1; the "before" plugin
# (NCCL_HA_RP_BEFORE_PLUGIN) and the "after" plugin (NCCL_HA_RP_AFTER_PLUGIN), both driven by the
# current ha-net-driver, HA on, --dev 0 = rxe0 (standby on rxe1), handshakes over eth2.
# Per round: before, after, after, before. Per run:
#   both   --comms N pairs (each rank: N send + N recv comms on rxe0, standbys on rxe1), one verified
#          message each way, then --comms-hold: the pairs stay open with no plugin call
#   a      once the hold began (faults straight with ip link, timed here, not fault.sh):
#            +1 s      eth1 down: every standby on a is lost (b's fail their heartbeats)
#            +4 s      eth1 up: PORT_ACTIVE, a's send comms re-protect at once, b's as their
#                      back-off ends: some 2N standby rebuilds, each a verbs job on a
#            ACTIVE + NCCL_HA_BENCH_FAULT_DELAY_MS (300)
#                      eth0 down: the active rail fails during the rebuild; every comm on a must
#                      start its failover (or find it has no standby yet and fail)
#            +12 s     eth0 up
#          ibv_asyncwatch on rxe0 and rxe1 records when the kernel delivered each event (the wall
#          clock at which an independent process read it); the plugin's WARN lines carry the wall
#          clock at which it logged them (NCCL_DEBUG_TIMESTAMP_LEVELS=WARN); HA_NCCL_STATS_FILE has
#          each comm's failover (its start = time_unix_ms - stall_ms) or fatal record.
# Files per run NAME in $VM_OUT: NAME.{json,log,rc,phase,stats.jsonl}, on a also NAME.faults
# ("<what> <unix us>" lines) and NAME.events-rxe{0,1} ("<unix us> <ibv_asyncwatch line>").
# A driver run that fails before the end of the fault sequence ends the bench (exit 1); one that
# fails later (closing the comms, finalize) is kept and listed in failed-runs.tsv (name, variant,
# exit here, exit at the peer, measured, the first error line).
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver_*
pl_failover_env  # NCCL_SOCKET_IFNAME=eth2, both rxe devices visible
# WARN (what operators run) with wall-clock stamps; HA on, every other HA_NCCL_* from the caller.
export NCCL_DEBUG=WARN NCCL_DEBUG_SUBSYS=INIT,NET HA_NCCL_ENABLE_STANDBY=1 HA_NET_DRIVER_QUIET=1
export NCCL_DEBUG_TIMESTAMP_LEVELS=WARN NCCL_DEBUG_TIMESTAMP_FORMAT='%s.%6f '
COMMS=${NCCL_HA_BENCH_COMMS:-128}
ROUNDS=${NCCL_HA_BENCH_ROUNDS:-3}
DELAY_MS=${NCCL_HA_BENCH_FAULT_DELAY_MS:-300}
HOLD=${NCCL_HA_BENCH_HOLD:-40}  # must cover the fault sequence (~20 s) with room
declare -A SO=([before]=${NCCL_HA_RP_BEFORE_PLUGIN:?} [after]=${NCCL_HA_RP_AFTER_PLUGIN:?})
for v in before after; do [[ -f ${SO[$v]} ]] || { vm_log "missing $v plugin ${SO[$v]}"; exit 1; }; done
[[ -x $DRIVER ]] || { vm_log "missing driver $DRIVER"; exit 1; }
port=18780

now_us() { echo "${EPOCHREALTIME/[.,]/}"; }

sleep_ms() { sleep "$(($1 / 1000)).$(printf '%03d' $(($1 % 1000)))"; }

wait_active() { # RAIL: until rxeRAIL's port is ACTIVE (10 s at most)
  local f=/sys/class/infiniband/rxe$1/ports/1/state i
  for i in $(seq 1000); do
    grep -q ACTIVE "$f" && return 0
    sleep 0.01
  done
  vm_log "rxe$1 did not come back ACTIVE"
  return 1
}

watch_events() { # DEV OUT: DEV's async events, each with the wall clock (us) at which it was read
  (
    echo "$BASHPID" >"$2.pid"
    exec stdbuf -oL ibv_asyncwatch -d "$1"
  ) 2>/dev/null | while IFS= read -r line; do echo "$(now_us) $line"; done >"$2" &
}

stop_watch() { # OUT
  [[ -s $1.pid ]] && kill "$(<"$1.pid")" 2>/dev/null
  rm -f "$1.pid"
}

faults() { # NAME: the fault sequence on a, timed from the start of the hold
  local f=$VM_OUT/$1.faults ev0=$VM_OUT/$1.events-rxe0 ev1=$VM_OUT/$1.events-rxe1
  watch_events rxe0 "$ev0"
  watch_events rxe1 "$ev1"
  sleep 1
  echo "rail1-down $(now_us)" >>"$f"
  ip link set eth1 down
  sleep 4
  echo "rail1-up $(now_us)" >>"$f"
  ip link set eth1 up
  wait_active 1 || true
  echo "rail1-active $(now_us)" >>"$f"
  sleep_ms "$DELAY_MS"
  echo "rail0-down $(now_us)" >>"$f"
  ip link set eth0 down
  echo "rail0-down-returned $(now_us)" >>"$f"
  sleep 12
  ip link set eth0 up
  wait_active 0 || true
  echo "rail0-active $(now_us)" >>"$f"
  sleep 2
  stop_watch "$ev0"
  stop_watch "$ev1"  # each reader loop ends with its watcher
}

run() { # NAME VARIANT: one driver pair with VARIANT's plugin; a failed run ends the script
  local name=$1 variant=$2 peer_rc
  PLUGIN=${SO[$variant]}  # pl_driver_start passes --plugin "$PLUGIN"
  port=$((port + 1))
  rm -f "$VM_OUT/$name".{phase,stats.jsonl,faults,events-rxe0,events-rxe1}
  [[ $VM_ROLE == b ]] || printf '%s\n' "$name: NCCL_DEBUG=$NCCL_DEBUG NCCL_DEBUG_TIMESTAMP_LEVELS=$NCCL_DEBUG_TIMESTAMP_LEVELS $(env | grep '^HA_NCCL_' | sort | paste -sd' ') HA_NCCL_STATS_FILE=\$VM_OUT/$name.stats.jsonl $DRIVER --plugin $PLUGIN --dev 0 --messages 0 --comms $COMMS --comms-hold $HOLD --timeout 900 --phase-file \$VM_OUT/$name.phase" >>"$VM_OUT/commands.txt"
  PL_ENV=("HA_NCCL_STATS_FILE=$VM_OUT/$name.stats.jsonl")
  pl_driver_start "$name" "$port" --dev 0 --messages 0 --comms "$COMMS" --comms-hold "$HOLD" --timeout 900 \
    --phase-file "$VM_OUT/$name.phase"
  PL_ENV=()
  if [[ $VM_ROLE == a ]]; then
    if pl_wait_phase "$VM_OUT/$name.phase" "comms hold" "$PL_PID" 900 >/dev/null; then
      faults "$name"
    else
      vm_log "$name: the hold never began here; no faults"
    fi
  fi
  pl_driver_wait
  echo "$PL_RC" >"$VM_OUT/$name.rc"
  echo "$PL_MS" >"$VM_OUT/$name.ms"
  # Measured = a went through the whole fault sequence during the hold. A run that failed after
  # that (closing, finalize) still gives its figures; it is listed in failed-runs.tsv and the report.
  local measured=0 reply why
  [[ $VM_ROLE == a && -s $VM_OUT/$name.faults ]] && grep -q '^rail0-active ' "$VM_OUT/$name.faults" && measured=1
  reply=$(vm_exchange "$name-rc" "$PL_RC:$measured")
  peer_rc=${reply%%:*}
  [[ $VM_ROLE == a ]] || measured=${reply#*:}
  if ((PL_RC != 0 || peer_rc != 0)); then
    why=$(grep -m1 -h -E 'NCCL WARN .*(reactor|did not finish)|error:' "$VM_OUT/$name.log" || echo "exit $PL_RC")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$variant" "$PL_RC" "$peer_rc" "$measured" "$why" >>"$VM_OUT/failed-runs.tsv"
    vm_log "$name ($variant): driver exit $PL_RC here, $peer_rc at the peer; the end of $VM_OUT/$name.log:"
    tail -n 30 "$VM_OUT/$name.log" >&2 || true
    ((measured)) || exit 1  # it failed before the measurement: no figure, the bench ends
    vm_log "$name: failed after its measurement (kept, listed in the report)"
    return 0
  fi
  vm_log "$name: ok in $PL_MS ms"
}

for r in $(seq "$ROUNDS"); do
  declare -A nth=([before]=0 [after]=0)
  for v in before after after before; do
    run "r$r-$v-$((++nth[$v]))" "$v"
  done
done
vm_log "reprotect bench: $ROUNDS round(s) done"
