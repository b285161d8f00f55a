#!/usr/bin/env bash
# Guest side of failover-sender-down (issue #4): a --one-way stream from b (rank 1, sender) to a
# (rank 0, receiver) on rxe0, whose standby QP is on rxe1; every byte verified.
#   baseline  15 s without a fault (the yardstick for the stall); pl_shared_stream: run once per
#             boot for the tests of the boot that ask for the same one
#   fault     15 s; b pulls rail 0 (fault.sh rail-down 0) 5 s into the stream: b's port event,
#             one failover per data comm, the stream goes on over rail 1
# Per run and VM: NAME.{rc,ms,json,log,stats.jsonl,phase}, and NAME.fault_ms where the fault ran;
# the fault run also writes the Prometheus snapshot HA_NCCL_PROM_FILE=/tmp/fault_%h_%p.prom every
# 200 ms: copied to out/ as mid.fault_<host>_<pid>.prom 12 s into the stream (7 s after the fault,
# rail 0 still down) and as fault_<host>_<pid>.prom after the run.
# checks/failover_sender_down.py judges them.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
pl_shared_stream baseline 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 15

rm -f /tmp/fault_*.prom
(  # the mid-stream copy of the snapshot
  deadline=$((SECONDS + 300))
  until [[ -s $VM_OUT/fault.phase && $(<"$VM_OUT/fault.phase") == "integrity "* ]]; do
    [[ -s $VM_OUT/fault.phase && $(<"$VM_OUT/fault.phase") == exit-* ]] && exit 0  # the stream ended early
    ((SECONDS < deadline)) || exit 0
    sleep 0.1
  done
  sleep 12
  # cat, not cp: the plugin renames a new snapshot over the file every 200 ms, and cp skips a file
  # replaced while it copies ("replaced while being copied"); cat reads the one it opened.
  for f in /tmp/fault_*.prom; do
    if [[ -e $f ]]; then cat "$f" >"$VM_OUT/mid.${f##*/}" || vm_log "fault: copying $f failed"; fi
  done
  exit 0
) &
copier=$!
PL_ENV=("HA_NCCL_PROM_FILE=/tmp/fault_%h_%p.prom" "HA_NCCL_PROM_INTERVAL_MS=200")
PL_FAULTS=("b 5000 rail-down 0")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 15
wait "$copier" || true
for f in /tmp/fault_*.prom; do
  if [[ -e $f ]]; then cp "$f" "$VM_OUT/"; fi
done
ls -l "$VM_OUT"/*.prom >&2 || vm_log "fault: no Prometheus snapshot written"
