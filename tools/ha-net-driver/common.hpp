// ha-net-driver: shared helpers (errors with exit codes, deadlines, ncclResult_t names).
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "nccl_net_abi.h"

namespace hnd {

// Process exit codes; also the kind of a DriverError.
enum class Fail : int {
  ok = 0,
  verify = 1,   // data / size mismatch, property sanity, resource leak (here or at the peer)
  usage = 2,    // bad command line, ranks disagree on the test parameters
  plugin = 3,   // load failure, missing slot, an entry point returned != ncclSuccess, ABI misuse
  timeout = 4,  // --timeout expired (a phase, the peer, or one plugin call)
  peer = 5,     // management connection lost or the peer aborted
};
const char* fail_name(Fail f) noexcept;

struct DriverError : std::runtime_error {
  Fail kind;
  // Set by check() when a plugin call returned != ncclSuccess: the call ("test(irecv)"), its
  // ncclResult_t and the wall-clock time (ms since the epoch) of its return. code < 0 otherwise.
  std::string call;
  int code = -1;
  std::int64_t unix_ms = 0;
  DriverError(Fail k, const std::string& what) : std::runtime_error(what), kind(k) {}
};

[[noreturn]] void fail(Fail kind, const std::string& what);

// printf into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

const char* result_name(ncclResult_t r) noexcept;
// Throws DriverError(plugin) naming the call and the ncclResult_t when r != ncclSuccess.
void check(ncclResult_t r, const char* call);

using Clock = std::chrono::steady_clock;

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Wall clock (system_clock), for times other processes or hosts compare against.
inline std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
inline std::int64_t wall_ms() { return wall_us() / 1000; }

class Deadline {
 public:
  explicit Deadline(double seconds)
      : end_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
  bool expired() const { return Clock::now() >= end_; }
  // Milliseconds left, clamped to [0, INT32_MAX].
  int remaining_ms() const;
  // Throws DriverError(timeout) "timeout after <s> s <what>" when expired.
  void check(double seconds, const char* what) const;

 private:
  Clock::time_point end_;
};

}  // namespace hnd
