// The registration's verbs table, the dma-buf probe and the relaxed-ordering rule (mr_ops.hpp).
#include "runtime/mr_ops.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "nccl_ha/net/verbs.hpp"
#include "runtime/config.hpp"
#include "runtime/log.hpp"

namespace nccl_ha::plugin {
namespace {

// ibv_reg_mr is a macro over an inline function in newer headers; the library's function is meant.
ibv_mr* linked_reg_mr(ibv_pd* pd, void* addr, std::size_t length, int access) {
  return (ibv_reg_mr)(pd, addr, length, access);
}

MrOps resolve_real_ops() {
  MrOps ops;
  ops.reg_mr = &linked_reg_mr;
  ops.dereg_mr = &ibv_dereg_mr;
  // Versioned as rdma-core introduced them, in the plugin's own (already loaded) libibverbs.
  ops.reg_mr_iova2 =
      reinterpret_cast<decltype(ops.reg_mr_iova2)>(net::loaded_verbs_symbol("ibv_reg_mr_iova2", "IBVERBS_1.8"));
  ops.reg_dmabuf_mr =
      reinterpret_cast<decltype(ops.reg_dmabuf_mr)>(net::loaded_verbs_symbol("ibv_reg_dmabuf_mr", "IBVERBS_1.12"));
  return ops;
}

}  // namespace

const MrOps& real_mr_ops() {
  static const MrOps ops = resolve_real_ops();
  return ops;
}

DmabufProbe probe_dmabuf(const MrOps& ops, ibv_pd* pd) {
  if (!ops.reg_dmabuf_mr) return {false, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)"};
  errno = 0;
  ibv_mr* mr = ops.reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  const int err = errno;
  if (mr) {  // no provider registers fd -1; should one, it is not kept
    if (ops.dereg_mr) ops.dereg_mr(mr);
    return {true, "ibv_reg_dmabuf_mr probe succeeded"};
  }
  const std::string what = std::string("ibv_reg_dmabuf_mr probe: ") + (err ? std::strerror(err) : "failed, errno 0");
  if (err == EOPNOTSUPP || err == EPROTONOSUPPORT) return {false, what};
  return {true, what};  // EBADF for the fd -1: the kernel and the provider got as far as the fd
}

bool offer_dmabuf(bool device_supports, const Config& c) { return device_supports && c.dmabuf_enable != 0; }

bool relaxed_ordering_on(int mode, bool capable, bool pcie_dma) {
  return capable && (mode == 1 || (mode == 2 && pcie_dma));
}


UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Expected<UniqueFd> dup_fd(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return errno_error(Errc::system, "dup of dma-buf fd " + std::to_string(fd), errno);
  return UniqueFd(copy);
}

}  // namespace nccl_ha::plugin
