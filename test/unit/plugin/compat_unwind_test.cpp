// ctest unit.plugin_compat_unwind: the dl_iterate_phdr fallback of src/plugin/compat/dl_find_object.cpp
// (used by libnccl-net-ha.so's static unwinder on glibc < 2.35). Built like the plugin
// (-static-libstdc++ -static-libgcc) with the fallback forced: exceptions thrown through several
// frames, through a std::function and on another thread must be caught, and the unwinder must
// have gone through the fallback.
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

extern int nccl_ha_compat_fallback_calls;

namespace {

[[gnu::noinline]] int depth(int n) {
  if (n == 0) throw std::runtime_error("bottom");
  return depth(n - 1) + 1;
}

bool throws_and_catches() {
  try {
    std::function<int()> f = [] { return depth(8); };
    return f() < 0;
  } catch (const std::runtime_error& e) {
    return std::string(e.what()) == "bottom";
  }
}

}  // namespace

int main() {
  bool ok = throws_and_catches();
  bool thread_ok = false;
  std::thread t([&] { thread_ok = throws_and_catches(); });
  t.join();
  std::printf("main thread: %s, other thread: %s, fallback lookups: %d\n", ok ? "caught" : "LOST",
              thread_ok ? "caught" : "LOST", nccl_ha_compat_fallback_calls);
  return ok && thread_ok && nccl_ha_compat_fallback_calls > 0 ? 0 : 1;
}
