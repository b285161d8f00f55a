#!/usr/bin/env bash
# Runs inside the demo VMs: a = ha-ping client, b = server.
#  1. both rails healthy (exit 0 expected)
#  2. b pulls rail 0 (ip link down); rail 0 DOWN, rail 1 healthy (exit 1 expected)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
source "$REPO/test/vm/lib.sh"
HA_PING=${NCCL_HA_BUILD_DIR:-$REPO/build}/tools/ha-ping/ha-ping
ARGS=(--sizes 8,4K,64K,1M --iters 100 --bw-iters 32 --timeout 60)
out=$VM_OUT/demo.txt
: >"$out"

step() { # TITLE EXPECTED_EXIT
  local title=$1 want=$2 rc=0
  echo "== $title" | tee -a "$out"
  if [[ $VM_ROLE == b ]]; then
    "$HA_PING" "${ARGS[@]}" >>"$out" 2>>"$VM_OUT/demo.log" &
    local pid=$!
    vm_wait_listen 18600
    vm_barrier "${title// /-}"
    wait $pid || rc=$?
  else
    vm_barrier "${title// /-}"
    "$HA_PING" "${ARGS[@]}" "$VM_PEER_MGMT" >>"$out" 2>>"$VM_OUT/demo.log" || rc=$?
  fi
  echo "exit $rc (expected $want)" | tee -a "$out"
  [[ $rc == "$want" ]]
}

step "both rails" 0
[[ $VM_ROLE == b ]] && vm_fault rail-down 0
step "rail 0 pulled on host b" 1
