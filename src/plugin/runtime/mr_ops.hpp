// How NCCL's buffers are registered: the verbs calls behind the registration cache (an injectable
// table, so unit tests drive every decision without RDMA), the dma-buf probe, the relaxed-ordering
// rule, and an owner for the dma-buf file descriptor a registration keeps.
//
// dma-buf (NCCL_PTR_DMABUF). NCCL's rule (net_ib gdr.cc / init.cc): a device supports it when the
// probe ibv_reg_dmabuf_mr(pd, offset 0, length 0, iova 0, fd -1, access 0) on its protection
// domain fails with anything but EOPNOTSUPP / EPROTONOSUPPORT (a kernel and provider that support
// it answer EBADF for the bad fd). A libibverbs without the symbol (rdma-core < 34) cannot. The
// symbol is resolved at run time (dlvsym IBVERBS_1.12), never linked: an older libibverbs must
// still load the plugin and say "unsupported". ptrSupport offers DMABUF where the device
// supports it and HA_NCCL_DMABUF_ENABLE (else NCCL_DMABUF_ENABLE, default 1) allows it.
//
// Relaxed ordering (IBV_ACCESS_RELAXED_ORDERING: the NIC may reorder its PCIe writes into the
// buffer, which pays off on many CPUs / PCIe switches). NCCL's rule: HA_NCCL_IB_PCI_RELAXED_ORDERING,
// else NCCL_IB_PCI_RELAXED_ORDERING: 0 off, 1 on, 2 auto (default); on (1 or 2) takes effect only
// where the library is capable, i.e. has ibv_reg_mr_iova2 (IBVERBS_1.8), the call that passes
// optional access flags. A provider that does not know the flag ignores it (it is optional).
// NCCL also honours NCCL_NET_MR_FLAG_FORCE_SO, but only for registrations that carry mr flags
// (its GIN and RMA plugin families); no ncclNet API version v6..v12 passes flags to regMr or
// regMrDmaBuf, so every NCCL buffer here gets the rule's answer.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::plugin {

struct Config;

// The verbs calls that register and deregister NCCL's buffers. A null entry: the library lacks it.
struct MrOps {
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, std::size_t length, int access) = nullptr;
  ibv_mr* (*reg_mr_iova2)(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, unsigned access) = nullptr;
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd,
                           int access) = nullptr;
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
};

// The process's libibverbs (ibv_reg_mr and ibv_dereg_mr linked; the versioned newer ones looked
// up once). Never null entries for reg_mr / dereg_mr.
const MrOps& real_mr_ops();

// The dma-buf probe's answer for one device.
struct DmabufProbe {
  bool supported = false;
  std::string why;  // "ibv_reg_dmabuf_mr probe: Bad file descriptor", "libibverbs has no ibv_reg_dmabuf_mr", ...
};
DmabufProbe probe_dmabuf(const MrOps& ops, ibv_pd* pd);

// Whether ptrSupport offers DMABUF: the device supports it and the settings allow it.
bool offer_dmabuf(bool device_supports, const Config& c);

// NCCL's relaxed-ordering rule: mode 0 off; 1 or 2 on when capable (the library has
// ibv_reg_mr_iova2). Anything else: off. One refinement of auto (2): only on a device that writes
// NCCL's buffers by PCIe DMA (`pcie_dma`). Relaxed ordering is an attribute of PCIe writes; a
// software device (Soft-RoCE) makes none, so auto leaves its registrations as they always were;
// 1 still forces the flag on (it is optional: rxe ignores it).
bool relaxed_ordering_on(int mode, bool capable, bool pcie_dma = true);
inline bool relaxed_ordering_capable(const MrOps& ops) { return ops.reg_mr_iova2 != nullptr; }


// Owns one file descriptor (closed once, at destruction or reset). Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// A private duplicate of `fd` (close-on-exec): NCCL closes its dma-buf fd as soon as regMrDmaBuf
// returns, and the registration may have to be repeated later on the device a slot moves to.
Expected<UniqueFd> dup_fd(int fd);

}  // namespace nccl_ha::plugin
