#include "server_limits.hpp"

#include <algorithm>

namespace ha_ping {

nccl_ha::Expected<Grant> admit(const Hello& hello, const ServerLimits& limits) {
  for (const auto s : hello.sizes)
    if (s > limits.max_size)
      return nccl_ha::make_error(nccl_ha::Errc::invalid_argument,
                                 "size " + size_text(s) + " is above the server's --max-size " + size_text(limits.max_size));
  Grant g;
  g.timeout_ms = std::min(hello.timeout_ms, limits.timeout_ms);
  g.timeout_capped = g.timeout_ms < hello.timeout_ms;
  return g;
}

std::chrono::milliseconds handshake_step(std::uint32_t server_timeout_ms) noexcept {
  return std::min(kHandshakeStep, std::chrono::milliseconds(server_timeout_ms));
}

std::string size_text(std::uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace ha_ping
