// Message authentication for the out-of-band channels: HMAC-SHA256 (OpenSSL's libcrypto),
// random keys and nonces from the kernel, constant-time comparison.
//
// A service proves that a peer holds a shared secret without the secret crossing the wire: the
// peer sends a fresh nonce and mac(secret, label || context || nonce); the service recomputes it.
// Keys for later messages are derived from the secret and both sides' nonces (derive), so every
// conversation has keys of its own. Labels keep the uses apart: a tag made for one message kind
// never verifies as another.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace nccl_ha::net {

constexpr std::size_t kKeySize = 32;    // HMAC-SHA256 keys (and derived keys)
constexpr std::size_t kNonceSize = 16;  // per conversation and side
constexpr std::size_t kMacSize = 32;    // a whole HMAC-SHA256 tag

using Key = std::array<std::uint8_t, kKeySize>;
using Nonce = std::array<std::uint8_t, kNonceSize>;
using Mac = std::array<std::uint8_t, kMacSize>;
using Bytes = std::span<const std::uint8_t>;

// Random bytes from the kernel (getrandom; aborts the process only if the kernel has none to give,
// which no supported kernel does after boot). A key is never all zero.
Key random_key();
Nonce random_nonce();

// HMAC-SHA256 of the concatenation of `parts` (each prefixed by its length, so that the split
// between parts is part of what is authenticated), under `key`, with `label` first.
Mac mac(const Key& key, std::string_view label, std::initializer_list<Bytes> parts);

// A key for one use, derived from `secret`: mac(secret, label, parts).
Key derive(const Key& secret, std::string_view label, std::initializer_list<Bytes> parts);

// Constant-time: whether the first `n` bytes of `got` equal those of `want` (n <= kMacSize;
// got.size() must be n, else false).
bool mac_equal(Bytes got, const Mac& want, std::size_t n = kMacSize);

// Whether every byte is zero (a key that was never set).
bool all_zero(Bytes b);

template <class T>
Bytes bytes_of(const T& v) {
  return Bytes(reinterpret_cast<const std::uint8_t*>(&v), sizeof v);
}

}  // namespace nccl_ha::net
