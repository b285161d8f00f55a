#!/usr/bin/env bash
# Guest side of ha-ping-rail-down: a is the client, b the server.
#  run "mid-run":  rail 0 only, an endless ping-pong; b pulls rail 0 three seconds in -> b's
#                  port-error event stops the rail at once: rail 0 DOWN, exit 1 on both sides
#  run "pre-down": rail 0 is already down when ha-ping starts -> rail 0 DOWN (peer port not
#                  ACTIVE), rail 1 healthy, exit 1
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/vm/lib.sh"
HA_PING=${NCCL_HA_BUILD_DIR:-$REPO/build}/tools/ha-ping/ha-ping

run() { # NAME ARGS...
  local name=$1 rc=0 start=$SECONDS
  shift
  if [[ $VM_ROLE == b ]]; then
    "$HA_PING" "$@" --json-file "$VM_OUT/$name.json" >"$VM_OUT/$name.txt" 2>"$VM_OUT/$name.log" &
    local pid=$!
    vm_wait_listen 18600
    vm_barrier "$name"
    if [[ $name == mid-run ]]; then
      sleep 3
      vm_log "pulling rail 0"
      vm_fault rail-down 0
    fi
    wait $pid || rc=$?
  else
    vm_barrier "$name"
    "$HA_PING" "$@" --json-file "$VM_OUT/$name.json" "$VM_PEER_MGMT" >"$VM_OUT/$name.txt" 2>"$VM_OUT/$name.log" || rc=$?
  fi
  echo "$rc" >"$VM_OUT/$name.rc"
  echo $((SECONDS - start)) >"$VM_OUT/$name.seconds"
  vm_log "$name: exit $rc after $((SECONDS - start)) s"
  cat "$VM_OUT/$name.txt"
}

run mid-run --rails 0 --sizes 8 --iters 1000000 --bw-iters 8 --timeout 60
run pre-down --sizes 8,64K --iters 20 --bw-iters 8 --timeout 60
