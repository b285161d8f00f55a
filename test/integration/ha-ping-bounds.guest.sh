#!/usr/bin/env bash
# Guest side of ha-ping-bounds: nothing may hang.
#  1. no server on b                       -> a exits 2 ("unreachable") within its --timeout
#  2. b drops everything it sends on rail 1 (netem loss 100%, port stays up, neighbours
#     already resolved so the QPs connect), checked twice:
#     a. default QP retry count 7, which rxe treats as "retry forever": the phase deadline
#        (--timeout 15) ends it   -> rail 1 unreachable, rail 0 healthy, exit 1, bounded
#     b. HA_NCCL_QP_RETRY_CNT=6: the send fails with "transport retry counter exceeded"
#                                 -> rail 1 unreachable, rail 0 healthy, exit 1, bounded
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/vm/lib.sh"
HA_PING=${NCCL_HA_BUILD_DIR:-$REPO/build}/tools/ha-ping/ha-ping

# Resolves the peer's rail-1 MAC and pins it, so QPs can still be connected (rxe resolves the
# neighbour in INIT->RTR) once the rail is a black hole.
pin_rail1_neighbour() {
  busybox ping -c 2 -W 2 -I eth1 "$VM_PEER_RAIL1" >/dev/null || vm_die "rail 1 does not answer pings before the fault"
  local mac
  mac=$(ip neigh show "$VM_PEER_RAIL1" dev eth1 | awk '{print $3}')
  [[ -n $mac ]] || vm_die "no neighbour entry for $VM_PEER_RAIL1"
  ip neigh replace "$VM_PEER_RAIL1" lladdr "$mac" dev eth1 nud permanent
}
ARGS=(--sizes 8,64K --iters 20 --bw-iters 8)

timed() { # NAME CMD... : runs CMD, records exit code and wall seconds
  local name=$1 rc=0 start=$SECONDS
  shift
  "$@" --json-file "$VM_OUT/$name.json" >"$VM_OUT/$name.txt" 2>"$VM_OUT/$name.log" || rc=$?
  echo "$rc" >"$VM_OUT/$name.rc"
  echo $((SECONDS - start)) >"$VM_OUT/$name.seconds"
  vm_log "$name: exit $rc after $((SECONDS - start)) s"
  cat "$VM_OUT/$name.txt"
}

if [[ $VM_ROLE == a ]]; then
  vm_barrier no-server
  timed peer-absent "$HA_PING" "${ARGS[@]}" --timeout 5 "$VM_PEER_MGMT"
  vm_barrier peer-absent-done
  pin_rail1_neighbour
  vm_barrier neighbours-pinned
  vm_barrier black-hole
  timed black-hole "$HA_PING" "${ARGS[@]}" --timeout 15 "$VM_PEER_MGMT"
  vm_barrier black-hole-retry6
  HA_NCCL_QP_RETRY_CNT=6 timed black-hole-retry6 "$HA_PING" "${ARGS[@]}" --timeout 30 "$VM_PEER_MGMT"
else
  vm_barrier no-server
  vm_barrier peer-absent-done
  pin_rail1_neighbour
  vm_barrier neighbours-pinned
  vm_fault loss 1 100
  for run in black-hole black-hole-retry6; do
    retry=7
    [[ $run == *retry6 ]] && retry=6
    HA_NCCL_QP_RETRY_CNT=$retry "$HA_PING" "${ARGS[@]}" --timeout 60 --json-file "$VM_OUT/$run.json" \
      >"$VM_OUT/$run.txt" 2>"$VM_OUT/$run.log" &
    pid=$!
    vm_wait_listen 18600
    vm_barrier "$run"
    rc=0
    wait $pid || rc=$?
    echo "$rc" >"$VM_OUT/$run.rc"
    cat "$VM_OUT/$run.txt"
  done
  vm_fault clear 1
fi
