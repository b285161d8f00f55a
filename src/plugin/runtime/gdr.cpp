// GPU peer-memory detection (see gdr.hpp).
#include "runtime/gdr.hpp"

#include <unistd.h>

namespace nccl_ha::plugin {

std::string gpu_peer_memory(const std::string& sysfs_root) {
  for (const char* mark : {"module/nvidia_peermem/version", "kernel/mm/memory_peers/nv_mem/version",
                           "kernel/mm/memory_peers/nv_mem_nc/version"}) {
    const std::string path = sysfs_root + "/" + mark;
    if (::access(path.c_str(), F_OK) == 0) return path;
  }
  return {};
}

}  // namespace nccl_ha::plugin
