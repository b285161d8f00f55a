// NCCL's profiler: HA's switches and restored protection as net plugin events (profiler.hpp).
#include "ha/profiler.hpp"

#include <atomic>

#include "core/comm.hpp"

namespace nccl_ha::plugin {
namespace {

std::atomic<ncclProfilerCallback_t> g_profiler{nullptr};

ncclProfilerCallback_t callback() noexcept { return g_profiler.load(std::memory_order_acquire); }

// Every request of `c` that NCCL may be waiting for.
template <class F>
void for_each_request(CommBase& c, F&& f) {
  if (c.kind == CommKind::send)
    for (Request& r : static_cast<SendComm&>(c).reqs) f(r);
  else
    for (Request& r : static_cast<RecvComm&>(c).reqs) f(r);
}

// Buffer i of r is still awaited (a send: not yet delivered; a receive: not yet landed).
bool awaited(const Request& r, int i) noexcept {
  if (r.type == ReqType::send) return i == 0 && !r.done_mask;
  return r.type == ReqType::recv && i < r.nreqs && !((r.done_mask >> i) & 1u);
}

}  // namespace

void install_profiler(ncclProfilerCallback_t cb) noexcept {
  if (cb) g_profiler.store(cb, std::memory_order_release);
}

bool profiling() noexcept { return callback() != nullptr; }

void profile_switch(CommBase& c, std::uint8_t type, int from_dev, int to_dev, std::uint32_t epoch) {
  const ncclProfilerCallback_t cb = callback();
  if (!cb) return;
  c.prof_descr = {type, from_dev, to_dev, epoch};
  for_each_request(c, [&](Request& r) {
    if (r.type != ReqType::send && r.type != ReqType::recv) return;
    for (int i = 0; i < kMaxRecvs; ++i) {
      if (r.prof.event[i]) {  // a switch before this one opened it: the delay goes on
        cb(&r.prof.event[i], ncclProfilerNetEventUpdate, nullptr, NCCL_PROFILER_NET_HA_ID, &c.prof_descr);
      } else if (r.prof.phandle[i] && awaited(r, i)) {
        cb(&r.prof.event[i], ncclProfilerNetEventStart, r.prof.phandle[i], NCCL_PROFILER_NET_HA_ID, &c.prof_descr);
        r.prof.open = r.prof.open || r.prof.event[i] != nullptr;
      }
    }
  });
}

void profile_protected(CommBase& c, int dev) noexcept {
  if (!profiling()) return;
  c.prof_note.store(kNoteSet | std::uint64_t{ncclHaProfileReprotect} << 16 | static_cast<std::uint64_t>(dev + 1),
                    std::memory_order_release);
}

void profile_end_all(CommBase& c, bool fatal) {
  const ncclProfilerCallback_t cb = callback();
  if (!cb) return;
  ncclProfilerNetHaDescr_v1_t end = c.prof_descr;
  end.type = ncclHaProfileFatal;
  for_each_request(c, [&](Request& r) {
    if (!r.prof.open) return;
    for (void*& e : r.prof.event)
      if (e) {
        cb(&e, fatal ? ncclProfilerNetEventUpdateAndStop : ncclProfilerNetEventStop, nullptr, NCCL_PROFILER_NET_HA_ID,
           fatal ? &end : nullptr);
        e = nullptr;
      }
    r.prof.open = false;
  });
}

void profile_close(Request& r) noexcept {
  if (const ncclProfilerCallback_t cb = callback())
    for (void*& e : r.prof.event)
      if (e) {
        cb(&e, ncclProfilerNetEventStop, nullptr, NCCL_PROFILER_NET_HA_ID, nullptr);
        e = nullptr;
      }
  r.prof.open = false;
}

void profile_note_post(CommBase& c, Request& r, std::uint64_t note) noexcept {
  const ncclProfilerCallback_t cb = callback();
  if (!cb || !r.prof.phandle[0]) return;
  ncclProfilerNetHaDescr_v1_t d{};
  d.type = static_cast<std::uint8_t>(note >> 16);
  d.fromDev = -1;
  d.toDev = static_cast<int>(note & 0xffff) - 1;
  d.epoch = c.cp.fo().epoch;
  void* e = nullptr;
  cb(&e, ncclProfilerNetEventStart, r.prof.phandle[0], NCCL_PROFILER_NET_HA_ID, &d);
  if (e) cb(&e, ncclProfilerNetEventStop, nullptr, NCCL_PROFILER_NET_HA_ID, nullptr);
}

}  // namespace nccl_ha::plugin
