// The handshake's messages (conn_msg.hpp, wire format v4): the byte layout, round trips, every
// truncation, every value a hostile or broken peer could send, canonical encodings, and the
// connector's check of a standby offer; and the connection handle's validation (handle.hpp).
#include <arpa/inet.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/conn_msg.hpp"
#include "setup/handle.hpp"
#include "test_expected.hpp"
#include "topo_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using nccl_ha::test::cand;
using nccl_ha::test::v4;
using nccl_ha::test::v6;

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

constexpr std::uint8_t kUpPrimary = kCandUp | kCandPrimary;

// The connector: 0 primary (10.20.0.0/24, islands /15), 1 preferred (10.21.0.0/24), 2 IPv6,
// 3 down and unknown.
std::vector<Candidate> connector_ports() {
  return {cand({.dev = 0, .rail = v4("10.20.0.0", 24), .island_len = 15, .nic = "0000:03:00", .flags = kUpPrimary}),
          cand({.dev = 1, .rail = v4("10.21.0.0", 24), .island_len = 15, .flags = kCandUp | kCandPreferred, .load = 3}),
          cand({.dev = 2, .rail = v6("fd00:1::", 64), .numa = 1, .load = 65535}),
          cand({.dev = 3, .numa = -1, .pcie = "", .flags = 0})};
}

// The listener: 2 primary (10.20.0.0/24), 0 on 10.21.0.0/24, 5 InfiniBand, 7 down.
std::vector<Candidate> listener_ports() {
  return {cand({.dev = 2, .rail = v4("10.20.0.0", 24), .island_len = 15, .flags = kUpPrimary}),
          cand({.dev = 0, .rail = v4("10.21.0.0", 24), .island_len = 15}),
          cand({.dev = 5, .rail = v6("fe80::", 64), .link_layer = IBV_LINK_LAYER_INFINIBAND}),
          cand({.dev = 7, .rail = v4("10.22.0.0", 24), .island_len = 15, .flags = 0})};
}

ConnRequest request(bool offer) {
  ConnRequest r;
  r.primary = endpoint(0x11, 1);
  r.offer_standby = offer;
  r.fifo = {0x7f0000001000ull, {0xaaaa, 0}};
  r.ctrl = {0x7f0000002000ull, {0xcccc, 0}};
  r.qos = {96, 5};
  r.candidates = connector_ports();
  r.rescue = {0x1234, 0x0102030405060708ull};
  r.member = 3;
  return r;
}

ConnReply reply(bool standby) {
  ConnReply r;
  r.primary = endpoint(0x33, 1);
  if (standby) r.standby = StandbyOffer{{1, 0}, endpoint(0x44, 1), 0xffff};
  r.ctrl = {0x7f0000003000ull, {0xeeee, 0}};
  r.candidates = listener_ports();
  if (standby) r.rescue = {0xbeef, 0x1122334455667788ull};  // none without: HA off there
  return r;
}

ConnReady ready(bool standby) {
  ConnReady r;
  if (standby) {
    r.standby = endpoint(0x55, 1);
    r.fifo_rkey = 0xbbbb;
    r.ctrl_rkey = 0xdddd;
  }
  return r;
}

void put_u32(std::vector<std::uint8_t>& b, std::size_t off, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<std::uint8_t>& b, std::size_t off, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_u32(const std::vector<std::uint8_t>& b, std::size_t off) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(b[off + i]) << (8 * i);
  return v;
}

// Offsets of the layouts documented in conn_msg.hpp.
constexpr std::size_t kFlagsOff = 72, kFifoOff = 76, kReqCtrlOff = 92, kTcOff = 108, kSlOff = 109, kReqCountOff = 110;
constexpr std::size_t kReplyCtrlOff = 76, kOfferOff = 92, kOfferRkeyOff = 96, kOfferEpOff = 100, kReplyCountOff = 172;
std::size_t req_cand(std::size_t i) { return kRequestHeadSize + i * kCandidateSize; }
std::size_t rep_cand(std::size_t i) { return kReplyHeadSize + i * kCandidateSize; }
// Within a candidate.
constexpr std::size_t kDev = 0, kLink = 1, kCFlags = 2, kKnown = 3, kLoad = 4, kRailLen = 6, kIslandLen = 7, kRail = 8,
                      kIsland = 24, kNic = 40, kNuma = 48;

template <class T>
std::string err(const Expected<T>& e) {
  return test::err_msg(e);
}

// One way to spoil a valid message, and what the refusal must say.
struct Spoil {
  const char* name;
  std::function<void(std::vector<std::uint8_t>&)> apply;
  const char* says;
};

template <class Decode>
void check_refusals(const std::vector<std::uint8_t>& good, Decode decode, const char* what, const std::vector<Spoil>& cases) {
  BOOST_REQUIRE(decode(good).ok());
  for (const auto& c : cases) {
    auto b = good;
    c.apply(b);
    auto d = decode(b);
    BOOST_TEST(!d.ok(), c.name);
    if (!d.ok()) {
      BOOST_TEST(err(d).find(c.says) != std::string::npos, c.name << ": " << err(d));
      BOOST_TEST(err(d).find(std::string("malformed ") + what) != std::string::npos, c.name << ": " << err(d));
    }
  }
}

// Every truncation is Errc::truncated, one byte more Errc::bad_length.
template <class Decode>
void check_sizes(const std::vector<std::uint8_t>& good, Decode decode) {
  for (std::size_t n = 0; n < good.size(); ++n) {
    auto d = decode(std::span<const std::uint8_t>(good).first(n));
    BOOST_TEST((!d.ok() && d.error().code == Errc::truncated), n << " bytes: " << err(d));
  }
  auto longer = good;
  longer.push_back(0);
  auto d = decode(longer);
  BOOST_TEST((!d.ok() && d.error().code == Errc::bad_length), err(d));
  BOOST_TEST(err(d).find(std::to_string(good.size())) != std::string::npos, err(d));
}

// Encodes, decodes to the same value, re-encodes to the same bytes; returns the decoded value.
template <class T, class Encode, class Decode>
T round_trip(const T& value, Encode encode, Decode decode) {
  const auto bytes = encode(value);
  auto d = decode(bytes);
  BOOST_REQUIRE_MESSAGE(d.ok(), err(d));
  BOOST_TEST((*d == value));
  BOOST_TEST((encode(*d) == bytes));
  return *d;
}

// Every single-byte change of a valid message either still decodes (and then re-encodes to
// exactly those bytes) or is refused: the encoding is canonical, nothing is half understood.
template <class Decode, class Encode>
void check_canonical(const std::vector<std::uint8_t>& good, Decode decode, Encode encode) {
  std::size_t refused = 0;
  for (std::size_t i = 0; i < good.size(); ++i)
    for (int v = 0; v < 256; v += 17) {
      auto b = good;
      b[i] = static_cast<std::uint8_t>(v);
      auto d = decode(b);
      if (d.ok())
        BOOST_TEST((encode(*d) == b), "byte " << i << " = " << v);
      else
        ++refused;
    }
  BOOST_TEST(refused > 0u);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conn_msg)

BOOST_AUTO_TEST_CASE(sizes_and_layout_are_the_wire_format) {
  BOOST_TEST(kCandidateSize == 52u);
  BOOST_TEST(kRequestHeadSize == 112u);
  BOOST_TEST(kReplyHeadSize == 176u);
  BOOST_TEST(kReadySize == 84u);
  const auto b = encode_request(request(true));
  BOOST_TEST(kRescueSize == 12u);
  BOOST_REQUIRE(b.size() == kRequestHeadSize + 4 * kCandidateSize + kRescueSize);
  const std::size_t rescue = kRequestHeadSize + 4 * kCandidateSize;  // the rescue point, last
  BOOST_TEST(b[rescue] == 0x34);
  BOOST_TEST(b[rescue + 1] == 0x12);
  BOOST_TEST(get_u32(b, rescue + 4) == 0x05060708u);
  BOOST_TEST(b[0] == 0x11);  // primary QPN, little-endian
  BOOST_TEST(b[kFlagsOff] == kOfferStandby);
  BOOST_TEST(get_u32(b, kFifoOff + 8) == 0xaaaau);
  BOOST_TEST(get_u32(b, kFifoOff + 12) == 0u);
  BOOST_TEST(get_u32(b, kReqCtrlOff + 8) == 0xccccu);
  BOOST_TEST(b[kTcOff] == 96);
  BOOST_TEST(b[kSlOff] == 5);
  BOOST_TEST(b[kReqCountOff] == 4);
  BOOST_TEST(b[kReqCountOff + 1] == 3);  // the member
  // Candidate 1: device 1, Ethernet, up + preferred, rail and island known, load 3, 10.21.0.0/24 in 10.20.0.0/15.
  const std::size_t c = req_cand(1);
  BOOST_TEST(b[c + kDev] == 1);
  BOOST_TEST(b[c + kLink] == IBV_LINK_LAYER_ETHERNET);
  BOOST_TEST(b[c + kCFlags] == (kCandUp | kCandPreferred));
  BOOST_TEST(b[c + kKnown] == 3);
  BOOST_TEST(b[c + kLoad] == 3);
  BOOST_TEST(b[c + kRailLen] == 120);
  BOOST_TEST(b[c + kIslandLen] == 111);
  BOOST_TEST(b[c + kRail + 10] == 0xff);
  BOOST_TEST(b[c + kRail + 12] == 10);
  BOOST_TEST(b[c + kRail + 13] == 21);
  BOOST_TEST(b[c + kIsland + 13] == 20);
  BOOST_TEST(get_u32(b, c + kNic) == topo_hash("nic1"));
  BOOST_TEST(get_u32(b, req_cand(3) + kNuma) == 0xffffffffu);  // -1
  BOOST_TEST(b[req_cand(3) + kKnown] == 0);

  const auto r = encode_reply(reply(true));
  BOOST_REQUIRE(r.size() == kReplyHeadSize + 4 * kCandidateSize + kRescueSize);
  BOOST_TEST(b[kFlagsOff] == kOfferStandby);
  BOOST_TEST(get_u32(r, kReplyCtrlOff + 8) == 0xeeeeu);
  BOOST_TEST(r[kOfferOff] == 1);      // pair.a
  BOOST_TEST(r[kOfferOff + 1] == 0);  // pair.b
  BOOST_TEST(get_u32(r, kOfferRkeyOff) == 0xffffu);
  BOOST_TEST(r[kOfferEpOff] == 0x44);
  BOOST_TEST(r[kReplyCountOff] == 4);
  BOOST_TEST(r[rep_cand(0) + kDev] == 2);
  const auto single = encode_reply(reply(false));
  BOOST_TEST(single[kFlagsOff] == 0);
  for (std::size_t i = kOfferOff; i < kReplyCountOff; ++i) BOOST_TEST(single[i] == 0, "byte " << i);
  for (std::size_t i = single.size() - kRescueSize; i < single.size(); ++i) BOOST_TEST(single[i] == 0, "byte " << i);

  const auto y = encode_ready(ready(true));
  BOOST_REQUIRE(y.size() == kReadySize);
  BOOST_TEST(y[0] == kOfferStandby);
  BOOST_TEST(y[4] == 0x55);
  BOOST_TEST(get_u32(y, 76) == 0xbbbbu);
  BOOST_TEST(get_u32(y, 80) == 0xddddu);
  const auto none = encode_ready(ready(false));
  BOOST_TEST(none == std::vector<std::uint8_t>(kReadySize, 0), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(round_trips) {
  for (bool standby : {true, false}) {
    BOOST_TEST_CONTEXT("standby " << standby) {
      BOOST_TEST((round_trip(request(standby), encode_request, decode_request).candidates == connector_ports()));
      round_trip(reply(standby), encode_reply, decode_reply);
      round_trip(ready(standby), encode_ready, decode_ready);
    }
  }
  // A connection that starts on its standby pair (issue #19): the flag travels with the standby.
  auto rs = reply(true);
  rs.start_on_standby = true;
  BOOST_TEST(round_trip(rs, encode_reply, decode_reply).start_on_standby);
  auto ys = ready(true);
  ys.start_on_standby = true;
  BOOST_TEST(round_trip(ys, encode_ready, decode_ready).start_on_standby);
  BOOST_TEST(get_u32(encode_reply(rs), kFlagsOff) == (kOfferStandby | kStartOnStandby));
  BOOST_TEST(get_u32(encode_ready(ys), 0) == (kOfferStandby | kStartOnStandby));
  // Every traffic class and service level the QP can carry.
  for (int tc : {0, 1, 255})
    for (int sl = 0; sl <= 15; ++sl) {
      auto rq = request(true);
      rq.qos = {static_cast<std::uint8_t>(tc), static_cast<std::uint8_t>(sl)};
      auto d = decode_request(encode_request(rq));
      BOOST_TEST((d.ok() && d->qos == rq.qos), "tc " << tc << " sl " << sl << ": " << err(d));
    }
  // The most candidates a side may list, the most devices, a single one.
  auto many = request(true);
  many.candidates.clear();
  for (int i = 0; i < static_cast<int>(kMaxCandidates); ++i)
    many.candidates.push_back(cand({.dev = 255 - i, .rail = v4("10.20.0.0", 24), .island_len = i % 20,
                                    .flags = static_cast<std::uint8_t>(i == 7 ? kUpPrimary : kCandUp)}));
  auto d = decode_request(encode_request(many));
  BOOST_TEST((d.ok() && *d == many), err(d));
  auto one = request(false);
  one.candidates.resize(1);
  d = decode_request(encode_request(one));
  BOOST_TEST((d.ok() && *d == one), err(d));
}

BOOST_AUTO_TEST_CASE(every_truncation_and_extension_is_refused) {
  check_sizes(encode_request(request(true)), [](auto b) { return decode_request(b); });
  check_sizes(encode_reply(reply(true)), [](auto b) { return decode_reply(b); });
  check_sizes(encode_reply(reply(false)), [](auto b) { return decode_reply(b); });
  check_sizes(encode_ready(ready(true)), [](auto b) { return decode_ready(b); });
  check_sizes(encode_ready(ready(false)), [](auto b) { return decode_ready(b); });
  // A count that disagrees with the size.
  auto b = encode_request(request(true));
  b[kReqCountOff] = 3;
  BOOST_TEST((decode_request(b).error().code == Errc::bad_length));
  b[kReqCountOff] = 5;
  BOOST_TEST((decode_request(b).error().code == Errc::truncated));
  // No message is another (v3's empty conn_ready included).
  const auto rq = encode_request(request(true)), rp = encode_reply(reply(true)), ry = encode_ready(ready(true));
  BOOST_TEST(!decode_reply(rq).ok());
  BOOST_TEST(!decode_ready(rq).ok());
  BOOST_TEST(!decode_request(rp).ok());
  BOOST_TEST(!decode_ready(rp).ok());
  BOOST_TEST(!decode_request(ry).ok());
  BOOST_TEST(!decode_reply(ry).ok());
  BOOST_TEST(!decode_ready(std::span<const std::uint8_t>()).ok());
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

BOOST_AUTO_TEST_CASE(bad_request_fields_are_refused_by_name) {
  const std::size_t c1 = req_cand(1), c3 = req_cand(3);
  check_refusals(encode_request(request(true)), [](auto b) { return decode_request(b); }, "connection request", {
      {"primary QPN 0", [](auto& b) { put_u32(b, 0, 0); }, "primary endpoint"},
      {"primary QPN beyond 24 bits", [](auto& b) { put_u32(b, 0, 0x1000000); }, "primary endpoint"},
      {"primary port 0", [](auto& b) { b[26] = 0; }, "primary endpoint"},
      {"primary link layer 3", [](auto& b) { b[28] = 3; }, "primary endpoint"},
      {"primary MTU code 6", [](auto& b) { b[29] = 6; }, "primary endpoint"},
      {"primary: two QPs, one QP number", [](auto& b) { b[31] = 1; }, "primary endpoint"},
      {"unknown flag bits", [](auto& b) { put_u32(b, kFlagsOff, 3); }, "unknown flags 0x00000002"},
      {"high flag bit", [](auto& b) { put_u32(b, kFlagsOff, 0x80000001u); }, "unknown flags"},
      {"FIFO address 0", [](auto& b) { put_u64(b, kFifoOff, 0); }, "FIFO address 0"},
      {"FIFO rkey 0", [](auto& b) { put_u32(b, kFifoOff + 8, 0); }, "FIFO rkey 0"},
      {"FIFO rkey of slot 1", [](auto& b) { put_u32(b, kFifoOff + 12, 7); }, "FIFO rkey of slot 1 not 0"},
      {"control block address 0", [](auto& b) { put_u64(b, kReqCtrlOff, 0); }, "control block address 0"},
      {"control block rkey 0", [](auto& b) { put_u32(b, kReqCtrlOff + 8, 0); }, "control block rkey 0"},
      {"control block rkey of slot 1", [](auto& b) { put_u32(b, kReqCtrlOff + 12, 7); }, "control block rkey of slot 1"},
      {"member 8", [](auto& b) { b[kReqCountOff + 1] = 8; }, "member 8 (0..7)"},
      {"member 255", [](auto& b) { b[kReqCountOff + 1] = 255; }, "member 255 (0..7)"},
      {"candidate count 0", [](auto& b) { b[kReqCountOff] = 0; }, "candidate count 0 (1..32)"},
      {"candidate count 33", [](auto& b) { b[kReqCountOff] = 33; }, "candidate count 33"},
      {"link layer 0", [c1](auto& b) { b[c1 + kLink] = 0; }, "candidate 1: link layer 0 (1 or 2)"},
      {"link layer 3", [c1](auto& b) { b[c1 + kLink] = 3; }, "candidate 1: link layer 3"},
      {"unknown candidate flags", [c1](auto& b) { b[c1 + kCFlags] |= 8; }, "candidate 1: unknown flags 0x00000008"},
      {"unknown prefix bits", [c1](auto& b) { b[c1 + kKnown] |= 4; }, "candidate 1: unknown prefix bits"},
      {"rail longer than 128", [c1](auto& b) { b[c1 + kRailLen] = 129; }, "candidate 1: rail prefix length 129 (0..128)"},
      {"island longer than 128", [c1](auto& b) { b[c1 + kIslandLen] = 200; }, "island prefix length 200"},
      {"rail host bits", [c1](auto& b) { b[c1 + kRail + 15] = 1; }, "rail prefix 10.21.0.0/24 with host bits set"},
      {"island host bits", [c1](auto& b) { b[c1 + kIsland + 14] = 1; }, "island prefix 10.20.0.0/15 with host bits set"},
      {"unknown rail with a length", [c3](auto& b) { b[c3 + kRailLen] = 24; }, "candidate 3: unknown rail prefix with bytes set"},
      {"unknown rail with bytes", [c3](auto& b) { b[c3 + kRail + 3] = 1; }, "unknown rail prefix with bytes set"},
      {"unknown island with bytes", [c3](auto& b) { b[c3 + kIsland] = 0x80; }, "unknown island prefix with bytes set"},
      {"island without rail", [c3](auto& b) { b[c3 + kKnown] = 2; }, "island ::/0 does not contain the rail ?"},
      {"island elsewhere", [c1](auto& b) { b[c1 + kIsland + 13] = 22; },
       "island 10.22.0.0/15 does not contain the rail 10.21.0.0/24"},
      {"island narrower than the rail", [c1](auto& b) { b[c1 + kIslandLen] = 121; }, "does not contain the rail"},
      {"NUMA -2", [c1](auto& b) { put_u32(b, c1 + kNuma, 0xfffffffeu); }, "candidate 1: NUMA node -2 (-1..65535)"},
      {"NUMA 65536", [c1](auto& b) { put_u32(b, c1 + kNuma, 65536); }, "NUMA node 65536"},
      {"device twice", [](auto& b) { b[req_cand(2) + kDev] = 1; }, "candidate 2 (device 1) listed twice"},
      {"no primary", [](auto& b) { b[req_cand(0) + kCFlags] = kCandUp; }, "0 candidates flagged primary (exactly 1)"},
      {"two primaries", [](auto& b) { b[req_cand(2) + kCFlags] |= kCandPrimary; }, "2 candidates flagged primary"},
      {"primary and preferred", [](auto& b) { b[req_cand(0) + kCFlags] |= kCandPreferred; },
       "candidate 0 (device 0) both primary and preferred"},
      {"two preferred", [](auto& b) { b[req_cand(2) + kCFlags] |= kCandPreferred; }, "2 candidates flagged preferred (at most 1)"},
      {"primary of another link layer", [](auto& b) { b[req_cand(0) + kLink] = IBV_LINK_LAYER_INFINIBAND; },
       "candidate 0 (device 0) is the primary but of link layer 1, the primary endpoint's is 2"},
      {"rescue reserved bytes", [](auto& b) { b[b.size() - 10] = 1; }, "bytes 2..3 of the rescue point not 0"},
      {"rescue port without a token", [](auto& b) { put_u64(b, b.size() - 8, 0); }, "rescue port without a token"},
      {"rescue token without a port", [](auto& b) { put_u32(b, b.size() - kRescueSize, b[b.size() - 10]); },
       "rescue token without a port"},
  });
}

BOOST_AUTO_TEST_CASE(bad_reply_fields_are_refused_by_name) {
  const auto no_offer = encode_reply(reply(false));
  check_refusals(encode_reply(reply(true)), [](auto b) { return decode_reply(b); }, "connection reply", {
      {"primary endpoint", [](auto& b) { b[26] = 0; }, "primary endpoint"},
      {"unknown flags", [](auto& b) { put_u32(b, kFlagsOff, 5); }, "unknown flags 0x00000004"},
      {"start on a standby without one", [](auto& b) { put_u32(b, kFlagsOff, kStartOnStandby); },
       "start on a standby without one"},
      {"control block address 0", [](auto& b) { put_u64(b, kReplyCtrlOff, 0); }, "control block address 0"},
      {"control block rkey 0", [](auto& b) { put_u32(b, kReplyCtrlOff + 8, 0); }, "control block rkey 0"},
      {"control block rkey of slot 1", [](auto& b) { put_u32(b, kReplyCtrlOff + 12, 1); }, "rkey of slot 1 not 0"},
      {"offer without the flag", [](auto& b) { put_u32(b, kFlagsOff, 0); }, "standby offer bytes without the standby flag"},
      {"offer bytes 54..55", [](auto& b) { b[kOfferOff + 3] = 1; }, "bytes 54..55 of the standby offer not 0"},
      {"standby rkey 0", [](auto& b) { put_u32(b, kOfferRkeyOff, 0); }, "standby control block rkey 0"},
      {"standby endpoint", [](auto& b) { b[kOfferEpOff + 26] = 0; }, "standby endpoint"},
      {"standby endpoint zero", [](auto& b) { std::fill(b.begin() + kOfferEpOff, b.begin() + kReplyCountOff, 0); },
       "standby endpoint"},
      {"bytes 93..95", [](auto& b) { b[kReplyCountOff + 2] = 1; }, "bytes 93..95 not 0"},
      {"count 0", [](auto& b) { b[kReplyCountOff] = 0; }, "candidate count 0"},
      {"offer on an unlisted device", [](auto& b) { b[kOfferOff + 1] = 9; },
       "standby offer on device 9: not among the listener's candidates"},
      {"offer on a port that is down", [](auto& b) { b[kOfferOff + 1] = 7; }, "standby offer on device 7: the port is not up"},
      {"offer of another link layer", [](auto& b) { b[kOfferOff + 1] = 5; },
       "standby offer on device 5: link layer 1, the standby endpoint's is 2"},
      {"candidate rules", [](auto& b) { b[rep_cand(3) + kDev] = 5; }, "candidate 3 (device 5) listed twice"},
  });
  check_refusals(no_offer, [](auto b) { return decode_reply(b); }, "connection reply", {
      {"offer bytes without the flag", [](auto& b) { b[kOfferEpOff + 5] = 1; }, "standby offer bytes without the standby flag"},
      {"pair without the flag", [](auto& b) { b[kOfferOff] = 1; }, "without the standby flag"},
  });
}

BOOST_AUTO_TEST_CASE(bad_ready_fields_are_refused_by_name) {
  check_refusals(encode_ready(ready(true)), [](auto b) { return decode_ready(b); }, "connection ready", {
      {"unknown flags", [](auto& b) { put_u32(b, 0, 5); }, "unknown flags 0x00000004"},
      {"start on a standby without one", [](auto& b) { put_u32(b, 0, kStartOnStandby); }, "start on a standby without one"},
      {"standby endpoint", [](auto& b) { put_u32(b, 4, 0); }, "standby endpoint"},
      {"FIFO rkey 0", [](auto& b) { put_u32(b, 76, 0); }, "standby FIFO rkey 0"},
      {"control block rkey 0", [](auto& b) { put_u32(b, 80, 0); }, "standby control block rkey 0"},
      {"no flag", [](auto& b) { put_u32(b, 0, 0); }, "standby bytes without the standby flag"},
  });
  check_refusals(encode_ready(ready(false)), [](auto b) { return decode_ready(b); }, "connection ready", {
      {"rkey without a standby", [](auto& b) { b[43] = 1; }, "standby bytes without the standby flag"},
  });
}

BOOST_AUTO_TEST_CASE(single_byte_changes_decode_canonically_or_not_at_all) {
  check_canonical(encode_request(request(true)), [](auto b) { return decode_request(b); }, encode_request);
  check_canonical(encode_reply(reply(true)), [](auto b) { return decode_reply(b); }, encode_reply);
  check_canonical(encode_reply(reply(false)), [](auto b) { return decode_reply(b); }, encode_reply);
  check_canonical(encode_ready(ready(true)), [](auto b) { return decode_ready(b); }, encode_ready);
}

BOOST_AUTO_TEST_CASE(the_connector_checks_the_offer_against_its_request) {
  const ConnRequest sent = request(true);
  const Status good = check_standby_offer(sent, reply(true));
  BOOST_TEST(good.ok(), test::err_msg(good));
  BOOST_TEST(check_standby_offer(request(false), reply(false)).ok());
  auto with_pair = [](int a, int b) {
    ConnReply r = reply(true);
    r.standby->pair = {a, b};
    return r;
  };
  const std::pair<ConnReply, const char*> bad[] = {
      {with_pair(9, 0), "device 9 is not among the connector's candidates"},
      {with_pair(3, 0), "the connector's port is not up"},
      {with_pair(1, 4), "device 4 is not among the listener's candidates"},
      {with_pair(0, 2), "(0, 2) is the primary pair"},
      {with_pair(2, 0), "the ports do not reach each other"},
  };
  for (const auto& [rep, says] : bad) {
    const Status s = check_standby_offer(sent, rep);
    BOOST_TEST(!s.ok(), says);
    if (!s.ok()) BOOST_TEST(s.error().message.find(says) != std::string::npos, s.error().message);
  }
  const Status s = check_standby_offer(request(false), reply(true));
  BOOST_TEST((!s.ok() && s.error().message == "standby offer: the connector offered no standby"));
  // The listener's choice is one of the ranked pairs (what it would pick).
  const auto pairs = rank_standby_pairs(sent.candidates, reply(true).candidates, {0, 2});
  BOOST_REQUIRE(!pairs.empty());
  BOOST_TEST((pairs.front() == PortPair{1, 0}));
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
  h.secret[0] = 1;
  h.members = 1;
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

BOOST_AUTO_TEST_CASE(a_handle_without_its_secret_or_with_reserved_bytes_is_refused) {
  Handle h = good_v4();
  h.secret[0] = 0;
  auto s = validate_handle(h);
  BOOST_TEST((!s.ok() && s.error().code == Errc::bad_token));
  h = good_v4();
  h.zero[42] = 1;
  BOOST_TEST(!validate_handle(h).ok());
  for (int m : {0, 9, 255}) {  // a fused listener has 2..8 ports
    h = good_v4();
    h.members = static_cast<std::uint8_t>(m);
    auto v = validate_handle(h);
    BOOST_TEST(!v.ok(), m);
    if (!v.ok()) BOOST_TEST(v.error().message == "handle names " + std::to_string(m) + " ports (1..8)");
  }
  h = good_v4();
  h.members = 8;
  BOOST_TEST(validate_handle(h).ok());
}

BOOST_AUTO_TEST_CASE(make_handle_round_trips_through_decode) {
  namespace asio = boost::asio;
  const asio::ip::tcp::endpoint v4(asio::ip::make_address("10.30.0.1"), 4242);
  const nccl_ha::net::Key secret = nccl_ha::net::random_key();
  const Handle h = make_handle(v4, 0x1234, secret, kOfferStandby);
  std::vector<std::uint8_t> buf(sizeof h);
  std::memcpy(buf.data(), &h, sizeof h);
  auto d = decode_handle(buf);
  BOOST_REQUIRE_MESSAGE(d.ok(), test::err_msg(d));
  BOOST_TEST(d->token == 0x1234u);
  BOOST_TEST(d->flags == kOfferStandby);
  BOOST_TEST(d->stage == 0u);
  BOOST_TEST(d->members == 1u);
  BOOST_TEST(make_handle(v4, 0x1234, secret, 0, 4).members == 4u);
  BOOST_TEST((handle_secret(*d) == secret));
  BOOST_TEST((handle_endpoint(*d) == v4));
  const asio::ip::address_v6 ll = asio::ip::make_address_v6("fe80::1");
  const asio::ip::tcp::endpoint v6(asio::ip::address_v6(ll.to_bytes(), 3), 5000);
  const Handle h6 = make_handle(v6, 7, secret, 0);
  BOOST_TEST(h6.family == AF_INET6);
  BOOST_TEST(h6.scope_id == 3u);
  BOOST_TEST(validate_handle(h6).ok());
  BOOST_TEST((handle_endpoint(h6) == v6));
}

BOOST_AUTO_TEST_SUITE_END()
