// HMAC-SHA256 and random keys (auth.hpp).
#include "nccl_ha/net/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace nccl_ha::net {
namespace {

void fill_random(std::span<std::uint8_t> out) {
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "nccl-ha: getrandom failed: no randomness for keys\n");
      std::abort();
    }
  }
}

void put_length(std::vector<std::uint8_t>& out, std::size_t n) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
}

}  // namespace

Key random_key() {
  Key k{};
  do fill_random(k);
  while (all_zero(k));
  return k;
}

Nonce random_nonce() {
  Nonce n{};
  fill_random(n);
  return n;
}

Mac mac(const Key& key, std::string_view label, std::initializer_list<Bytes> parts) {
  std::vector<std::uint8_t> msg;
  std::size_t total = 4 + label.size();
  for (const Bytes& p : parts) total += 4 + p.size();
  msg.reserve(total);
  put_length(msg, label.size());
  msg.insert(msg.end(), label.begin(), label.end());
  for (const Bytes& p : parts) {
    put_length(msg, p.size());
    msg.insert(msg.end(), p.begin(), p.end());
  }
  Mac out{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &len) ||
      len != out.size()) {
    std::fprintf(stderr, "nccl-ha: HMAC-SHA256 failed in libcrypto\n");
    std::abort();
  }
  return out;
}

Key derive(const Key& secret, std::string_view label, std::initializer_list<Bytes> parts) {
  return mac(secret, label, parts);  // kKeySize == kMacSize
}

static_assert(kKeySize == kMacSize);

bool mac_equal(Bytes got, const Mac& want, std::size_t n) {
  if (n > want.size() || got.size() != n) return false;
  return CRYPTO_memcmp(got.data(), want.data(), n) == 0;
}

bool all_zero(Bytes b) {
  std::uint8_t acc = 0;
  for (const std::uint8_t v : b) acc |= v;
  return acc == 0;
}

}  // namespace nccl_ha::net
