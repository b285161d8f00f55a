#!/usr/bin/env bash
# Guest side of failover-dmabuf (issue #32): the plugin on a dma-buf-only node. No GPU peer-memory
# client is loaded and HA_NCCL_FORCE_FLUSH is not set; every device offers NCCL_PTR_DMABUF (the
# preloaded test shim answers the plugin's ibv_reg_dmabuf_mr probe and registers what it is given:
# test/integration/shim/dmabuf_shim.cpp). ha-net-driver --dmabuf registers the ring's buffers
# (memfds) with regMrDmaBuf as NCCL_PTR_CUDA, as NCCL does with GPU memory there, and --flush-each
# calls iflush on every received group and waits for it, as NCCL does for GPU buffers. A --one-way
# stream b -> a on rxe0 (standby rxe1); a pulls rail 0 at 5 s and brings it back at 8 s: the comm
# fails over to rxe1 mid-stream and is re-protected on rxe0. Then `gdr-off`: the same node with
# NCCL_IB_GDR_FLUSH_DISABLE=1 (net_ib's: the platform orders GPU writes itself), a short unfaulted
# stream: no flush QP is built and every iflush completes without a READ. checks/failover_dmabuf.py
# judges both.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
SHIM=$BUILD/test/integration/libha-test-dmabuf-shim.so
[[ -r $SHIM ]] || { vm_log "dmabuf: $SHIM not built"; exit 1; }
PL_ENV=("LD_PRELOAD=$SHIM")
PL_FAULTS=("a 5000 rail-down 0" "a 8000 rail-up 0")
pl_stream fault 18721 --one-way --dev 0 --sizes 8,4K,64K,256K --group 2 --inflight 8 --messages 200 --timeout 120 \
  --min-seconds 16 --dmabuf --flush-each
vm_fault clear 0 >/dev/null 2>&1 || true
PL_ENV=("LD_PRELOAD=$SHIM" NCCL_IB_GDR_FLUSH_DISABLE=1)
pl_stream gdr-off 18788 --one-way --dev 0 --sizes 8,4K,64K,256K --group 2 --inflight 8 --messages 200 --timeout 120 \
  --min-seconds 3 --dmabuf --flush-each
