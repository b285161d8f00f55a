#!/usr/bin/env bash
# Smoke test of the test bed: real RDMA (RC send/recv) on both rails, RDMA write bandwidth on
# rail 0. A SCRIPT for run-pair.sh:   test/vm/run-pair.sh --name smoke -- test/vm/smoke.sh
# b runs the servers, a the clients. Output of each tool goes to $VM_OUT/*.log.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ITERS=${NCCL_HA_SMOKE_ITERS:-100}      # ibv_rc_pingpong iterations (4 KiB each)
BW_ITERS=${NCCL_HA_SMOKE_BW_ITERS:-500} # ib_write_bw iterations (64 KiB each)
PP_PORT=18515                            # + rail
BW_PORT=18517
T=120                                    # per-tool time limit (s)

ibv_devinfo -l >&2
fails=0
check() { # NAME PID
  if wait "$2"; then vm_log "ok: $1"; else vm_log "FAILED: $1 (exit $?, see $VM_OUT/$1.log)"; fails=$((fails + 1)); fi
}

if [[ $VM_ROLE == b ]]; then
  for r in 0 1; do
    timeout $T ibv_rc_pingpong -d rxe$r -g 1 -p $((PP_PORT + r)) -n "$ITERS" \
      >"$VM_OUT/pingpong-rail$r.log" 2>&1 &
    pp[r]=$!
  done
  vm_wait_listen $PP_PORT && vm_wait_listen $((PP_PORT + 1))
  vm_barrier pingpong-servers-up
  check pingpong-rail0 "${pp[0]}"
  check pingpong-rail1 "${pp[1]}"

  timeout $T ib_write_bw -d rxe0 -x 1 -F -s 65536 -n "$BW_ITERS" -p $BW_PORT \
    >"$VM_OUT/write_bw-rail0.log" 2>&1 &
  bw=$!
  vm_wait_listen $BW_PORT
  vm_barrier write-bw-server-up
  check write_bw-rail0 $bw
else
  vm_barrier pingpong-servers-up
  # Both rails at once: rxe0 to the peer's rail-0 address, rxe1 to its rail-1 address.
  timeout $T ibv_rc_pingpong -d rxe0 -g 1 -p $PP_PORT -n "$ITERS" "$VM_PEER_RAIL0" \
    >"$VM_OUT/pingpong-rail0.log" 2>&1 &
  pp0=$!
  timeout $T ibv_rc_pingpong -d rxe1 -g 1 -p $((PP_PORT + 1)) -n "$ITERS" "$VM_PEER_RAIL1" \
    >"$VM_OUT/pingpong-rail1.log" 2>&1 &
  pp1=$!
  check pingpong-rail0 $pp0
  check pingpong-rail1 $pp1

  vm_barrier write-bw-server-up
  timeout $T ib_write_bw -d rxe0 -x 1 -F -s 65536 -n "$BW_ITERS" -p $BW_PORT "$VM_PEER_RAIL0" \
    >"$VM_OUT/write_bw-rail0.log" 2>&1 &
  check write_bw-rail0 $!
fi

grep -h -E 'bytes in .* seconds|usec/iter' "$VM_OUT"/pingpong-rail*.log || true
grep -h -A1 -E '^ *#bytes' "$VM_OUT/write_bw-rail0.log" || true
((fails == 0)) || vm_die "$fails check(s) failed"
vm_log "smoke passed"
