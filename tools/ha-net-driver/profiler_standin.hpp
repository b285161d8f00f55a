// ha-net-driver: a stand-in for NCCL's side of the net plugin profiler (the callback NCCL passes
// to init() from v10 on, and a profiler plugin behind it), strict where NCCL is fragile:
//   - the driver gives every isend / irecv buffer a step handle (what NCCL's proxy step handle is
//     to the callback) that is "in flight" from just before its first call until test() reports
//     the request done (a call that returned no request is repeated with the same handle, which
//     stays in flight, as NCCL's proxy step event does: a fused comm may hold it in a member's part);
//   - a start must name such a handle while it is in flight (NCCL dereferences it), with the
//     plugin id and a descriptor of nccl-ha's (nccl_ha_profiler.h); an update or a stop must name
//     an event that is open. Anything else is an error, recorded with what it was.
// The report says how many events of each type were started and stopped, how long the longest
// stayed open, and whether any is still open. Thread-safe (the plugin's progress thread calls it).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl_net_abi.h"

namespace hnd::prof {

struct StepHandle {
  std::uint64_t magic = 0x5354455048444c45ull;  // "STEPHDLE": a handle the driver made
  std::atomic<bool> in_flight{false};
};

ncclProfilerCallback_t callback();

struct Summary {
  std::uint64_t calls = 0;
  std::uint64_t started[6] = {};  // by bit of ncclHaProfileEventType_t (failover .. fatal)
  std::uint64_t stopped = 0, updates = 0, fatal_updates = 0, other_plugins = 0;
  std::uint64_t open = 0;         // started, not stopped
  double longest_ms = 0;          // the longest a stopped event stayed open
  std::vector<std::string> errors;  // the first few
};
Summary summary();
const char* type_name(int bit);  // "failover", "failback", "resync", "rescue", "reprotect", "fatal"

}  // namespace hnd::prof
