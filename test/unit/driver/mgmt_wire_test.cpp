// ha-net-driver's management wire format (tools/ha-net-driver/mgmt_wire.hpp): framing, and the
// parsers of what the peer sends (the hello's fields, churn, stream limits, clock, counts, the
// authentication messages): what the driver itself sends parses back; anything else is refused.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "mgmt_wire.hpp"

namespace {

std::span<const std::uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(driver_mgmt_wire)

BOOST_AUTO_TEST_CASE(framing_round_trip_and_limits) {
  const std::string a = hnd::wire::encode(hnd::MsgType::barrier, "close");
  BOOST_TEST(a == std::string("\0\0\0\3\0\0\0\5close", 13));  // big-endian type and length
  const std::string stream = a + hnd::wire::encode(hnd::MsgType::hello, "") + std::string("\0\0\0\4\0\0", 6);
  auto s = hnd::wire::split(bytes(stream));
  BOOST_TEST(s.messages.size() == 2u);
  BOOST_TEST(s.messages[0].type == 3u);
  BOOST_TEST(s.messages[0].payload == "close");
  BOOST_TEST(s.messages[1].payload.empty());
  BOOST_TEST(s.consumed == 21u);  // the half header is left for later
  BOOST_TEST(s.error.empty());
  const std::string huge("\0\0\0\1\0\x10\0\1", 8);  // 1 MiB + 1
  s = hnd::wire::split(bytes(huge));
  BOOST_TEST(s.messages.empty());
  BOOST_TEST(s.error == "oversized message (1048577 bytes)");
  BOOST_TEST(hnd::wire::fits({1, hnd::wire::kMaxPayload}));
}

BOOST_AUTO_TEST_CASE(fields_are_whole_lines) {
  const std::string hello = "rank=1\napi=10\nname=fake\ncommid=42\nparams=sizes=8 messages=10\n";
  BOOST_TEST(hnd::wire::field(hello, "rank") == "1");
  BOOST_TEST(hnd::wire::field(hello, "params") == "sizes=8 messages=10");
  BOOST_TEST(hnd::wire::field(hello, "sizes") == "");  // inside another line's value: not a field
  BOOST_TEST(hnd::wire::field(hello, "ank") == "");
  BOOST_TEST(hnd::wire::field("a=1\na=2", "a") == "1");
  BOOST_TEST(hnd::wire::field("a=", "a") == "");
  BOOST_TEST(hnd::wire::field("", "a") == "");
}

BOOST_AUTO_TEST_CASE(churn_limit_clock_count) {
  auto c = hnd::wire::parse_churn("h 12 3\n" + std::string(128, 'x'));
  BOOST_TEST_REQUIRE(c.has_value());
  BOOST_TEST(c->kind == 'h');
  BOOST_TEST(c->pair == 12u);
  BOOST_TEST(c->attempt == 3u);
  BOOST_TEST(c->body.size() == 128u);
  c = hnd::wire::parse_churn("x 0 0\nconnect failed");
  BOOST_TEST_REQUIRE(c.has_value());
  BOOST_TEST(c->body == "connect failed");
  for (const char* bad : {"h 1 2", "q 1 2\n", "h  1 2\n", "h -1 2\n", "h 1 +2\n", "h 1 2 \n", "h 1\n", "h 1 4294967296\n",
                          "h 18446744073709551616 1\n", ""})
    BOOST_TEST(!hnd::wire::parse_churn(bad).has_value(), bad);

  auto l = hnd::wire::parse_limit("1000");
  BOOST_TEST((l && l->messages == 1000u && !l->final));
  l = hnd::wire::parse_limit("7 final");
  BOOST_TEST((l && l->messages == 7u && l->final));
  for (const char* bad : {"", " final", "7 finale", "x", "-1", "7final", "18446744073709551616"})
    BOOST_TEST(!hnd::wire::parse_limit(bad).has_value(), bad);

  BOOST_TEST(hnd::wire::parse_clock_reply("1795808783489123").value() == 1795808783489123);
  BOOST_TEST(!hnd::wire::parse_clock_reply("12abc").has_value());
  BOOST_TEST(!hnd::wire::parse_clock_reply("9223372036854775808").has_value());
  auto r = hnd::wire::parse_clock_result("result -1.250 0.375");
  BOOST_TEST((r && r->offset_ms == -1.25 && r->rtt_ms == 0.375));
  for (const char* bad : {"result 1", "result nan 1", "result 1 inf", "result 1 -2", "result 1 2 3", "probe", "result  1 2"})
    BOOST_TEST(!hnd::wire::parse_clock_result(bad).has_value(), bad);

  BOOST_TEST(hnd::wire::parse_count("8").value() == 8u);
  for (const char* bad : {"", "8x", " 8", "-8", "99999999999999999999"})  // std::stoull threw on these
    BOOST_TEST(!hnd::wire::parse_count(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(authentication_messages) {
  hnd::wire::Nonce n{};
  n[0] = 1;
  n[31] = 2;
  const std::string ch = hnd::wire::encode_challenge(n);
  BOOST_TEST(ch.size() == hnd::wire::kChallengeSize);
  BOOST_TEST(ch.substr(0, 8) == "HNDAUTH1");
  BOOST_TEST((hnd::wire::decode_challenge(ch).value() == n));
  BOOST_TEST(!hnd::wire::decode_challenge(ch.substr(1)).has_value());
  BOOST_TEST(!hnd::wire::decode_challenge("HNDAUTH2" + ch.substr(8)).has_value());
  hnd::wire::Proof p{};
  p[5] = 9;
  const std::string pr = hnd::wire::encode_proof(n, p);
  auto d = hnd::wire::decode_proof(pr);
  BOOST_TEST_REQUIRE(d.has_value());
  BOOST_TEST((d->nonce == n && d->proof == p));
  BOOST_TEST(!hnd::wire::decode_proof(pr + "x").has_value());
  BOOST_TEST((hnd::wire::decode_ok(hnd::wire::encode_ok(p)).value() == p));
  BOOST_TEST(!hnd::wire::decode_ok("").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
