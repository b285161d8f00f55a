#!/usr/bin/env bash
# Guest side of failover-flush (issue #10): RDMA READ flushes (HA_NCCL_FORCE_FLUSH=1, --flush-each:
# every received group read back through the NIC's loopback QP and waited for before it is checked)
# follow the comm through standby losses, failovers and failbacks. a is the receiver of the
# --one-way stream b -> a on rxe0 (standby rxe1), so a's receive comm owns the flush QPs. Small
# messages in groups of 2 make the flushes frequent (a flush is nearly always about to be posted
# or in flight): one posted on a port whose link just went down, before the failover moved the
# comm, fails and leaves that loopback QP in ERROR. Every fault is on a, with
# HA_NCCL_ENABLE_FAILBACK=1 and a 2 s hold:
#   a: flap 1 (down 500 ms) at 2 s               the standby's rail: re-protected on rxe1, and with
#                                                it rxe1's flush QP rebuilt (the stream stays on
#                                                rxe0). b learns that a's standby QP died from its
#                                                heartbeats' retries running out (~4 s): rail 0 stays
#                                                up until 12 s
#   a: rail-down 0 at 12 s, rail-up 0 at 14.5 s  failover to rxe1 (flushes read through rxe1), rxe0
#                                                re-protected (its flush QP rebuilt), failback after
#                                                the hold: flushes read through rxe0 again
#   the same at 25 s / 27.5 s
# and the active device's loopback QP goes to ERROR (HA_NCCL_TEST_FLUSH_QP_ERROR_MS, times after
# the receive comm's flush QPs were built, ~0.6 s before the faults' clock starts; the first
# rail-down takes ~1.5 s to act, so the comm is failed over from ~14 s to ~18.5 s of its own): at
# 7 s on rxe0 (the comm there), at 16 s on rxe1 while failed over. The flushes of data that device
# wrote wait for its loopback QP's rebuild and read through it again, never through the other one.
# checks/failover_flush.py judges the run.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
export HA_NCCL_ENABLE_FAILBACK=1 HA_NCCL_FAILBACK_HOLD_MS=2000
# Failovers 13 s apart are no flapping here: the hold stays 2 s for each cycle (no dampening).
export HA_NCCL_RETRY_WINDOW_MS=10000
PL_ENV=(HA_NCCL_FORCE_FLUSH=1 HA_NCCL_TEST_FLUSH_QP_ERROR_MS=7000,16000)
PL_FAULTS=("a 2000 flap 1 1 500")
for t in 12000 25000; do PL_FAULTS+=("a $t rail-down 0" "a $((t + 2500)) rail-up 0"); done
pl_stream fault 18721 --one-way --dev 0 --sizes 8,4K,64K --group 2 --inflight 8 --messages 200 --timeout 120 \
  --min-seconds 39 --flush-each
