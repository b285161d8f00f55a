// Memory registration: regMr / regMrDmaBuf / deregMr through a per-device cache.
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "comm.hpp"
#include "core.hpp"
#include "datapath.hpp"
#include "device.hpp"
#include "rebind.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {

Expected<MrHandle*> MrCache::acquire(void* data, std::size_t size, int access) {
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto addr = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = addr & ~(page - 1);
  const std::uintptr_t end = (addr + std::max<std::size_t>(size, 1) + page - 1) & ~(page - 1);
  std::lock_guard<std::mutex> lock(mutex_);
  // Reuse a registration that covers the whole range (it starts at or before `begin`).
  for (auto it = by_begin_.upper_bound(begin); it != by_begin_.begin();) {
    --it;
    if (end <= it->second->end) {
      ++it->second->refs;
      return it->second.get();
    }
  }
  auto mr = net::register_mr(pd_, reinterpret_cast<void*>(begin), end - begin, access);
  if (!mr) return std::move(mr).error();
  auto h = std::make_unique<MrHandle>();
  h->mr = std::move(mr).value();
  h->begin = begin;
  h->end = end;
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

// The buffer is registered on every device of the comm (primary and backup) at once, so that
// a failover never waits for a registration, and on the device a slot is moving to (rebind.hpp).
// Each goes through its device's cache.
ncclResult_t reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle) {
  if (!comm || !mhandle) return ncclInvalidArgument;
  *mhandle = nullptr;
  const State* st = state();
  const bool gpu = type == NCCL_PTR_CUDA && st && st->gpu_memory;
  if (type != NCCL_PTR_HOST && !gpu) {
    HA_WARN("NET/HA: regMr of memory type %d: not offered in ptrSupport (%s)", type,
            type == NCCL_PTR_CUDA ? "no GPU peer-memory client is loaded" : "host and, with peer memory, CUDA only");
    return ncclInvalidArgument;
  }
  auto& c = *static_cast<CommBase*>(comm);
  auto h = std::make_unique<RegHandle>();
  h->gpu = gpu;
  h->data = data;
  h->size = size;
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  for (int s = 0; s < kSlots; ++s) {
    Device* dev = c.devs[s];
    if (!dev) continue;
    auto mr = dev->mrs->acquire(data, size, kBufferAccess);
    if (!mr) {
      HA_WARN("NET/HA: regMr(%p, %zu) on %s failed: %s", data, size, dev->port.id().c_str(),
              mr.error().message.c_str());
      release_registrations(*h);
      return ncclSystemError;
    }
    h->mr[s] = *mr;
    h->dev[s] = dev;
  }
  if (Device* next = c.rebind_dev) {  // a slot is moving there: the buffer goes along
    if (auto mr = next->mrs->acquire(data, size, kBufferAccess)) {
      h->next_mr = *mr;
      h->next_dev = next;
    } else {  // the move cannot complete (rebind_ready says so); the buffer itself is fine
      HA_INFO("NET/HA: %s: regMr(%p, %zu) on %s, where the standby is moving, failed: %s", c.id.c_str(), data, size,
              next->port.id().c_str(), mr.error().message.c_str());
    }
  }
  c.regs.push_back(h.get());
  *mhandle = h.release();
  return ncclSuccess;
}

ncclResult_t reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t /*offset*/, int /*fd*/,
                           void** mhandle) {
  // dma-buf is not offered in ptrSupport; host memory may still come this way.
  return reg_mr(comm, data, size, type, mhandle);
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
  hold_blocking(c);
  if (c.kind == CommKind::send) {
    forget(static_cast<SendComm&>(c).reqs, h);
  } else {
    auto& rc = static_cast<RecvComm&>(c);
    forget(rc.reqs, h);
    forget(rc.flushes, h);
  }
  c.owned.store(false, std::memory_order_release);
}

}  // namespace

ncclResult_t dereg_mr(void* comm, void* mhandle) {
  if (!comm || !mhandle) return ncclInvalidArgument;
  auto& c = *static_cast<CommBase*>(comm);
  std::unique_ptr<RegHandle> h(static_cast<RegHandle*>(mhandle));
  forget_in_flight(c, h.get());
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  std::erase(c.regs, h.get());
  release_registrations(*h);
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
