#!/usr/bin/env bash
# Guest side of failover-flaps (issue #4): rail 0 of the sender (b) flaps 10 times, down and up
# 300 ms apart (fault.sh flap), from 4 s into a 40 s --one-way stream (b -> a; 10 flaps take ~20 s under TCG). The first flap
# fails the stream over to rail 1; the later ones hit the standby being re-protected on rail 0.
# Every byte verified; the standby is up again before the end. checks/failover_flaps.py judges.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
PL_FAULTS=("b 4000 flap 0 10 300")
pl_stream fault 18721 "${PL_STREAM_ARGS[@]}" --min-seconds 40
