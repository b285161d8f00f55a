// Replacement global operator new/delete for test_net (see alloc_tracker.hpp). Plain malloc/free
// underneath, so AddressSanitizer still sees every allocation.
#include "alloc_tracker.hpp"

#include <cstdlib>
#include <new>

namespace nccl_ha::test {
std::atomic<bool> g_track_allocations{false};
std::atomic<std::size_t> g_largest_allocation{0};
}  // namespace nccl_ha::test

namespace {
void note(std::size_t n) noexcept {
  using namespace nccl_ha::test;
  if (!g_track_allocations.load(std::memory_order_relaxed)) return;
  std::size_t cur = g_largest_allocation.load(std::memory_order_relaxed);
  while (n > cur && !g_largest_allocation.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}
void* allocate(std::size_t n) {
  note(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): every form a program may
// pair with the deletes above must come from the same malloc, or ASan reports a mismatch.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  note(n);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  note(n);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
