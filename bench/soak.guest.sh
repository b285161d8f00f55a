#!/usr/bin/env bash
# Guest side of bench/soak.sh: one long verified stream between the VMs while VM a injects the
# faults of a schedule (bench/soak_schedule.py) and the driver opens and closes comm pairs.
#   a = rank 0, b = rank 1; the ring on --dev 0 (rxe0, standby rxe1), both directions, every byte
#   verified (--verify full), --min-seconds = the soak's length; --churn N pairs on --churn-dev 1
#   (rxe1, standby rxe0: told apart from the ring in the stats by their primary port);
#   --check-resources: fds, threads, QPs, MRs after the stream == after connect (RSS reported).
#   HA_NCCL_ENABLE_FAILBACK=1 and HA_NCCL_RTO_MS=7517 (unless set otherwise; see below): traffic
#   returns to rail 0 after each fault, so the plugin's failback path runs too.
# VM a runs the schedule (NCCL_HA_SOAK_SCHEDULE: "<at_ms> <kind> [args]" lines) against the
# integrity phase's start (the phase file). "active" and "standby" are resolved when an event is
# due, from the last stats record of the ring's two comms here; a fault that needs a protected
# ring (everything but recover) waits until both comms have their standby up and (with failback)
# are back on rail 0, at most NCCL_HA_SOAK_SETTLE_S (60) s, else it is skipped and recorded as
# such: taking the active rail down without a standby would end the stream by design.
# Every event goes to $VM_OUT/soak.events: "<due_ms> <start_unix_ms> <end_unix_ms> <kind> <rail>
# <waited_ms> <status> <fault.sh args>" (status ok | failed | skipped:<why>).
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"
pl_failover_env
export NCCL_DEBUG=${NCCL_HA_SOAK_NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=INIT,NET
export HA_NCCL_ENABLE_FAILBACK=${HA_NCCL_ENABLE_FAILBACK:-1}
# The plugin's own advice on this bed (its init WARN: rxe raises the QP timeout to 17, so the soft
# RTO should be at least twice the hardware retry window, 7517 ms): with the default 1000 ms a
# guest starved by a loaded host (other VM runs on the 2 cores) fails healthy paths over, and when
# the peer is starved too the failover is not confirmed in time and the connection fails
# ("no usable path left"), which ended a trial within seconds at host load 10. Black holes are
# then found after ~7.5 s instead of ~1 s. HA_NCCL_RTO_MS=1000 soaks the default on a quiet host.
export HA_NCCL_RTO_MS=${HA_NCCL_RTO_MS:-7517}
MINUTES=${NCCL_HA_SOAK_MINUTES:?}
CHURN=${NCCL_HA_SOAK_CHURN:?}
SCHEDULE=${NCCL_HA_SOAK_SCHEDULE:?}
SETTLE_S=${NCCL_HA_SOAK_SETTLE_S:-60}
# --churn-retry (default): a churn connection refused because a rail is down is retried and
# counted, not fatal (the plugin fails a new connection whose primary port is down at either end).
CHURN_RETRY=()
[[ ${NCCL_HA_SOAK_CHURN_RETRY:-1} == 1 ]] && CHURN_RETRY=(--churn-retry)
SECONDS_TOTAL=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
PORT=18790
NAME=soak
STATS=$VM_OUT/$NAME.stats.jsonl
EVENTS=$VM_OUT/$NAME.events
# shellcheck disable=SC2054 # commas inside --sizes
ARGS=(--dev 0 --sizes 0,8,4K,64K,1M --group 4 --inflight 8 --messages 100 --verify full
  --min-seconds "$SECONDS_TOTAL" --timeout $((SECONDS_TOTAL + 900))
  --churn "$CHURN" --churn-dev 1 --check-resources --phase-file "$VM_OUT/$NAME.phase" "${CHURN_RETRY[@]}")

rm -f "$STATS" "$EVENTS" "$VM_OUT/$NAME.phase"
{ env | grep -E '^(HA_NCCL_|NCCL_)' | sort; } >"$VM_OUT/$NAME.env"
PL_ENV=("HA_NCCL_STATS_FILE=$STATS" "HA_NCCL_PROM_FILE=$VM_OUT/$NAME.prom" "HA_NCCL_PROM_INTERVAL_MS=5000")
pl_driver_start "$NAME" "$PORT" "${ARGS[@]}"
# shellcheck disable=SC2034 # read by plugin-lib.sh
PL_ENV=()

# The last stats record of each ring comm, read incrementally (one process per look: the guest's
# vCPU is busy with the stream, and every process costs it).
RING=()
declare -A RING_LAST=()
STATS_OFF=0
STATS_NEW=/tmp/soak.stats.new # the guest's /dev has no /dev/fd: no process substitution here
ring_update() {
  [[ -s $STATS ]] || return 0
  local line c LC_ALL=C
  tail -c +$((STATS_OFF + 1)) "$STATS" >"$STATS_NEW" 2>/dev/null || return 0
  while IFS= read -r line; do # a last line without its newline yet is left for the next look
    STATS_OFF=$((STATS_OFF + ${#line} + 1))
    for c in "${RING[@]}"; do
      if [[ $line == *"\"comm\":\"$c\""* ]]; then RING_LAST[$c]=$line; fi
    done
  done <"$STATS_NEW"
  return 0
}

# RS_ACTIVE (the ring's active rail here) and RS_PROT (1: both ring comms have their standby up,
# on the same active rail, and with failback on that rail is 0). No record yet: rail 0, not protected.
ring_state() {
  local c line a s
  ring_update
  RS_ACTIVE='' RS_PROT=1
  for c in "${RING[@]}"; do
    line=${RING_LAST[$c]:-}
    if [[ -z $line ]]; then RS_ACTIVE=0 RS_PROT=0; return; fi
    a=${line#*\"active\":\"rxe}
    a=${a%%:*}
    s=${line#*\"standby\":\"}
    s=${s%%\"*}
    [[ $s == up ]] || RS_PROT=0
    if [[ -z $RS_ACTIVE ]]; then RS_ACTIVE=$a; elif [[ $RS_ACTIVE != "$a" ]]; then RS_PROT=0; fi
  done
  [[ $HA_NCCL_ENABLE_FAILBACK == 1 && $RS_ACTIVE != 0 ]] && RS_PROT=0
  return 0
}

# Waits (at most SETTLE_S) until the ring is protected in two looks a second apart (b's side
# follows within it); leaves ring_state's RS_ACTIVE / RS_PROT and the wait in WAITED_MS.
wait_protected() {
  local t0 deadline=$((SECONDS + SETTLE_S)) stable=0
  t0=$(pl_now_ms)
  while :; do
    ring_state
    if ((RS_PROT)); then
      stable=$((stable + 1))
      ((stable >= 2)) && break
    else
      stable=0
    fi
    ((SECONDS < deadline)) || break
    sleep 1
  done
  WAITED_MS=$(($(pl_now_ms) - t0))
}

run_schedule() {
  local start_ms at kind args due wait_ms active prot waited rail fargs status t0 t1 r
  start_ms=$(pl_wait_phase "$VM_OUT/$NAME.phase" integrity "$PL_PID" 600) || {
    vm_log "the integrity phase never started: no faults injected"
    return 0
  }
  vm_log "integrity phase started at $start_ms; schedule $SCHEDULE"
  local ring_line
  ring_line=$(grep -m1 -o 'ring: send comm 0x[0-9a-f]*, recv comm 0x[0-9a-f]*' "$VM_OUT/$NAME.log" || true)
  [[ -n $ring_line ]] || { vm_log "no 'ring:' line in the driver log: cannot tell the ring's comms"; return 1; }
  local send=${ring_line#*send comm }
  RING=("${send%%,*}" "${ring_line##* }")
  vm_log "ring comms: ${RING[*]}"
  while read -r at kind args; do
    [[ -z $at || $at == \#* ]] && continue
    due=$((start_ms + at))
    wait_ms=$((due - $(pl_now_ms)))
    ((wait_ms <= 0)) || sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
    kill -0 "$PL_PID" 2>/dev/null || { vm_log "the driver ended: schedule stopped at +$at ms"; break; }
    waited=0 active=0 rail=- status=ok
    if [[ $kind != recover ]]; then
      wait_protected
      active=$RS_ACTIVE prot=$RS_PROT waited=$WAITED_MS
      if [[ $prot != 1 ]]; then
        status="skipped:not-protected-after-${SETTLE_S}s"
      fi
    fi
    case $kind in
      rail-down) rail=$active; fargs="rail-down $rail" ;;
      flap) rail=$active; fargs="flap $rail $args" ;;
      blackhole) rail=$active; fargs="loss $rail 100" ;;
      standby-down) rail=$((1 - active)); fargs="rail-down $rail" ;;
      recover) fargs="clear 0+1" ;;
      *) vm_log "unknown event kind '$kind'"; status="skipped:unknown-kind"; fargs=- ;;
    esac
    t0=$(pl_now_ms)
    if [[ $status == ok ]]; then
      if [[ $kind == recover ]]; then
        for r in 0 1; do vm_fault clear "$r" || status=failed; done
      else
        # shellcheck disable=SC2086
        vm_fault $fargs || status=failed
      fi
    fi
    t1=$(pl_now_ms)
    echo "$at $t0 $t1 $kind $rail $waited $status $fargs" >>"$EVENTS"
    vm_log "event +$at ms: $kind (rail $rail, $fargs): $status at +$((t0 - start_ms)) ms, waited ${waited} ms for protection"
  done <"$SCHEDULE"
}

if [[ $VM_ROLE == a ]]; then
  run_schedule || vm_log "the schedule failed"
fi
pl_driver_wait
echo "$PL_RC" >"$VM_OUT/$NAME.rc"
echo "$PL_MS" >"$VM_OUT/$NAME.ms"
vm_log "$NAME: exit $PL_RC after $PL_MS ms"
if [[ $VM_ROLE == a ]]; then
  for r in 0 1; do vm_fault clear "$r" || true; done
fi
vm_fault status >"$VM_OUT/fault-status.txt" 2>&1 || true
tail -n 40 "$VM_OUT/$NAME.log" >&2
vm_barrier "$NAME-done"
exit "$PL_RC"
