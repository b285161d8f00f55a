#include "auth.hpp"

#include <algorithm>

#include "token_auth.hpp"

namespace ha_ping {
namespace {

constexpr const char* kHelloLabel = "ha-ping hello";
constexpr const char* kAckLabel = "ha-ping hello-ack";

// Encodes m with a zero proof, then writes the proof of the bytes before it in its place.
template <class Msg, class Prove>
std::vector<std::uint8_t> sign(Msg m, Prove prove) {
  m.proof = {};
  auto bytes = encode(m);
  const Proof p = prove(before_proof(bytes));
  std::copy(p.begin(), p.end(), bytes.end() - static_cast<std::ptrdiff_t>(p.size()));
  return bytes;
}

}  // namespace

std::vector<std::uint8_t> signed_hello(Hello hello, const std::string& token, const Nonce& server_nonce) {
  const Nonce client_nonce = hello.nonce;
  return sign(std::move(hello), [&](std::span<const std::uint8_t> body) {
    return ha_tools::prove(token, kHelloLabel, server_nonce, client_nonce, body);
  });
}

bool hello_proved(std::span<const std::uint8_t> payload, const Hello& decoded, const std::string& token,
                  const Nonce& server_nonce) {
  return ha_tools::same_mac(decoded.proof,
                            ha_tools::prove(token, kHelloLabel, server_nonce, decoded.nonce, before_proof(payload)));
}

std::vector<std::uint8_t> signed_ack(HelloAck ack, const std::string& token, const Nonce& server_nonce,
                                     const Nonce& client_nonce) {
  return sign(std::move(ack), [&](std::span<const std::uint8_t> body) {
    return ha_tools::prove(token, kAckLabel, client_nonce, server_nonce, body);
  });
}

bool ack_proved(std::span<const std::uint8_t> payload, const HelloAck& decoded, const std::string& token,
                const Nonce& server_nonce, const Nonce& client_nonce) {
  return ha_tools::same_mac(decoded.proof,
                            ha_tools::prove(token, kAckLabel, client_nonce, server_nonce, before_proof(payload)));
}

}  // namespace ha_ping
