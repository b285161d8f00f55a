// The tools' shared-token proof (tools/common/token_auth.hpp) and ha-ping's use of it
// (tools/ha-ping/auth.hpp): known HMAC-SHA256 values (computed with Python's hmac module), and a
// proof holds only for the same token, the same nonces and the same bytes.
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <string>

#include "auth.hpp"
#include "token_auth.hpp"
#include "token_option.hpp"

namespace {

std::string hex(const ha_tools::Mac& m) {
  std::string s;
  char b[3];
  for (auto v : m) {
    std::snprintf(b, sizeof b, "%02x", v);
    s += b;
  }
  return s;
}

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

ha_tools::Nonce counting(std::uint8_t from) {
  ha_tools::Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(from + i);
  return n;
}

ha_ping::Hello sample_hello() {
  ha_ping::Hello h;
  h.rails = {"rxe0:1", "rxe1:1"};
  h.sizes = {8, 65536};
  h.iters = 20;
  h.bw_iters = 8;
  h.window = 8;
  h.timeout_ms = 15000;
  h.nonce = counting(100);
  return h;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(token_auth)

BOOST_AUTO_TEST_CASE(hmac_sha256_known_values) {
  const std::string data = "what do ya want for nothing?";
  // HMAC-SHA256 keyed by "ha-tools token v1:" + token.
  BOOST_TEST(hex(ha_tools::hmac_sha256("Jefe", {bytes_of(data)})) ==
             "775b94479f2c3ef04abb0d34e16e925a3e0aea4d5a7952d09d8fead4d2c304ac");
  BOOST_TEST(hex(ha_tools::hmac_sha256("", {})) == "1c3c5bbdc0bac5e2d2ff4a8b9fbf0362b5cb4626b06e06d3a7ddb05f844d2daf");
  // The parts are concatenated: split anywhere, the same MAC.
  BOOST_TEST(hex(ha_tools::hmac_sha256("Jefe", {bytes_of("what do ya "), bytes_of(""), bytes_of("want for nothing?")})) ==
             "775b94479f2c3ef04abb0d34e16e925a3e0aea4d5a7952d09d8fead4d2c304ac");
  // prove(): label length, label, challenge, response, message.
  BOOST_TEST(hex(ha_tools::prove("k", "ha-ping hello", counting(0), counting(32), bytes_of("msg"))) ==
             "6a10e3aedd4a4fe771ff30d373026b979cce51357b1ff08e94154827c5530e05");
}

BOOST_AUTO_TEST_CASE(nonces_differ_and_macs_compare) {
  const auto a = ha_tools::random_nonce(), b = ha_tools::random_nonce();
  BOOST_TEST((a != b));
  const auto m = ha_tools::prove("t", "x", a, b);
  auto other = m;
  BOOST_TEST(ha_tools::same_mac(m, other));
  other[31] ^= 1;
  BOOST_TEST(!ha_tools::same_mac(m, other));
  BOOST_TEST(!ha_tools::same_mac(m, ha_tools::prove("t", "y", a, b)));  // another step's label
  BOOST_TEST(!ha_tools::same_mac(m, ha_tools::prove("t", "x", b, a)));  // nonces swapped
}

BOOST_AUTO_TEST_CASE(resolve_token_option_then_environment) {
  ha_tools::Token t;
  BOOST_TEST(!ha_tools::resolve_token(std::nullopt, "TOK", nullptr, t));
  BOOST_TEST(t.value.empty());
  BOOST_TEST(t.source.empty());
  BOOST_TEST(!ha_tools::resolve_token(std::nullopt, "TOK", "env", t));
  BOOST_TEST(t.value == "env");
  BOOST_TEST(t.source == "TOK");
  BOOST_TEST(!ha_tools::resolve_token(std::string("opt"), "TOK", "env", t));
  BOOST_TEST(t.value == "opt");
  BOOST_TEST(t.source == "--token");
  BOOST_TEST(ha_tools::resolve_token(std::nullopt, "TOK", "", t).value().find("TOK is empty") == 0u);
  BOOST_TEST(ha_tools::resolve_token(std::string(), "TOK", nullptr, t).value().find("--token is empty") == 0u);
  BOOST_TEST(t.value.empty());  // nothing half-set on an error
}

BOOST_AUTO_TEST_CASE(hello_proof_holds_only_for_the_same_token_nonce_and_bytes) {
  const auto server_nonce = counting(7);
  const auto hello = sample_hello();
  const auto payload = ha_ping::signed_hello(hello, "secret", server_nonce);
  auto decoded = ha_ping::decode_hello(payload);
  BOOST_TEST_REQUIRE(decoded.ok());
  BOOST_TEST(ha_ping::hello_proved(payload, *decoded, "secret", server_nonce));
  BOOST_TEST(!ha_ping::hello_proved(payload, *decoded, "Secret", server_nonce));   // another token
  BOOST_TEST(!ha_ping::hello_proved(payload, *decoded, "", server_nonce));         // none
  BOOST_TEST(!ha_ping::hello_proved(payload, *decoded, "secret", counting(8)));    // a replay to a new challenge
  // Any byte changed (a size, a nonce, the proof itself) breaks it, where the Hello still decodes.
  for (std::size_t i = 0; i < payload.size(); ++i) {
    auto bad = payload;
    bad[i] ^= 0x01;
    auto d = ha_ping::decode_hello(bad);
    if (d) BOOST_TEST(!ha_ping::hello_proved(bad, *d, "secret", server_nonce), "byte " << i);
  }
  // Without a token on both sides the exchange still works (no authentication).
  const auto open = ha_ping::signed_hello(hello, "", server_nonce);
  BOOST_TEST(ha_ping::hello_proved(open, *ha_ping::decode_hello(open), "", server_nonce));
}

BOOST_AUTO_TEST_CASE(ack_proof_binds_both_nonces) {
  ha_ping::HelloAck ack;
  ack.rails = {"rxe0:1"};
  ack.timeout_ms = 5000;
  const auto s = counting(1), c = counting(2);
  const auto payload = ha_ping::signed_ack(ack, "secret", s, c);
  auto decoded = ha_ping::decode_hello_ack(payload);
  BOOST_TEST_REQUIRE(decoded.ok());
  BOOST_TEST(decoded->timeout_ms == 5000u);
  BOOST_TEST(ha_ping::ack_proved(payload, *decoded, "secret", s, c));
  BOOST_TEST(!ha_ping::ack_proved(payload, *decoded, "other", s, c));
  BOOST_TEST(!ha_ping::ack_proved(payload, *decoded, "secret", c, s));
  BOOST_TEST(!ha_ping::ack_proved(payload, *decoded, "secret", s, counting(3)));
  // A client's Hello proof is no server's ack proof (different labels).
  const auto hello_payload = ha_ping::signed_hello(sample_hello(), "secret", s);
  ha_ping::HelloAck forged = *decoded;
  std::copy(hello_payload.end() - 32, hello_payload.end(), forged.proof.begin());
  BOOST_TEST(!ha_ping::ack_proved(payload, forged, "secret", s, c));
}

BOOST_AUTO_TEST_SUITE_END()
