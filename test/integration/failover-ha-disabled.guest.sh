#!/usr/bin/env bash
# Guest side of failover-ha-disabled (issue #4): HA_NCCL_ENABLE_STANDBY=0 in b only. The two sides
# must agree on a single path: a 10 s --one-way stream b -> a works, every comm's stats say standby
# "none", and both sides log "single path".
# silent (issue #9): the same single path, its receiver's rail 0 silent (100 % loss on a's egress)
# for ~4 s: longer than the soft RTO (1 s), shorter than the hardware retry window
# (HA_NCCL_QP_TIMEOUT=18: ~1.07 s x 7 tries). The soft RTO must not kill the last path: the stream
# goes on once the loss is cleared. (The receives stop only once b's window of unacknowledged
# writes is full: 2.5 s of loss left a 1.26 s gap in one CI run, too close to the RTO to be seen.)
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
[[ $VM_ROLE == b ]] && PL_ENV=(HA_NCCL_ENABLE_STANDBY=0)
pl_stream single 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 10
PL_ENV=(HA_NCCL_QP_TIMEOUT=18)
[[ $VM_ROLE == b ]] && PL_ENV+=(HA_NCCL_ENABLE_STANDBY=0)
PL_FAULTS=("a 4000 loss 0 100" "a 8000 clear 0")
pl_stream silent 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 14
