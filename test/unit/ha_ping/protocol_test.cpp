// ha-ping's control messages (tools/ha-ping/protocol.hpp): what encodes decodes to the same
// value, and the decoders hold the protocol's bounds whatever a client sends.
#include <boost/test/unit_test.hpp>

#include "nccl_ha/net/wire.hpp"
#include "protocol.hpp"

namespace {

ha_ping::Hello valid_hello() {
  ha_ping::Hello h;
  h.rails = {"rxe0:1"};
  h.sizes = {8, 1ull << 20};
  h.iters = 200;
  h.bw_iters = 64;
  h.window = 8;
  h.timeout_ms = 30000;
  h.nonce[0] = 1;
  h.proof[31] = 2;
  return h;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ha_ping_protocol)

BOOST_AUTO_TEST_CASE(challenge_round_trip_and_version) {
  ha_ping::Challenge c;
  c.nonce[5] = 9;
  const auto bytes = ha_ping::encode(c);
  BOOST_TEST(bytes.size() == 2u + 32u);
  auto d = ha_ping::decode_challenge(bytes);
  BOOST_TEST_REQUIRE(d.ok());
  BOOST_TEST((d->nonce == c.nonce));
  c.version = 1;
  auto old = ha_ping::decode_challenge(ha_ping::encode(c));
  BOOST_TEST_REQUIRE(!old.ok());
  BOOST_TEST(old.error().message.find("version 1") != std::string::npos);
  BOOST_TEST(!ha_ping::decode_challenge(std::span(bytes).first(33)).ok());
}

BOOST_AUTO_TEST_CASE(hello_round_trip) {
  const auto h = valid_hello();
  const auto bytes = ha_ping::encode(h);
  auto d = ha_ping::decode_hello(bytes);
  BOOST_TEST_REQUIRE(d.ok());
  BOOST_TEST(d->rails == h.rails);
  BOOST_TEST(d->sizes == h.sizes);
  BOOST_TEST(d->timeout_ms == h.timeout_ms);
  BOOST_TEST((d->nonce == h.nonce));
  BOOST_TEST((d->proof == h.proof));
  BOOST_TEST(ha_ping::before_proof(bytes).size() == bytes.size() - 32);
  BOOST_TEST(ha_ping::before_proof(std::span(bytes).first(10)).empty());
  BOOST_TEST(!ha_ping::decode_hello(std::span(bytes).first(bytes.size() - 1)).ok());  // the proof cut short
}

BOOST_AUTO_TEST_CASE(hello_bounds) {
  auto check_bad = [](auto change, const char* what) {
    auto h = valid_hello();
    change(h);
    BOOST_TEST(!ha_ping::decode_hello(ha_ping::encode(h)).ok(), what);
  };
  check_bad([](ha_ping::Hello& h) { h.sizes = {(1ull << 30) + 1}; }, "a size above 1 GiB");
  check_bad([](ha_ping::Hello& h) { h.sizes = {0}; }, "a size of 0");
  check_bad([](ha_ping::Hello& h) { h.sizes.clear(); }, "no size");
  check_bad([](ha_ping::Hello& h) { h.iters = ha_ping::kMaxIters + 1; }, "iters above the option's maximum");
  check_bad([](ha_ping::Hello& h) { h.bw_iters = 0; }, "no bandwidth writes");
  check_bad([](ha_ping::Hello& h) { h.window = 129; }, "a window above 128");
  check_bad([](ha_ping::Hello& h) { h.timeout_ms = 0; }, "timeout 0");
  check_bad([](ha_ping::Hello& h) { h.duration_ms = ha_ping::kMaxDurationMs + 1; }, "a duration above an hour");
  check_bad([](ha_ping::Hello& h) { h.sl = 16; }, "SL 16");
  check_bad([](ha_ping::Hello& h) { h.rails.assign(65, "r"); }, "65 rails");
  // A huge timeout decodes: the server caps it (server_limits.hpp), it does not refuse it.
  auto h = valid_hello();
  h.timeout_ms = 0xffffffffu;
  BOOST_TEST(ha_ping::decode_hello(ha_ping::encode(h)).ok());
  h.sizes = {1ull << 30};
  BOOST_TEST(ha_ping::decode_hello(ha_ping::encode(h)).ok());
}

BOOST_AUTO_TEST_CASE(hello_ack_round_trip) {
  ha_ping::HelloAck a;
  a.rails = {"rxe0:1", "rxe1:1"};
  a.timeout_ms = 5000;
  a.proof[0] = 0xaa;
  auto d = ha_ping::decode_hello_ack(ha_ping::encode(a));
  BOOST_TEST_REQUIRE(d.ok());
  BOOST_TEST(d->rails == a.rails);
  BOOST_TEST(d->timeout_ms == 5000u);
  BOOST_TEST((d->proof == a.proof));
  a.timeout_ms = 0;
  BOOST_TEST(!ha_ping::decode_hello_ack(ha_ping::encode(a)).ok());
}

BOOST_AUTO_TEST_SUITE_END()
