// Test-only (never installed, never in a package): dma-buf registration on Soft-RoCE for the VM
// test failover-dmabuf. LD_PRELOAD it into a process that loads libnccl-net-ha.so.
//
// The plugin's code path is the one of a dma-buf GPU node: it probes ibv_reg_dmabuf_mr on every
// device (mr_ops.hpp), offers NCCL_PTR_DMABUF where the probe says yes, and registers what NCCL
// hands to regMrDmaBuf with ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access), from its own
// copy of the fd. Soft-RoCE (rxe) cannot register a dma-buf, and the guests' kernel has no
// dma-buf exporter whose pages it could pin (Debian's 6.1 has CONFIG_UDMABUF off; vgem's buffers
// are PFN mappings). So this shim stands in for the kernel's dma-buf import, and nothing else:
//   - the plugin resolves ibv_reg_dmabuf_mr with dlvsym (IBVERBS_1.12): this dlvsym answers that
//     name with shim_reg_dmabuf_mr and passes every other lookup on to libc's;
//   - shim_reg_dmabuf_mr: the probe (fd -1) fails with EBADF, as a kernel and provider that support
//     dma-buf answer; otherwise it maps `length` bytes of the fd at `offset` (a memfd, what
//     ha-net-driver --dmabuf passes) and registers that mapping with ibv_reg_mr_iova2 at `iova`:
//     the NIC's writes land in the fd's pages, which the driver checks through its own mapping;
//   - ibv_dereg_mr deregisters and unmaps what the shim mapped.
// What is real: the plugin's probe, offer, regMrDmaBuf, its fd copy and registration cache, the
// data path, flush QPs and iflush over GPU-type registrations, failover. What is emulated: that
// the fd is a dma-buf (a memfd here) and how the kernel pins its pages.
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace {

struct Mapping {
  void* addr;
  std::size_t length;
};

std::mutex g_mutex;
std::unordered_map<const ibv_mr*, Mapping> g_mappings;  // MRs the shim registered, under g_mutex

using DlvsymFn = void* (*)(void*, const char*, const char*);
using DeregFn = int (*)(ibv_mr*);

DlvsymFn real_dlvsym() {
  static const DlvsymFn fn = reinterpret_cast<DlvsymFn>(dlsym(RTLD_NEXT, "dlvsym"));
  return fn;
}

DeregFn real_dereg() {
  static const DeregFn fn = reinterpret_cast<DeregFn>(real_dlvsym()(RTLD_NEXT, "ibv_dereg_mr", "IBVERBS_1.1"));
  return fn;
}

ibv_mr* shim_reg_dmabuf_mr(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd,
                           int access) {
  if (fd < 0) {  // the probe: "supported" (a real import of a bad fd fails with EBADF)
    errno = EBADF;
    return nullptr;
  }
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset & ~(page - 1);
  const std::size_t skip = static_cast<std::size_t>(offset - start);
  void* addr = mmap(nullptr, length + skip, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  if (addr == MAP_FAILED) return nullptr;  // errno from mmap
  ibv_mr* mr = ibv_reg_mr_iova2(pd, static_cast<char*>(addr) + skip, length, iova, static_cast<unsigned>(access));
  if (!mr) {
    const int err = errno;
    munmap(addr, length + skip);
    errno = err;
    return nullptr;
  }
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_mappings[mr] = {addr, length + skip};
  return mr;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* dlvsym(void* handle, const char* symbol, const char* version) {
  // glibc declares `symbol` non-null (dlvsym's contract): no check here.
  if (std::strcmp(symbol, "ibv_reg_dmabuf_mr") == 0) return reinterpret_cast<void*>(&shim_reg_dmabuf_mr);
  return real_dlvsym()(handle, symbol, version);
}

__attribute__((visibility("default"))) int ibv_dereg_mr(ibv_mr* mr) {
  Mapping m{nullptr, 0};
  {
    const std::lock_guard<std::mutex> lock(g_mutex);
    if (const auto it = g_mappings.find(mr); it != g_mappings.end()) {
      m = it->second;
      g_mappings.erase(it);
    }
  }
  const int rc = real_dereg()(mr);
  if (m.addr && rc == 0) {
    munmap(m.addr, m.length);
  } else if (m.addr) {  // still registered: its mapping stays
    const std::lock_guard<std::mutex> lock(g_mutex);
    g_mappings[mr] = m;
  }
  return rc;
}

}  // extern "C"
