#!/usr/bin/env bash
# Guest side of failover-failback-flap (issue #10, found by the first 30-minute soak): a failback
# (HA_NCCL_ENABLE_FAILBACK=1, 2 s hold) whose target fails during the switch leaves the comm on
# the healthy path it was leaving; it never ends the comm. The switch is held open for 4 s by the
# test setting HA_NCCL_TEST_FAILBACK_STALL_AT/_MS so that rail 0 can be taken down inside it.
# Three --one-way streams b -> a (b sends, so b decides the failback), each: a pulls rail 0 at 4 s
# (failover to rxe1) and restores it at 6 s; rxe0 is re-protected, and after the hold b fails
# back to it, held 4 s at the stall point, while rail 0 goes down half a second into the stall: b's
# `log-wait` sees the plugin's stall WARN in its driver log, and a fault on a follows it through a
# `barrier` (fixed delays from the re-protection missed the stall on a loaded host, where a
# failback may first be abandoned for sends that drain slowly):
#   switch-sender    at=switch, b's rail 0 down for 1.5 s: b sees its target fail before it wrote
#                    its notice: the failback is abandoned, the stream never leaves rxe1
#   switch-receiver  at=switch, a's rail 0 down for 4 s (past the stall): b's notice on rxe0 is
#                    never confirmed: b fails over back to rxe1, which a never left (a re-syncs
#                    in place)
#   finish           at=finish, a's rail 0 down for 1.5 s: a followed the failback (its report
#                    came), then lost rxe0: a fails over to the rxe1 path the failback kept, b
#                    follows
# After the rail is back each stream is re-protected on rxe0 and fails back for good (held 4 s
# again, nothing fails; the hold-down is dampened: 2 s, 4 s after a second failover of the comm);
# the stream ends 2 s after both sides recorded that failback.
# checks/failover_failback_flap.py judges the runs.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export HA_NCCL_ENABLE_FAILBACK=1 HA_NCCL_FAILBACK_HOLD_MS=2000 HA_NCCL_TEST_FAILBACK_STALL_MS=4000
stall_switch='STALL_AT=switch:.the.failback.waits'
stall_finish='STALL_AT=finish:.the.failback.waits'
MIN=10  # --min-seconds of each stream; b ends it once it failed back for good (checks: MIN_SECONDS)
first=("a 4000 rail-down 0" "a 6000 rail-up 0")
# The end of every stream: each side waits for its data comm's last failback record (a's count:
# FAILBACKS_A; b fails back once), the two meet, and b ends the stream (stop): 2 s after the
# record, not at a fixed 40 s.
home() { # FAILBACKS_A
  PL_FAULTS+=("a 0 stats-wait \"event\":\"failback\".*\"kind\":\"recv\" $1" "a 0 barrier home"
              "b 0 stats-wait \"event\":\"failback\".*\"kind\":\"send\" 1" "b 0 barrier home" "b 0 pause 2000"
              "b 0 stop")
}
PL_ENV=(HA_NCCL_TEST_FAILBACK_STALL_AT=switch)
PL_FAULTS=("${first[@]}" "b 0 log-wait $stall_switch 1" "b 0 pause 500" "b 0 rail-down 0" "b 0 pause 1500"
           "b 0 rail-up 0")
home 1
pl_stream switch-sender 18721 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN
PL_ENV=(HA_NCCL_TEST_FAILBACK_STALL_AT=switch)
PL_FAULTS=("${first[@]}" "b 0 log-wait $stall_switch 1" "b 0 barrier stall" "a 0 barrier stall" "a 0 pause 500"
           "a 0 rail-down 0" "a 0 pause 4000" "a 0 rail-up 0")
home 1
pl_stream switch-receiver 18722 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN
PL_ENV=(HA_NCCL_TEST_FAILBACK_STALL_AT=finish)
PL_FAULTS=("${first[@]}" "b 0 log-wait $stall_finish 1" "b 0 barrier stall" "a 0 barrier stall" "a 0 pause 500"
           "a 0 rail-down 0" "a 0 pause 1500" "a 0 rail-up 0")
home 2
pl_stream finish 18723 "${PL_STREAM_ARGS[@]}" --min-seconds $MIN
