// GPU memory the NICs can reach: detected, never assumed. NCCL passes GPU buffers to regMr (type
// CUDA) only when ptrSupport offers CUDA, and the NIC can DMA into them only through a
// peer-memory client for NVIDIA GPUs: the driver's nvidia-peermem module, or the older
// nv_peer_mem of MLNX OFED's peer-memory interface. Their marks, relative to the sysfs root:
//   module/nvidia_peermem/version
//   kernel/mm/memory_peers/nv_mem/version
//   kernel/mm/memory_peers/nv_mem_nc/version
// With one present the plugin offers CUDA: regMr of GPU memory is the same ibv_reg_mr, the data
// path never touches a buffer with the CPU, and iflush of a GPU buffer reads it back by RDMA
// READ (flush.cpp). dma-buf registration (NCCL_PTR_DMABUF) is probed per device instead: mr_ops.hpp.
#pragma once

#include <string>

namespace nccl_ha::plugin {

// The first of the files above that exists under `sysfs_root` (its path), "" when none does.
std::string gpu_peer_memory(const std::string& sysfs_root);

}  // namespace nccl_ha::plugin
