// What an ha-ping server grants a client: it never trusts the client's numbers beyond its own
// limits. The client's timeout is capped at the server's --timeout; a message size above the
// server's --max-size refuses the whole request (the server would pin twice the largest size per
// rail). Before the Hello is proved, every step has kHandshakeStep at most.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "nccl_ha/reactor/expected.hpp"
#include "protocol.hpp"

namespace ha_ping {

constexpr std::uint64_t kDefaultMaxSize = 64ull << 20;  // --max-size
constexpr std::chrono::milliseconds kHandshakeStep{5000};

struct ServerLimits {
  std::uint64_t max_size = kDefaultMaxSize;
  std::uint32_t timeout_ms = 30000;  // the server's --timeout
};

struct Grant {
  std::uint32_t timeout_ms = 0;  // the session's timeout
  bool timeout_capped = false;   // the client asked for more
};

// The grant for a (proved) Hello, or the reason it is refused (sent to the client as is).
nccl_ha::Expected<Grant> admit(const Hello& hello, const ServerLimits& limits);

// A handshake step's bound: kHandshakeStep, or the server's --timeout when that is shorter.
std::chrono::milliseconds handshake_step(std::uint32_t server_timeout_ms) noexcept;

// "64 MiB", "4 KiB", "100 bytes": a size for messages.
std::string size_text(std::uint64_t bytes);

}  // namespace ha_ping
