#include "common.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace hnd {

const char* fail_name(Fail f) noexcept {
  switch (f) {
    case Fail::ok: return "ok";
    case Fail::verify: return "verification failed";
    case Fail::usage: return "usage error";
    case Fail::plugin: return "plugin error";
    case Fail::timeout: return "timeout";
    case Fail::peer: return "peer error";
  }
  return "?";
}

void fail(Fail kind, const std::string& what) { throw DriverError(kind, what); }

std::string strf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

const char* result_name(ncclResult_t r) noexcept {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclTimeout: return "ncclTimeout";
    case ncclNumResults: break;
  }
  return "ncclResult_t(out of range)";
}

void check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return;
  const std::int64_t t = wall_ms();  // first: the time of the call's return
  DriverError e(Fail::plugin, strf("%s returned %s (%d)", call, result_name(r), static_cast<int>(r)));
  e.call = call;
  e.code = static_cast<int>(r);
  e.unix_ms = t;
  throw e;
}

int Deadline::remaining_ms() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT32_MAX));
}

void Deadline::check(double seconds, const char* what) const {
  if (expired()) fail(Fail::timeout, strf("timeout after %g s %s", seconds, what));
}

}  // namespace hnd
