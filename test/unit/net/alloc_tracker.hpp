// Records the largest single operator-new request made while tracking is on (test_net replaces
// the global allocation functions). Used to prove that a peer's length claim is never allocated.
#pragma once

#include <atomic>
#include <cstddef>

namespace nccl_ha::test {

extern std::atomic<bool> g_track_allocations;
extern std::atomic<std::size_t> g_largest_allocation;

class AllocationWatch {
 public:
  AllocationWatch() {
    g_largest_allocation.store(0);
    g_track_allocations.store(true);
  }
  ~AllocationWatch() { g_track_allocations.store(false); }
  AllocationWatch(const AllocationWatch&) = delete;
  AllocationWatch& operator=(const AllocationWatch&) = delete;
  std::size_t largest() const { return g_largest_allocation.load(); }
};

}  // namespace nccl_ha::test
