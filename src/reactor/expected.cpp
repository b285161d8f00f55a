#include "nccl_ha/reactor/expected.hpp"

#include <cstring>

namespace nccl_ha {

const char* to_string(Errc e) noexcept {
  switch (e) {
    case Errc::invalid_argument: return "invalid argument";
    case Errc::truncated: return "truncated";
    case Errc::oversized: return "oversized";
    case Errc::bad_magic: return "bad magic";
    case Errc::bad_version: return "bad version";
    case Errc::bad_token: return "bad token";
    case Errc::bad_type: return "bad message type";
    case Errc::bad_length: return "bad length";
    case Errc::not_found: return "not found";
    case Errc::verbs: return "verbs error";
    case Errc::system: return "system error";
    case Errc::timeout: return "timeout";
    case Errc::closed: return "closed";
    case Errc::unsupported: return "unsupported";
    case Errc::peer_error: return "peer error";
  }
  return "unknown error";
}

Error errno_error(Errc code, const std::string& what, int err) {
  char buf[128];
  // GNU strerror_r returns the message pointer (may or may not use buf).
  const char* msg = strerror_r(err, buf, sizeof buf);
  return Error{code, what + ": " + msg + " (errno " + std::to_string(err) + ")"};
}

}  // namespace nccl_ha
