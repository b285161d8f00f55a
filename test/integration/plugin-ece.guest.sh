#!/usr/bin/env bash
# Guest side of plugin-ece (issue #32): Enhanced Connection Establishment as net_ib does it, on
# every QP the plugin connects. Soft-RoCE has no ECE, so the preloaded test shim stands in for a
# device that has it (test/integration/shim/ece_shim.cpp: HA_TEST_ECE_OPTIONS are the options the
# "device" supports, its reduction an AND; every query, set and RTR goes to CASE.ece.log). Each
# case is a --one-way stream b -> a on rxe0 (standby rxe1); checks/plugin_ece.py judges the logs.
#   on        a supports 0x3c, b 0x1e; a pulls rail 0 at 3 s and restores it at 6 s (failover to
#             the standby, re-protection on rxe0): on every connected pair of QPs (primary,
#             standby, re-protected) the side that answers sets the other's offer, the side that
#             asked sets the answer (0x1c), both before RTR; both end with 0x1c
#   home-down a's rail 0 is down before the stream: each connection starts on its standby pair
#             (rail 1: phase two before conn_ack, the connector answering first), rail 0 is back
#             at 4 s (re-protection builds on it): ECE agreed on every pair, as in `on`
#   one-side  a has no ECE (unsupported, as rxe), b 0x1e: nothing is set anywhere
#   off       both support it, NCCL_IB_ECE_ENABLE=0 on both: no ECE call at all
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
SHIM=$BUILD/test/integration/libha-test-ece-shim.so
[[ -r $SHIM ]] || { vm_log "ece: $SHIM not built"; exit 1; }
ARGS=(--one-way --dev 0 --sizes 8,4K,64K,1M --group 4 --inflight 8 --timeout 120)

ece_case() { # CASE PORT OPTIONS-A OPTIONS-B ENV... -- DRIVER-ARGS...
  local name=$1 port=$2 options
  [[ $VM_ROLE == a ]] && options=$3 || options=$4
  shift 4
  PL_ENV=("LD_PRELOAD=$SHIM" "HA_TEST_ECE_OPTIONS=$options" "HA_TEST_ECE_LOG=$VM_OUT/$name.ece.log")
  while [[ $1 != -- ]]; do PL_ENV+=("$1"); shift; done
  shift
  rm -f "$VM_OUT/$name.ece.log"
  pl_stream "$name" "$port" "${ARGS[@]}" "$@"
}

PL_FAULTS=("a 3000 rail-down 0" "a 6000 rail-up 0")
ece_case on 18792 0x3c 0x1e -- --messages 300 --min-seconds 12
vm_fault clear 0 >/dev/null 2>&1 || true
if [[ $VM_ROLE == a ]]; then vm_fault rail-down 0; fi
vm_barrier ece-home-down
PL_FAULTS=("a 4000 rail-up 0")
ece_case home-down 18795 0x3c 0x1e -- --messages 300 --min-seconds 8
vm_fault clear 0 >/dev/null 2>&1 || true
ece_case one-side 18793 "" 0x1e -- --messages 300
ece_case off 18794 0x3c 0x1e NCCL_IB_ECE_ENABLE=0 -- --messages 300
