// The handshake's connection request and reply (conn_msg.hpp): the byte layout, round trips,
// every truncation, and every value a hostile or broken peer could send; and the connection
// handle's validation (handle.hpp).
#include <arpa/inet.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "conn_msg.hpp"
#include "handle.hpp"
#include "test_expected.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {

net::Endpoint endpoint(std::uint32_t qpn, std::uint8_t port) {
  net::Endpoint ep;
  ep.qpn = qpn;
  ep.psn = 0x123456;
  for (int i = 0; i < 16; ++i) ep.gid.raw[i] = static_cast<std::uint8_t>(0xf0 + i);
  ep.lid = 0;
  ep.port = port;
  ep.gid_index = 1;
  ep.link_layer = IBV_LINK_LAYER_ETHERNET;
  ep.mtu = IBV_MTU_1024;
  return ep;
}

ConnRequest request(bool standby) {
  ConnRequest r;
  r.primary = endpoint(0x11, 1);
  if (standby) r.standby = endpoint(0x22, 1);
  r.fifo = {0x7f0000001000ull, {0xaaaa, standby ? 0xbbbbu : 0u}};
  r.ctrl = {0x7f0000002000ull, {0xcccc, standby ? 0xddddu : 0u}};
  r.qos = {96, 5};
  return r;
}

ConnReply reply(bool standby) {
  ConnReply r;
  r.primary = endpoint(0x33, 1);
  if (standby) r.standby = endpoint(0x44, 1);
  r.ctrl = {0x7f0000003000ull, {0xeeee, standby ? 0xffffu : 0u}};
  return r;
}

void put_u32(std::vector<std::uint8_t>& b, std::size_t off, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<std::uint8_t>& b, std::size_t off, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Offsets of the layout documented in conn_msg.hpp.
constexpr std::size_t kFlagsOff = 32, kStandbyOff = 36, kFifoOff = 68, kReqCtrlOff = 84, kTcOff = 100, kSlOff = 101;
constexpr std::size_t kReplyCtrlOff = 68;

std::string err(const Expected<ConnRequest>& e) { return test::err_msg(e); }
std::string err(const Expected<ConnReply>& e) { return test::err_msg(e); }

}  // namespace

BOOST_AUTO_TEST_SUITE(conn_msg)

BOOST_AUTO_TEST_CASE(sizes_and_layout_are_the_wire_format) {
  BOOST_TEST(kRequestSize == 102u);
  BOOST_TEST(kReplySize == 84u);
  const auto b = encode_request(request(true));
  BOOST_REQUIRE(b.size() == kRequestSize);
  BOOST_TEST(b[0] == 0x11);  // primary QPN, little-endian
  BOOST_TEST(b[kFlagsOff] == kOfferStandby);
  BOOST_TEST(b[kStandbyOff] == 0x22);
  BOOST_TEST(b[kFifoOff + 8] == 0xaa);
  BOOST_TEST(b[kReqCtrlOff + 8] == 0xcc);
  BOOST_TEST(b[kTcOff] == 96);
  BOOST_TEST(b[kSlOff] == 5);
  const auto r = encode_reply(reply(false));
  BOOST_REQUIRE(r.size() == kReplySize);
  BOOST_TEST(r[kFlagsOff] == 0);
  for (std::size_t i = kStandbyOff; i < kStandbyOff + net::kEndpointSize; ++i) BOOST_TEST(r[i] == 0);
  BOOST_TEST(r[kReplyCtrlOff + 8] == 0xee);
}

BOOST_AUTO_TEST_CASE(round_trips) {
  for (bool standby : {true, false}) {
    BOOST_TEST_CONTEXT("standby " << standby) {
      const auto rq = request(standby);
      const auto b = encode_request(rq);
      auto d = decode_request(b);
      BOOST_REQUIRE_MESSAGE(d.ok(), err(d));
      BOOST_TEST((*d == rq));
      BOOST_TEST((encode_request(*d) == b));
      const auto rp = reply(standby);
      const auto rb = encode_reply(rp);
      auto e = decode_reply(rb);
      BOOST_REQUIRE_MESSAGE(e.ok(), err(e));
      BOOST_TEST((*e == rp));
      BOOST_TEST((encode_reply(*e) == rb));
    }
  }
  // Every traffic class and service level the QP can carry.
  for (int tc : {0, 1, 255})
    for (int sl = 0; sl <= 15; ++sl) {
      auto rq = request(true);
      rq.qos = {static_cast<std::uint8_t>(tc), static_cast<std::uint8_t>(sl)};
      auto d = decode_request(encode_request(rq));
      BOOST_TEST((d.ok() && d->qos == rq.qos), "tc " << tc << " sl " << sl << ": " << err(d));
    }
}

BOOST_AUTO_TEST_CASE(every_truncation_and_extension_is_refused) {
  const auto b = encode_request(request(true));
  for (std::size_t n = 0; n < b.size(); ++n) {
    auto d = decode_request(std::span<const std::uint8_t>(b).first(n));
    BOOST_TEST((!d.ok() && d.error().code == Errc::truncated), n << " bytes: " << err(d));
  }
  auto longer = b;
  longer.push_back(0);
  auto d = decode_request(longer);
  BOOST_TEST((!d.ok() && d.error().code == Errc::bad_length), err(d));
  BOOST_TEST(err(d).find("102") != std::string::npos, err(d));

  const auto r = encode_reply(reply(true));
  for (std::size_t n = 0; n < r.size(); ++n) {
    auto e = decode_reply(std::span<const std::uint8_t>(r).first(n));
    BOOST_TEST((!e.ok() && e.error().code == Errc::truncated), n << " bytes: " << err(e));
  }
  auto rlonger = r;
  rlonger.push_back(0);
  BOOST_TEST(!decode_reply(rlonger).ok());
  BOOST_TEST(!decode_reply(b).ok());  // a request is no reply
  BOOST_TEST(!decode_request(r).ok());
}

BOOST_AUTO_TEST_CASE(service_levels_above_15_are_refused) {
  for (int sl = 16; sl <= 255; ++sl) {
    auto b = encode_request(request(true));
    b[kSlOff] = static_cast<std::uint8_t>(sl);
    auto d = decode_request(b);
    BOOST_TEST(!d.ok(), "sl " << sl);
    if (sl == 16) BOOST_TEST(err(d).find("service level 16") != std::string::npos, err(d));
  }
}

BOOST_AUTO_TEST_CASE(bad_fields_are_refused_by_name) {
  struct Case {
    const char* name;
    void (*apply)(std::vector<std::uint8_t>&);
    const char* says;
  };
  const Case cases[] = {
      {"primary QPN 0", [](auto& b) { put_u32(b, 0, 0); }, "primary endpoint"},
      {"primary QPN beyond 24 bits", [](auto& b) { put_u32(b, 0, 0x1000000); }, "primary endpoint"},
      {"primary PSN beyond 24 bits", [](auto& b) { put_u32(b, 4, 0x1000000); }, "primary endpoint"},
      {"primary port 0", [](auto& b) { b[26] = 0; }, "primary endpoint"},
      {"primary link layer 3", [](auto& b) { b[28] = 3; }, "primary endpoint"},
      {"primary MTU code 0", [](auto& b) { b[29] = 0; }, "primary endpoint"},
      {"primary MTU code 6", [](auto& b) { b[29] = 6; }, "primary endpoint"},
      {"primary reserved bytes", [](auto& b) { b[31] = 1; }, "primary endpoint"},
      {"unknown flag bits", [](auto& b) { put_u32(b, kFlagsOff, 3); }, "unknown flags 0x00000002"},
      {"high flag bit", [](auto& b) { put_u32(b, kFlagsOff, 0x80000001u); }, "unknown flags"},
      {"standby offered, endpoint zero", [](auto& b) { std::memset(&b[kStandbyOff], 0, 32); }, "standby endpoint"},
      {"standby offered, port 0", [](auto& b) { b[kStandbyOff + 26] = 0; }, "standby endpoint"},
      {"standby bytes without the flag", [](auto& b) { put_u32(b, kFlagsOff, 0); }, "without the standby flag"},
      {"FIFO address 0", [](auto& b) { put_u64(b, kFifoOff, 0); }, "FIFO address 0"},
      {"control block address 0", [](auto& b) { put_u64(b, kReqCtrlOff, 0); }, "control block address 0"},
  };
  for (const auto& c : cases) {
    auto b = encode_request(request(true));
    c.apply(b);
    auto d = decode_request(b);
    BOOST_TEST(!d.ok(), c.name);
    if (!d.ok()) {
      BOOST_TEST(err(d).find(c.says) != std::string::npos, c.name << ": " << err(d));
      BOOST_TEST(err(d).find("malformed connection request") != std::string::npos, c.name << ": " << err(d));
    }
  }
  auto r = encode_reply(reply(true));
  put_u64(r, kReplyCtrlOff, 0);
  BOOST_TEST(err(decode_reply(r)).find("malformed connection reply: control block address 0") != std::string::npos);
  r = encode_reply(reply(false));
  r[kStandbyOff + 5] = 1;
  BOOST_TEST(err(decode_reply(r)).find("without the standby flag") != std::string::npos);
}

// Every single-byte change of a valid request either still decodes (and then re-encodes to
// exactly those bytes) or is refused: the encoding is canonical, nothing is half understood.
BOOST_AUTO_TEST_CASE(single_byte_changes_decode_canonically_or_not_at_all) {
  const auto good = encode_request(request(true));
  std::size_t refused = 0;
  for (std::size_t i = 0; i < good.size(); ++i)
    for (int v = 0; v < 256; v += 17) {
      auto b = good;
      b[i] = static_cast<std::uint8_t>(v);
      auto d = decode_request(b);
      if (d.ok())
        BOOST_TEST((encode_request(*d) == b), "byte " << i << " = " << v);
      else
        ++refused;
    }
  BOOST_TEST(refused > 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(handle_checks)

namespace {
Handle good_v4() {
  Handle h{};
  h.magic = kHandleMagic;
  h.version = kHandleVersion;
  h.length = sizeof h;
  h.family = AF_INET;
  h.port = 4242;
  const unsigned char v4[4] = {10, 30, 0, 1};
  std::memcpy(h.addr, v4, sizeof v4);
  h.token = 0x1234;
  return h;
}
Handle with_v6(const char* text, std::uint32_t scope) {
  Handle h = good_v4();
  h.family = AF_INET6;
  std::memset(h.addr, 0, sizeof h.addr);
  BOOST_REQUIRE(inet_pton(AF_INET6, text, h.addr) == 1);
  h.scope_id = scope;
  return h;
}
Handle with_v4(const char* text) {
  Handle h = good_v4();
  BOOST_REQUIRE(inet_pton(AF_INET, text, h.addr) == 1);
  return h;
}
}  // namespace

BOOST_AUTO_TEST_CASE(addresses_a_connector_must_not_dial_are_refused) {
  BOOST_TEST(validate_handle(good_v4()).ok());
  BOOST_TEST(validate_handle(with_v6("fd00:aa::1", 0)).ok());
  BOOST_TEST(validate_handle(with_v6("fe80::1", 2)).ok());
  for (const char* v4 : {"0.0.0.0", "224.0.0.1", "239.1.2.3", "255.255.255.255"}) {
    auto s = validate_handle(with_v4(v4));
    BOOST_TEST(!s.ok(), v4);
    if (!s.ok()) BOOST_TEST(s.error().message.find(v4) != std::string::npos, s.error().message);
  }
  for (const char* v6 : {"::", "ff02::1", "ff05::2"}) BOOST_TEST(!validate_handle(with_v6(v6, 0)).ok(), v6);
  auto s = validate_handle(with_v6("fe80::1", 0));
  BOOST_TEST(!s.ok());
  if (!s.ok()) BOOST_TEST(s.error().message.find("without a scope id") != std::string::npos, s.error().message);
}

BOOST_AUTO_TEST_CASE(decode_handle_takes_any_alignment_and_refuses_short_buffers) {
  const Handle h = good_v4();
  std::vector<std::uint8_t> buf(sizeof h + 1);
  std::memcpy(buf.data() + 1, &h, sizeof h);  // misaligned, as a byte buffer may be
  auto d = decode_handle(std::span<const std::uint8_t>(buf).subspan(1));
  BOOST_REQUIRE_MESSAGE(d.ok(), test::err_msg(d));
  BOOST_TEST(d->token == h.token);
  BOOST_TEST(handle_address(*d) == "10.30.0.1:4242");
  auto t = decode_handle(std::span<const std::uint8_t>(buf).subspan(1, sizeof h - 1));
  BOOST_TEST((!t.ok() && t.error().code == Errc::truncated));
  std::vector<std::uint8_t> zero(sizeof h, 0);
  BOOST_TEST((decode_handle(zero).error().code == Errc::bad_magic));
}

BOOST_AUTO_TEST_SUITE_END()
