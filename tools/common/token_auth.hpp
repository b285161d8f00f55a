// The tools' shared-token proof (ha-ping's control connection, ha-net-driver's management
// connection): a challenge-response with HMAC-SHA256 from OpenSSL's libcrypto, keyed by the token
// both sides were given (--token or an environment variable). Each side sends a fresh random nonce;
// a proof is the MAC, keyed by the token, of a label naming the step, both nonces and the message
// it vouches for. The token itself never crosses the wire, and a recorded proof is worth nothing
// against a new nonce.
//
// Without a token both sides use the empty one: the exchange still runs (a stranger that does not
// speak the protocol is dropped), but anyone who does can connect. That is no authentication.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace ha_tools {

constexpr std::size_t kNonceSize = 32;
constexpr std::size_t kMacSize = 32;
using Nonce = std::array<std::uint8_t, kNonceSize>;
using Mac = std::array<std::uint8_t, kMacSize>;

// kNonceSize bytes from OpenSSL's CSPRNG; throws std::runtime_error if it fails.
Nonce random_nonce();

// HMAC-SHA256 of the concatenated `parts`, keyed by `key` (any length, empty included).
Mac hmac_sha256(std::string_view key, std::initializer_list<std::span<const std::uint8_t>> parts);

// A proof for one step: HMAC-SHA256 keyed by the token over label, the challenger's nonce, the
// responder's nonce and `message` (the bytes the proof vouches for; may be empty).
Mac prove(std::string_view token, std::string_view label, const Nonce& challenge, const Nonce& response,
          std::span<const std::uint8_t> message = {});

// Constant-time comparison (CRYPTO_memcmp).
bool same_mac(const Mac& a, const Mac& b) noexcept;

}  // namespace ha_tools
