// Memory registration: regMr / regMrDmaBuf / deregMr through a per-device cache.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <mutex>

#include "core/comm.hpp"
#include "core/state.hpp"
#include "datapath/fused.hpp"
#include "datapath/one_comm.hpp"
#include "datapath/p2p.hpp"
#include "core/path_ops.hpp"
#include "core/reg_ops.hpp"
#include "runtime/device.hpp"

namespace nccl_ha::plugin {

namespace {

// The dma-buf's identity (which buffer the fd refers to): fds are renumbered, the file is not.
Status dmabuf_identity(int fd, std::uint64_t& dev, std::uint64_t& ino) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(Errc::system, "fstat of dma-buf fd " + std::to_string(fd), errno);
  dev = static_cast<std::uint64_t>(st.st_dev);
  ino = static_cast<std::uint64_t>(st.st_ino);
  return {};
}

bool covers(const MrHandle& h, std::uintptr_t begin, std::uintptr_t end, int access, const MrHandle& want) {
  if (end > h.end || begin < h.begin || h.access != access || h.dmabuf != want.dmabuf) return false;
  if (!h.dmabuf) return true;
  return h.dmabuf_dev == want.dmabuf_dev && h.dmabuf_ino == want.dmabuf_ino &&
         h.dmabuf_offset + (begin - h.begin) == want.dmabuf_offset;
}

}  // namespace

Expected<OpsMrPtr> MrCache::register_range(std::uintptr_t begin, std::uintptr_t end, int access,
                                           const DmaBuf* dmabuf, std::uint64_t dmabuf_offset) const {
  const std::size_t length = end - begin;
  errno = 0;
  ibv_mr* mr = nullptr;
  std::string what;
  if (dmabuf) {
    what = "ibv_reg_dmabuf_mr(fd " + std::to_string(dmabuf->fd) + ", offset " + std::to_string(dmabuf_offset) + ", " +
           std::to_string(length) + " bytes)";
    if (!ops_->reg_dmabuf_mr) return make_error(Errc::verbs, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)");
    mr = ops_->reg_dmabuf_mr(pd_, dmabuf_offset, length, begin, dmabuf->fd, access);
  } else if ((access & IBV_ACCESS_RELAXED_ORDERING) != 0 && ops_->reg_mr_iova2) {
    what = "ibv_reg_mr_iova2(" + std::to_string(length) + " bytes)";
    mr = ops_->reg_mr_iova2(pd_, reinterpret_cast<void*>(begin), length, begin, static_cast<unsigned>(access));
  } else {
    what = "ibv_reg_mr(" + std::to_string(length) + " bytes)";
    mr = ops_->reg_mr(pd_, reinterpret_cast<void*>(begin), length, access & ~IBV_ACCESS_RELAXED_ORDERING);
  }
  if (!mr) return errno_error(Errc::verbs, what, errno ? errno : EINVAL);
  return OpsMrPtr(mr, OpsMrDeleter{ops_});
}

Expected<MrHandle*> MrCache::acquire(void* data, std::size_t size, int access, const DmaBuf* dmabuf) {
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto addr = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = addr & ~(page - 1);
  const std::uintptr_t end = (addr + std::max<std::size_t>(size, 1) + page - 1) & ~(page - 1);
  auto h = std::make_unique<MrHandle>();
  h->begin = begin;
  h->end = end;
  h->access = access;
  if (dmabuf) {  // the pages are registered: the dma-buf offset moves back with the address
    if (dmabuf->offset < addr - begin)
      return make_error(Errc::invalid_argument, "dma-buf offset " + std::to_string(dmabuf->offset) +
                                                    " is smaller than the address's offset in its page");
    h->dmabuf = true;
    h->dmabuf_offset = dmabuf->offset - (addr - begin);
    if (auto s = dmabuf_identity(dmabuf->fd, h->dmabuf_dev, h->dmabuf_ino); !s) return std::move(s).error();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Reuse a registration that covers the whole range (it starts at or before `begin`).
  for (auto it = by_begin_.upper_bound(begin); it != by_begin_.begin();) {
    --it;
    if (covers(*it->second, begin, end, access, *h)) {
      ++it->second->refs;
      return it->second.get();
    }
  }
  auto mr = register_range(begin, end, access, dmabuf, h->dmabuf_offset);
  if (!mr) return std::move(mr).error();
  h->mr = std::move(mr).value();
  h->refs = 1;
  return by_begin_.emplace(begin, std::move(h))->second.get();
}

void MrCache::release(MrHandle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--handle->refs > 0) return;
  auto [first, last] = by_begin_.equal_range(handle->begin);
  for (auto it = first; it != last; ++it)
    if (it->second.get() == handle) {
      by_begin_.erase(it);  // deregisters
      return;
    }
}

std::size_t MrCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_begin_.size();
}

}  // namespace nccl_ha::plugin

namespace nccl_ha::plugin {

Expected<MrHandle*> register_on(Device& d, const RegHandle& h) {
  if (!h.dmabuf_fd) return d.mrs->acquire(h.data, h.size, buffer_access(d));
  const DmaBuf buf{h.dmabuf_fd.get(), h.dmabuf_offset};
  return d.mrs->acquire(h.data, h.size, buffer_access(d), &buf);
}

void release_registrations(RegHandle& h) {
  for (int s = 0; s < kSlots; ++s)
    if (h.mr[s]) h.dev[s]->mrs->release(h.mr[s]);
  if (h.next_mr) h.next_dev->mrs->release(h.next_mr);
  h = RegHandle{};
}

namespace {

void warn_failed(const RegHandle& h, const Device& dev, const Error& e) {
  if (h.dmabuf_fd)
    HA_WARN("NET/HA: regMrDmaBuf(%p, %zu bytes, dma-buf fd %d (the plugin's copy %d), offset %llu) on %s failed: %s",
            h.data, h.size, h.dmabuf_fd_given, h.dmabuf_fd.get(), static_cast<unsigned long long>(h.dmabuf_offset),
            dev.port.id().c_str(), e.message.c_str());
  else
    HA_WARN("NET/HA: regMr(%p, %zu) on %s failed: %s", h.data, h.size, dev.port.id().c_str(), e.message.c_str());
}

// The buffer is registered on every device of the comm (primary and standby) at once, so that
// a failover never waits for a registration, and on the device a slot is moving to (rebind.hpp).
// Each goes through its device's cache. A failure releases what was registered (the handle, and
// with it its dma-buf fd, goes).
ncclResult_t register_handle(CommBase& c, std::unique_ptr<RegHandle> h, void** mhandle) {
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  for (int s = 0; s < kSlots; ++s) {
    Device* dev = c.devs[s];
    if (!dev) continue;
    auto mr = register_on(*dev, *h);
    if (!mr) {
      warn_failed(*h, *dev, mr.error());
      release_registrations(*h);
      return ncclSystemError;
    }
    h->mr[s] = *mr;
    h->dev[s] = dev;
  }
  if (Device* next = c.cp.rebind().dev) {  // a slot is moving there: the buffer goes along
    if (auto mr = register_on(*next, *h)) {
      h->next_mr = *mr;
      h->next_dev = next;
    } else {  // the move cannot complete (rebind_ready says so); the buffer itself is fine
      HA_INFO("NET/HA: %s: registration of %p (%zu bytes) on %s, where the standby is moving, failed: %s",
              c.id.c_str(), h->data, h->size, next->port.id().c_str(), mr.error().message.c_str());
    }
  }
  c.regs.push_back(h.get());
  *mhandle = h.release();
  return ncclSuccess;
}

}  // namespace

ncclResult_t reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle) {
  return reg_mr_dmabuf(comm, data, size, type, 0, -1, mhandle);
}

ncclResult_t reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                           void** mhandle) {
  if (!comm || !mhandle) return ncclInvalidArgument;
  *mhandle = nullptr;
  CommHead& h = from_nccl(comm);
  if (h.fused) return fused_reg_mr(static_cast<FusedComm&>(h), data, size, type, offset, fd, mhandle);
  return reg_on(static_cast<CommBase&>(h), data, size, type, offset, fd, mhandle);
}

// fd -1: ordinary memory (host, or CUDA through peer memory), as regMr. Else a dma-buf (NCCL's
// GPU memory when ptrSupport offers DMABUF): registered from a private copy of the fd on every
// device of the comm, with `offset` the offset of `data` in the dma-buf.
ncclResult_t reg_on(CommBase& c, void* data, std::size_t size, int type, std::uint64_t offset, int fd, void** mhandle) {
  *mhandle = nullptr;
  if (fd < 0) {
    const State* st = state();
    const bool gpu = type == NCCL_PTR_CUDA && st && st->gpu_memory;
    if (type != NCCL_PTR_HOST && !gpu) {
      HA_WARN("NET/HA: regMr of memory type %d: not offered in ptrSupport (%s)", type,
              type == NCCL_PTR_CUDA ? "no GPU peer-memory client is loaded" : "host and, with peer memory, CUDA only");
      return ncclInvalidArgument;
    }
    auto h = std::make_unique<RegHandle>();
    h->gpu = gpu;
    h->data = data;
    h->size = size;
    return register_handle(c, std::move(h), mhandle);
  }
  if (!c.devs[0] || !c.devs[0]->dmabuf_offered) {
    HA_WARN("NET/HA: regMrDmaBuf(fd %d, offset %llu, %zu bytes) on %s: dma-buf is not offered in ptrSupport", fd,
            static_cast<unsigned long long>(offset), size, c.devs[0] ? c.devs[0]->port.id().c_str() : "?");
    return ncclInvalidArgument;
  }
  auto copy = dup_fd(fd);
  if (!copy) {
    HA_WARN("NET/HA: regMrDmaBuf(fd %d, offset %llu, %zu bytes): %s", fd, static_cast<unsigned long long>(offset),
            size, copy.error().message.c_str());
    return ncclSystemError;
  }
  auto h = std::make_unique<RegHandle>();
  h->gpu = type == NCCL_PTR_CUDA;
  h->data = data;
  h->size = size;
  h->dmabuf_fd = std::move(copy).value();
  h->dmabuf_fd_given = fd;
  h->dmabuf_offset = offset;
  return register_handle(c, std::move(h), mhandle);
}

namespace {

// Requests still in flight on a buffer being deregistered (NCCL's abort path: it frees buffers of
// requests it will never test) forget the registration: a failover must not read its keys, nor
// post the request again (failover.cpp, flush.cpp). Under the comm (CommBase::owned), the control
// plane's hold; before reg_mutex, which the control plane takes while it holds the comm.
template <std::size_t N>
void forget(std::array<Request, N>& reqs, const RegHandle* h) {
  for (Request& r : reqs) {
    if (r.type == ReqType::free) continue;
    for (int i = 0; i < r.nreqs && i < kMaxRecvs; ++i)
      if (r.mh[i] == h) {
        r.mh[i] = nullptr;
        r.buffers_gone = true;
      }
  }
}

void forget_in_flight(CommBase& c, const RegHandle* h) {
  const HoldWait held(c);
  if (c.kind == CommKind::send) {
    forget(static_cast<SendComm&>(c).reqs, h);
  } else {
    auto& rc = static_cast<RecvComm&>(c);
    forget(rc.reqs, h);
    forget(rc.flushes, h);
  }
}

}  // namespace

ncclResult_t dereg_mr(void* comm, void* mhandle) {
  if (!comm || !mhandle) return ncclInvalidArgument;
  CommHead& head = from_nccl(comm);
  if (head.fused) return fused_dereg_mr(static_cast<FusedComm&>(head), mhandle);
  return dereg_on(static_cast<CommBase&>(head), mhandle);
}

ncclResult_t dereg_on(CommBase& c, void* mhandle) {
  if (!mhandle) return ncclSuccess;
  std::unique_ptr<RegHandle> h(static_cast<RegHandle*>(mhandle));
  forget_in_flight(c, h.get());
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  std::erase(c.regs, h.get());
  release_registrations(*h);
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
