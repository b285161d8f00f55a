#!/usr/bin/env bash
# Guest side of ha-ping-rails: a is the client, b the server.
#  run 1: both rails, three sizes        -> every rail healthy, exit 0
#  run 2: rail 0 only, --min-bw absurd   -> rail 0 degraded, exit 1
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/vm/lib.sh"
HA_PING=${NCCL_HA_BUILD_DIR:-$REPO/build}/tools/ha-ping/ha-ping
COMMON=(--iters 50 --bw-iters 16 --timeout 60)

run() { # NAME ARGS... : runs ha-ping, records text, JSON and exit code under $VM_OUT
  local name=$1 rc=0
  shift
  if [[ $VM_ROLE == b ]]; then
    "$HA_PING" "${COMMON[@]}" "$@" --json-file "$VM_OUT/$name.json" >"$VM_OUT/$name.txt" 2>"$VM_OUT/$name.log" &
    local pid=$!
    vm_wait_listen 18600
    vm_barrier "$name"
    wait $pid || rc=$?
  else
    vm_barrier "$name"
    "$HA_PING" "${COMMON[@]}" "$@" --json-file "$VM_OUT/$name.json" "$VM_PEER_MGMT" >"$VM_OUT/$name.txt" \
      2>"$VM_OUT/$name.log" || rc=$?
  fi
  echo "$rc" >"$VM_OUT/$name.rc"
  vm_log "$name: exit $rc"
  cat "$VM_OUT/$name.txt"
}

run healthy --sizes 8,64K,1M
run degraded --sizes 64K --rails 0 --min-bw 1000000
