#!/usr/bin/env bash
# Guest side of failover-ha-disabled (issue #4): HA_NCCL_ENABLE_BACKUP=0 in b only. The two sides
# must agree on a single path: a 10 s --one-way stream b -> a works, every comm's stats say standby
# "none", and both sides log "single path".
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
[[ $VM_ROLE == b ]] && PL_ENV=(HA_NCCL_ENABLE_BACKUP=0)
pl_stream single 18720 "${PL_STREAM_ARGS[@]}" --min-seconds 10
