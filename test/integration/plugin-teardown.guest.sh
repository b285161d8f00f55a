#!/usr/bin/env bash
# Guest side of plugin-teardown (issue #10): closing and finalizing through the real
# libnccl-net-ha.so, real verbs on rxe, real processes. Rank 0 in VM a, rank 1 in VM b.
#   late-writes    rank 0 closes a recv comm whose clear-to-send entries rank 1 holds, keeps its
#                  buffers registered and poisons them; rank 1 isends into them: nothing lands,
#                  rank 1's sends fail or never complete. Rank 0's reaper waits 5 s before each
#                  destruction (HA_NCCL_TEST_REAPER_DELAY_MS, as on a dead port), so only the
#                  ERROR transition at close can keep the data out.
#   finalize-open  8 comm pairs with requests outstanding, finalize without closing them (rank 1
#                  300 ms later, its control tasks busy with rank 0's vanished QPs): no crash,
#                  finalize bounded, a WARN naming the open comms, everything released (fds, QPs,
#                  MRs, threads) once the plugin's background threads are done (--linger: QPs
#                  whose peer vanished with writes in flight can take the kernel long).
#   late-close     one ring (send and recv comm each way, standbys on rail 1), traffic, then rank 1
#                  closes 5 s after rank 0 (--close-late): rank 0's orderly close tells rank 1, so
#                  neither logs a WARN or writes a failover, standby-down or fatal stats record.
#   dead-rail      64 comm pairs stream 4 KiB messages; each VM takes rail 0 down (fault.sh) 2 s
#                  into the stream; the comms fail over to rail 1; 3 s later every comm is closed
#                  and the plugin finalized. The QPs left on the dead port take long to destroy
#                  (HA_NCCL_TEST_REAPER_DELAY_MS=500:down, 0.5 s each; 5 s each on b; TEARDOWN_DEAD_DELAY=0:
#                  the kernel's own time): finalize must return within 2 s (calls.finalize). Rank 0
#                  lingers after dlclose until the plugin's background reaper is done (its INFO
#                  line, its threads gone, fds back); rank 1 exits at once: dead-rail.exit_ms is
#                  how long the process took to exit after writing its report (QPs still in the
#                  kernel). Rail 0 comes back up afterwards.
#   abort          NCCL's abort (ncclCommAbort / ncclCommRevoke) with dead ports: 16 comm pairs
#                  stream 4 KiB messages; 2 s in, a takes both of its rails down (no path left:
#                  the comms fail or are failing over), and 1 s later both ranks close every comm
#                  at once with its requests outstanding (--fault abort), then finalize. QPs on a's
#                  dead ports take 1 s each to destroy (HA_NCCL_TEST_REAPER_DELAY_MS=1000:down).
#                  Every deregMr + close and finalize return within 1 s on both ranks. a's rails
#                  stay down (the last case; plugin-teardown is last in its boot group).
# Each run records NAME.rc, NAME.ms (wall), NAME.json and NAME.log in $VM_OUT; check.py
# (checks/plugin_teardown.py) judges them. The script itself always exits 0.
# TEARDOWN_PLUGIN=PATH runs the same with another build of the plugin (a "before" measurement),
# TEARDOWN_CASES="late-writes ..." only the cases named (run-pair.sh --env passes both).
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver, test/vm/lib.sh

PLUGIN=${TEARDOWN_PLUGIN:-$PLUGIN}
CASES=" ${TEARDOWN_CASES:-late-writes finalize-open late-close dead-rail abort} "
want() { [[ $CASES == *" $1 "* ]]; }
export NCCL_SOCKET_IFNAME=eth2
unset HA_NCCL_QP_RETRY_CNT HA_NCCL_QP_TIMEOUT HA_NCCL_IB_HCA NCCL_IB_HCA

# NAME.exit_ms: from the report written ("exit-N <ms>" in NAME.phase) to the process's end, i.e.
# what the exit cost (with QPs still being destroyed by the kernel, if any).
exit_cost() { # NAME END_MS
  local line
  line=$(cat "$VM_OUT/$1.phase" 2>/dev/null || true)
  if [[ $line == exit-* ]]; then echo $(($2 - ${line#* })) >"$VM_OUT/$1.exit_ms"; fi
}

record() { # NAME
  echo "$PL_RC" >"$VM_OUT/$1.rc"
  echo "$PL_MS" >"$VM_OUT/$1.ms"
  vm_log "$1: exit $PL_RC after $PL_MS ms"
  vm_barrier "$1-done"
}

export NCCL_DEBUG=WARN
if want late-writes; then
  [[ $VM_ROLE == a ]] && PL_ENV=(HA_NCCL_TEST_REAPER_DELAY_MS=5000)
  pl_driver late-writes 18731 --fault late-writes --sizes 64K --timeout 60
  PL_ENV=()
  record late-writes
fi

export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
if want finalize-open; then
  pl_driver finalize-open 18732 --fault finalize-open --comms 8 --sizes 1M --timeout 60 --linger 120 \
    --phase-file "$VM_OUT/finalize-open.phase"
  exit_cost finalize-open "$(pl_now_ms)"
  record finalize-open
fi
if want late-close; then  # quiet endings: rank 1 closes its ring 5 s after rank 0, as at a job's end
  late=()
  [[ $VM_ROLE == b ]] && late=(--close-late 5)
  PL_ENV=("HA_NCCL_STATS_FILE=$VM_OUT/late-close.stats.jsonl")
  pl_driver late-close 18734 --sizes 4K,64K --messages 200 --min-seconds 3 --timeout 60 ${late[@]+"${late[@]}"}
  PL_ENV=()
  record late-close
fi
if want dead-rail; then

  # dead-rail: the rail goes down under traffic; then close and finalize.
  name=dead-rail
  phase=$VM_OUT/$name.phase
  go=/tmp/$name.go
  rm -f "$phase" "$go"
  linger=()
  [[ $VM_ROLE == a ]] && linger=(--linger 300)
  # On this test bed the kernel destroys QPs on the dead port quickly; what it does under some
  # loads (52 s each, commit b6e35dd) is emulated: 0.5 s per destruction on a port that is down.
  # 128 comms failing over at once on busy TCG guests: the peer's confirmation can take longer than
  # the default 1 s, and the surviving rail can go silent for longer than rxe's retry window (then
  # "no usable path left"). This test is about what comes after: generous bounds for both.
  # Rank 1 (b) emulates 5 s per destruction, on every port (a busy guest may take its rail down
  # only after the failovers already retired the QPs): its background is still busy when it exits
  # (after the result exchange, i.e. after rank 0's linger), so dead-rail.exit_ms on b is an exit
  # with QPs left to the kernel.
  delay=500:down
  [[ $VM_ROLE == b ]] && delay=5000
  PL_ENV=("HA_NCCL_TEST_REAPER_DELAY_MS=${TEARDOWN_DEAD_DELAY:-$delay}" HA_NCCL_FAILOVER_TIMEOUT_MS=10000
    HA_NCCL_QP_TIMEOUT=19)
  pl_driver_start "$name" 18733 --fault dead-rail --comms 64 --sizes 4K --timeout 120 --phase-file "$phase" --wait-file "$go" \
    ${linger[@]+"${linger[@]}"}
  if start=$(pl_wait_phase "$phase" traffic "$PL_PID" 300); then
    sleep 2
    t0=$(pl_now_ms)
    vm_fault rail-down 0 || vm_log "$name: rail-down failed"
    echo "$t0 $(pl_now_ms) rail-down 0" >"$VM_OUT/$name.fault_ms"
    vm_log "$name: rail 0 down at +$((t0 - start)) ms"
    sleep 3
  fi
  touch "$go"
  PL_ENV=()
  pl_driver_wait
  exit_cost "$name" "$(pl_now_ms)"
  record "$name"
  vm_fault rail-up 0 || vm_log "rail-up 0 failed"
fi

# abort: a's rails both go down under traffic; then both ranks close at once and finalize.
if want abort; then
  name=abort
  phase=$VM_OUT/$name.phase
  go=/tmp/$name.go
  rm -f "$phase" "$go"
  [[ $VM_ROLE == a ]] && PL_ENV=(HA_NCCL_TEST_REAPER_DELAY_MS=1000:down)
  pl_driver_start "$name" 18735 --fault abort --comms 16 --sizes 4K --timeout 60 --phase-file "$phase" --wait-file "$go"
  PL_ENV=()
  if start=$(pl_wait_phase "$phase" traffic "$PL_PID" 300); then
    sleep 2
    if [[ $VM_ROLE == a ]]; then
      t0=$(pl_now_ms)
      vm_fault rail-down 0 || vm_log "$name: rail-down 0 failed"
      vm_fault rail-down 1 || vm_log "$name: rail-down 1 failed"
      echo "$t0 $(pl_now_ms) rails down" >"$VM_OUT/$name.fault_ms"
      vm_log "$name: both rails down at +$((t0 - start)) ms"
    fi
  fi
  vm_barrier "$name-rails-down" || vm_log "$name: the peer did not come to rails-down"
  sleep 1
  touch "$go"
  # a's process exit can wait minutes for the kernel's cleanup of its QPs on the dead ports (CI,
  # 2026-11-26: 300 s after a report written 18 s in): its exit is not waited for beyond 20 s.
  pl_driver_wait_report "$phase" 20
  if ((PL_EXITING)); then echo "still exiting after 20 s" >"$VM_OUT/$name.exit_ms"; else exit_cost "$name" "$(pl_now_ms)"; fi
  record "$name"
  # a's rails stay down: bringing a link up after QPs were destroyed while it was down can crash
  # this guest kernel's rxe (group.guest.sh); the case is last, and plugin-teardown last in its
  # boot group, so nothing after it needs them (the power-off needs no bed).
fi
