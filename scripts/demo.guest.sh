#!/usr/bin/env bash
# Runs inside the demo VMs: a = ha-ping client, b = server.
#  1. both rails healthy (exit 0 expected)
#  2. b pulls rail 0 (ip link down); rail 0 DOWN, rail 1 healthy (exit 1 expected)
#  3. rail 0 back; NCCL-style traffic b -> a through libnccl-net-ha.so (ha-net-driver, every byte
#     verified) while b pulls rail 0 again 4 s into a 12 s stream: the plugin fails over to its
#     standby QP on rail 1 and the stream completes (exit 0 expected on both sides)
set -euo pipefail
source "$(dirname "$0")/../test/integration/plugin-lib.sh"  # REPO HA_PING DRIVER PLUGIN, pl_stream, lib.sh
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

# 3. The plugin: the same failure under NCCL-style traffic.
[[ $VM_ROLE == b ]] && vm_fault rail-up 0
vm_barrier rail-0-restored
echo "== NCCL traffic b -> a through the plugin; rail 0 pulled on host b 4 s into a 12 s stream" | tee -a "$out"
pl_failover_env
PL_FAULTS=("b 4000 rail-down 0")
pl_stream plugin-failover 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 12
log=$VM_OUT/plugin-failover.log
{ grep -hE "NET/HA: failover of" "$log"; grep -hE "NET/HA: standby .* is " "$log" | tail -n 1; } | sed 's/^[^ ]* //' >>"$out" || true
grep -hE "^  (integrity|timeline):|^==== rank" "$log" >>"$out" || true
echo "exit $PL_RC (expected 0)" | tee -a "$out"
[[ $PL_RC == 0 ]]
