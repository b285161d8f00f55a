#!/usr/bin/env bash
# Fault smoke test: faults injected on b with fault.sh really break the faulted rail's RDMA
# while the other rail keeps working, and clearing them heals the rail.
#   test/vm/run-pair.sh --name smoke-fault -- test/vm/smoke-fault.sh
#
# Two kinds of phases:
#  pingpong  new ibv_rc_pingpong connections on both rails (QP info exchanged over the mgmt
#            network, so only the RDMA traffic crosses the rails); expect ok / fail / skip.
#  midflight ib_write_bw on one rail; b injects the fault once traffic flows; a must get a
#            transport retry error (IBV_WC_RETRY_EXC_ERR, "Failed status 12").
#            NB: rxe treats retry_cnt 7 as "retry forever" (NCCL's and perftest's default),
#            so this uses rdma_cm mode (-R), which can set it: --retry_count 2. rdma_cm on
#            RoCE picks an ACK timeout of ~2 s (not perftest's 14 = 67 ms), so each retry
#            costs ~2 s; a larger count only makes the phase slower.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PORT=18600
fails=0
bad() { vm_log "UNEXPECTED: $*"; fails=$((fails + 1)); }

# pingpong NAME FAULT-ON-B|none EXPECT-RAIL0 EXPECT-RAIL1   (EXPECT: ok, fail, skip)
pingpong() {
  local name=$1 fault=$2 want=("$3" "$4") r rc pid=() log
  PORT=$((PORT + 2))
  if [[ $VM_ROLE == b ]]; then
    # shellcheck disable=SC2086  # FAULT is a word list
    [[ $fault == none ]] || vm_fault $fault
    for r in 0 1; do
      [[ ${want[r]} == skip ]] && continue
      timeout 60 ibv_rc_pingpong -d rxe$r -g 1 -p $((PORT + r)) -n 20 \
        >"$VM_OUT/$name-rail$r.log" 2>&1 &
      pid[r]=$!
      vm_wait_listen $((PORT + r))
    done
    vm_barrier "$name-ready"
    vm_barrier "$name-done" # servers on a broken rail would wait forever: stop them
    for r in "${!pid[@]}"; do kill "${pid[r]}" 2>/dev/null || true; done
    wait || true
    return 0
  fi
  vm_barrier "$name-ready"
  for r in 0 1; do
    [[ ${want[r]} == skip ]] && continue
    timeout 60 ibv_rc_pingpong -d rxe$r -g 1 -p $((PORT + r)) -n 20 "$VM_PEER_MGMT" \
      >"$VM_OUT/$name-rail$r.log" 2>&1 &
    pid[r]=$!
  done
  for r in "${!pid[@]}"; do
    rc=0
    wait "${pid[r]}" || rc=$?
    log=$VM_OUT/$name-rail$r.log
    if [[ ${want[r]} == ok && $rc == 0 ]]; then
      vm_log "$name: rail $r works (as expected)"
    elif [[ ${want[r]} == fail && $rc != 0 && $rc != 124 ]]; then
      vm_log "$name: rail $r fails (as expected): $(grep -m1 -iE 'fail|couldn' "$log" || true)"
    else
      bad "$name: rail $r: expected ${want[r]}, got exit $rc: $(tail -n 2 "$log" | tr '\n' ' ')"
    fi
  done
  vm_barrier "$name-done"
}

# midflight NAME RAIL FAULT-ON-B
midflight() {
  local name=$1 rail=$2 fault=$3 rc=0 t0 start pid
  PORT=$((PORT + 2))
  local counters=/sys/class/infiniband/rxe$rail/ports/1/hw_counters
  local bw=(ib_write_bw -d "rxe$rail" -R --retry_count 2 -x 1 -F -s 65536 -t 16 -n 3000 -p "$PORT")
  if [[ $VM_ROLE == b ]]; then
    timeout 120 "${bw[@]}" >"$VM_OUT/$name.log" 2>&1 &
    pid=$!
    vm_wait_listen "$PORT"
    start=$(<"$counters/rcvd_pkts")
    vm_barrier "$name-ready"
    until (($(<"$counters/rcvd_pkts") > start + 1000)); do sleep 0.05; done
    # shellcheck disable=SC2086
    vm_fault $fault
    vm_log "$name: '$fault' injected after $(($(<"$counters/rcvd_pkts") - start)) packets"
    vm_barrier "$name-done"
    kill "$pid" 2>/dev/null || true
    wait || true
    return 0
  fi
  local peer_var=VM_PEER_RAIL$rail
  vm_barrier "$name-ready"
  t0=$SECONDS
  timeout 120 stdbuf -oL "${bw[@]}" "${!peer_var}" >"$VM_OUT/$name.log" 2>&1 || rc=$?
  if [[ $rc != 0 && $rc != 124 ]] && grep -q 'Failed status 12' "$VM_OUT/$name.log"; then
    vm_log "$name: ib_write_bw on rail $rail got IBV_WC_RETRY_EXC_ERR after $((SECONDS - t0)) s (as expected)"
  else
    bad "$name: expected a retry error on rail $rail, got exit $rc: $(tail -n 3 "$VM_OUT/$name.log" | tr '\n' ' ')"
  fi
  vm_barrier "$name-done"
}

t0=$SECONDS
pingpong baseline none ok ok
midflight rail0-down-midflight 0 "rail-down 0"
if [[ $VM_ROLE == b ]]; then
  grep -q DOWN /sys/class/infiniband/rxe0/ports/1/state || bad "rxe0 is not DOWN on b"
else
  grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state || bad "rxe0 is not ACTIVE on a"
fi
pingpong rail0-down none fail ok
pingpong rail0-up "rail-up 0" ok ok
midflight rail1-loss-midflight 1 "loss 1 100"
pingpong rail1-loss none ok skip
pingpong rail1-clear "clear 1" ok ok
vm_log "fault phases took $((SECONDS - t0)) s"
((fails == 0)) || vm_die "$fails fault check(s) failed"
vm_log "smoke-fault passed"
