#!/usr/bin/env bash
# Guest side of failover-large (issue #4): as failover-sender-down, but every message is 4 MiB
# (8 in flight: 32 MiB of RDMA writes outstanding when b's rail 0 goes down 5 s in). The replay is
# larger, the rest must be the same: exit 0, every byte verified, one failover per data comm within
# the port-down bound, no later stall.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
LARGE=(--one-way --dev 0 --sizes 4M --inflight 8 --messages 16 --timeout 120)
pl_stream baseline 18720 "${LARGE[@]}" --min-seconds 15
PL_FAULTS=("b 5000 rail-down 0")
pl_stream fault 18721 "${LARGE[@]}" --min-seconds 15
