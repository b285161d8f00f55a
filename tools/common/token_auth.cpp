#include "token_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace ha_tools {
namespace {

// A key HMAC always takes: a fixed prefix ahead of the token (which may be empty; OpenSSL's
// one-shot MACs treat a NULL or empty key inconsistently across versions).
std::string hmac_key(std::string_view token) {
  std::string k = "ha-tools token v1:";
  k.append(token);
  return k;
}

struct MacCtxFree {
  void operator()(EVP_MAC_CTX* c) const noexcept { EVP_MAC_CTX_free(c); }
};
struct MacFree {
  void operator()(EVP_MAC* m) const noexcept { EVP_MAC_free(m); }
};

[[noreturn]] void crypto_failed(const char* what) { throw std::runtime_error(std::string("libcrypto: ") + what + " failed"); }

}  // namespace

Nonce random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) crypto_failed("RAND_bytes");
  return n;
}

Mac hmac_sha256(std::string_view key_in, std::initializer_list<std::span<const std::uint8_t>> parts) {
  const std::string key = hmac_key(key_in);
  std::unique_ptr<EVP_MAC, MacFree> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) crypto_failed("EVP_MAC_fetch(HMAC)");
  std::unique_ptr<EVP_MAC_CTX, MacCtxFree> ctx(EVP_MAC_CTX_new(mac.get()));
  if (!ctx) crypto_failed("EVP_MAC_CTX_new");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx.get(), reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) != 1)
    crypto_failed("EVP_MAC_init");
  for (const auto& p : parts)
    if (!p.empty() && EVP_MAC_update(ctx.get(), p.data(), p.size()) != 1) crypto_failed("EVP_MAC_update");
  Mac out{};
  std::size_t n = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &n, out.size()) != 1 || n != out.size()) crypto_failed("EVP_MAC_final");
  return out;
}

Mac prove(std::string_view token, std::string_view label, const Nonce& challenge, const Nonce& response,
          std::span<const std::uint8_t> message) {
  // The label's length first: no label can be the prefix of another's input.
  const std::uint8_t label_len = static_cast<std::uint8_t>(label.size());
  const std::span<const std::uint8_t> label_bytes(reinterpret_cast<const std::uint8_t*>(label.data()), label.size());
  return hmac_sha256(token, {std::span<const std::uint8_t>(&label_len, 1), label_bytes, challenge, response, message});
}

bool same_mac(const Mac& a, const Mac& b) noexcept { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace ha_tools
