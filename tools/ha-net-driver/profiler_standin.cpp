// ha-net-driver: the profiler stand-in (profiler_standin.hpp).
#include "profiler_standin.hpp"

#include <chrono>
#include <deque>
#include <mutex>

#include "common.hpp"
#include "nccl_ha_profiler.h"

namespace hnd::prof {
namespace {

constexpr std::size_t kMaxErrors = 20;

struct Event {
  std::uint8_t type = 0;
  bool open = true;
  std::chrono::steady_clock::time_point started;
};

std::mutex g_mutex;
std::deque<Event> g_events;  // stable addresses: *eHandle points here
Summary g_sum;

int bit_of(std::uint8_t type) {
  for (int b = 0; b < 6; ++b)
    if (type == (1u << b)) return b;
  return -1;
}

void error(std::string what) {
  if (g_sum.errors.size() < kMaxErrors) g_sum.errors.push_back(std::move(what));
}

Event* event_of(void** eHandle, const char* op) {
  if (!eHandle || !*eHandle) {
    error(strf("%s of no event (eHandle %s)", op, eHandle ? "NULL" : "missing"));
    return nullptr;
  }
  auto* e = static_cast<Event*>(*eHandle);
  bool ours = false;
  for (const Event& x : g_events) ours = ours || &x == e;
  if (!ours) {
    error(strf("%s of %p, an event the profiler never opened", op, *eHandle));
    return nullptr;
  }
  if (!e->open) {
    error(strf("%s of an event already stopped", op));
    return nullptr;
  }
  return e;
}

const ncclProfilerNetHaDescr_v1_t* descr_of(void* extData, const char* op) {
  const auto* d = static_cast<const ncclProfilerNetHaDescr_v1_t*>(extData);
  if (!d) {
    error(strf("%s without nccl-ha's descriptor", op));
    return nullptr;
  }
  if (bit_of(d->type) < 0) {
    error(strf("%s with unknown event type %u", op, d->type));
    return nullptr;
  }
  return d;
}

void stop(Event& e) {
  e.open = false;
  ++g_sum.stopped;
  --g_sum.open;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - e.started).count();
  if (ms > g_sum.longest_ms) g_sum.longest_ms = ms;
}

ncclResult_t standin(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_sum.calls;
  if (type == ncclProfilerNetEventStart) {
    if (eHandle) *eHandle = nullptr;
    auto* step = static_cast<StepHandle*>(pHandle);
    if (!step) return error("start without a parent handle (NCCL dereferences it)"), ncclSuccess;
    if (step->magic != StepHandle{}.magic) return error("start under a handle the driver never gave"), ncclSuccess;
    if (!step->in_flight.load()) return error("start under a request test() already reported done"), ncclSuccess;
    if (pluginId != NCCL_PROFILER_NET_HA_ID) return ++g_sum.other_plugins, ncclSuccess;
    const auto* d = descr_of(extData, "start");
    if (!d || !eHandle) return ncclSuccess;
    g_events.push_back(Event{d->type, true, std::chrono::steady_clock::now()});
    ++g_sum.started[bit_of(d->type)];
    ++g_sum.open;
    *eHandle = &g_events.back();
    return ncclSuccess;
  }
  const char* op = type == ncclProfilerNetEventStop ? "stop" : type == ncclProfilerNetEventUpdate ? "update"
                   : type == ncclProfilerNetEventUpdateAndStop ? "update-and-stop" : nullptr;
  if (!op) return error(strf("callback type %d", type)), ncclSuccess;
  Event* e = event_of(eHandle, op);
  if (!e) return ncclSuccess;
  if (type != ncclProfilerNetEventStop) {
    if (const auto* d = descr_of(extData, op)) {
      ++g_sum.updates;
      if (d->type == ncclHaProfileFatal) ++g_sum.fatal_updates;
    }
  }
  if (type != ncclProfilerNetEventUpdate) stop(*e);
  return ncclSuccess;
}

}  // namespace

ncclProfilerCallback_t callback() { return &standin; }

Summary summary() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_sum;
}

const char* type_name(int bit) {
  static const char* const kNames[] = {"failover", "failback", "resync", "rescue", "reprotect", "fatal"};
  return bit >= 0 && bit < 6 ? kNames[bit] : "?";
}

}  // namespace hnd::prof
