#!/usr/bin/env bash
# Guest side of ha-ping-bounds: nothing may hang, and the server does not trust its client.
#  0. one server on b with a token (HA_PING_TOKEN), --count 3, --timeout 8, --max-size 1M; from a:
#     a. a client with another token       -> refused: "authentication failed" (exit 2), not counted
#     b. a silent connection held open, and right behind it a client asking for a 2M size
#                                          -> the silent one is dropped after the 5 s handshake
#                                             step; the client is refused: above --max-size (exit 2)
#     c. a client asking for --timeout 3600, stopped (SIGSTOP) in its ping-pong on rail 0, and
#        right behind it one more client asking for --timeout 3600
#                                          -> the server caps both at its 8 s: it ends the stalled
#                                             session by itself and serves the next (rail 0
#                                             healthy, the granted timeout 8 s)
#  1. no server on b                       -> a exits 2 ("unreachable") within its --timeout
#  2. b drops everything it sends on rail 1 (netem loss 100%, port stays up, neighbours
#     already resolved so the QPs connect), checked twice:
#     a. default QP retry count 7, which rxe treats as "retry forever": the phase deadline
#        (--timeout 10) ends it   -> rail 1 unreachable, rail 0 healthy, exit 1, bounded
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
  vm_barrier trust
  timed trust-wrong-token "$HA_PING" "${ARGS[@]}" --token wrong --timeout 30 "$VM_PEER_MGMT"
  exec 7<>"/dev/tcp/$VM_PEER_MGMT/18600"  # a silent client: connects, says nothing
  HA_PING_TOKEN=vm-secret timed trust-huge-size "$HA_PING" --sizes 8,2M --timeout 30 "$VM_PEER_MGMT"
  exec 7>&-
  HA_PING_TOKEN=vm-secret "$HA_PING" --rails 0 --sizes 8 --iters 1000000 --timeout 3600 "$VM_PEER_MGMT" \
    --json-file "$VM_OUT/trust-stalled.json" >"$VM_OUT/trust-stalled.txt" 2>"$VM_OUT/trust-stalled.log" &
  stalled=$!
  for _ in $(seq 300); do [[ -n $(ss -Htn state established "dport = :18600") ]] && break; sleep 0.1; done
  sleep 3
  kill -STOP $stalled
  vm_log "trust: stopped the stalled client"
  # bounded here: a server held by the stopped client would keep this one waiting
  HA_PING_TOKEN=vm-secret timed trust-capped timeout 150 "$HA_PING" "${ARGS[@]}" --rails 0 --timeout 3600 "$VM_PEER_MGMT"
  kill -KILL $stalled
  wait $stalled || true
  vm_barrier trust-done
  vm_barrier no-server
  timed peer-absent "$HA_PING" "${ARGS[@]}" --timeout 5 "$VM_PEER_MGMT"
  vm_barrier peer-absent-done
  pin_rail1_neighbour
  vm_barrier neighbours-pinned
  vm_barrier black-hole
  timed black-hole "$HA_PING" "${ARGS[@]}" --timeout 10 "$VM_PEER_MGMT"
  vm_barrier black-hole-retry6
  HA_NCCL_QP_RETRY_CNT=6 timed black-hole-retry6 "$HA_PING" "${ARGS[@]}" --timeout 30 "$VM_PEER_MGMT"
else
  rc=0
  HA_PING_TOKEN=vm-secret "$HA_PING" --count 3 --timeout 8 --max-size 1M --json-file "$VM_OUT/trust.json" \
    >"$VM_OUT/trust.txt" 2>"$VM_OUT/trust.log" &
  pid=$!
  vm_wait_listen 18600
  vm_barrier trust
  wait $pid || rc=$?
  echo "$rc" >"$VM_OUT/trust.rc"
  vm_log "trust: server exit $rc"
  cat "$VM_OUT/trust.txt"
  vm_barrier trust-done
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
