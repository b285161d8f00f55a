// ha-ping's proofs (protocol.hpp): the client's in its Hello, the server's in its HelloAck, both
// HMAC-SHA256 keyed by the shared token (tools/common/token_auth.hpp) over the two nonces and the
// message's bytes before the proof. An empty token is the "no token" setting of both sides.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "protocol.hpp"

namespace ha_ping {

// The Hello's payload, its proof made with `token` against the server's challenge.
std::vector<std::uint8_t> signed_hello(Hello hello, const std::string& token, const Nonce& server_nonce);
// True when a Hello's payload (as received) carries a proof made with `token` against our challenge.
bool hello_proved(std::span<const std::uint8_t> payload, const Hello& decoded, const std::string& token,
                  const Nonce& server_nonce);

std::vector<std::uint8_t> signed_ack(HelloAck ack, const std::string& token, const Nonce& server_nonce,
                                     const Nonce& client_nonce);
bool ack_proved(std::span<const std::uint8_t> payload, const HelloAck& decoded, const std::string& token,
                const Nonce& server_nonce, const Nonce& client_nonce);

// What the server tells a client whose proof is wrong, and nothing more.
inline constexpr const char* kAuthFailed = "authentication failed";

}  // namespace ha_ping
