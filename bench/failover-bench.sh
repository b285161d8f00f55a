#!/usr/bin/env bash
# Benchmark (not a test) of the shadow-QP failover (issue #4), in one two-VM boot:
#   (i)   HA overhead: ha-net-driver --bw with HA_NCCL_ENABLE_BACKUP=1 vs 0 (interleaved rounds)
#   (ii)  stall excess of a failover: rail 0 pulled on the sender, on the receiver, and a black
#         hole (100 % loss, port up), each against an unfaulted stream of the same length
#   (iii) bandwidth on the backup after a failover vs ib_write_bw on rail 1
#   (iv)  host memory per comm with the backup vs single path (RSS delta of --comms N)
#   bench/failover-bench.sh      -> bench/results/failover-<date>.{json,md,svg}
# Environment: NCCL_HA_BENCH_ROUNDS (4), NCCL_HA_BENCH_BW_BYTES (96M), NCCL_HA_BENCH_STALL_SECONDS (12),
# NCCL_HA_BENCH_COMMS (256), NCCL_HA_BUILD_DIR (build), NCCL_HA_BENCH_NO_BUILD=1 (use the build as is).
# Absolute figures are emulation artefacts (TCG); compare the ratios and differences measured in
# the same boot.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
if [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
  bash "$REPO/scripts/setup.sh"
  cmake -S "$REPO" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" --target nccl-net-ha ha-net-driver
fi
export NCCL_HA_BUILD_DIR=$BUILD NCCL_HA_VM_LOGDIR=${NCCL_HA_VM_LOGDIR:-$BUILD/vm-logs}
"$REPO/test/vm/run-pair.sh" --name failover-bench --timeout 2400 -- "$REPO/bench/failover-bench.guest.sh"
stamp=$(date -u +%Y-%m-%d)
export NCCL_HA_BENCH_REV=${NCCL_HA_BENCH_REV:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}
python3 "$REPO/bench/failover_report.py" "$NCCL_HA_VM_LOGDIR/failover-bench" "$REPO/bench/results/failover-$stamp"
