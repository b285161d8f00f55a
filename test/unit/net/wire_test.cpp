// Wire codec: frames (header + payload), endpoints, byte reader/writer. Decoding never trusts
// the input: every malformed form must come back as an Error with the right code.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "alloc_tracker.hpp"
#include "nccl_ha/net/wire.hpp"
#include "test_expected.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;
using Bytes = std::vector<std::uint8_t>;

namespace {

constexpr std::uint64_t kToken = 0x1122334455667788ull;

Bytes pattern(std::size_t n, unsigned seed = 1) {
  Bytes b(n);
  std::mt19937 gen(seed);
  for (auto& x : b) x = static_cast<std::uint8_t>(gen());
  return b;
}

template <class T>
Errc code_of(const Expected<T>& e) {
  BOOST_REQUIRE(!e.ok());
  return e.error().code;
}

void put_u16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v);
  b[at + 1] = static_cast<std::uint8_t>(v >> 8);
}
void put_u32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Header field offsets (wire.hpp).
constexpr std::size_t kOffMagic = 0, kOffVersion = 4, kOffType = 6, kOffLength = 8, kOffFlags = 12, kOffToken = 16;

Endpoint sample_endpoint() {
  Endpoint ep;
  ep.qpn = 0x123456;
  ep.psn = 0xabcdef;
  for (int i = 0; i < 16; ++i) ep.gid.raw[i] = static_cast<std::uint8_t>(i);
  ep.lid = 0x1234;
  ep.port = 1;
  ep.gid_index = 3;
  ep.link_layer = IBV_LINK_LAYER_ETHERNET;
  ep.mtu = IBV_MTU_4096;
  ep.ece = Ece{true, 0x15b3, 0x30000001, 0};
  return ep;
}

bool same(const Endpoint& a, const Endpoint& b) {
  return a.qpn == b.qpn && a.psn == b.psn && std::memcmp(a.gid.raw, b.gid.raw, 16) == 0 && a.lid == b.lid &&
         a.port == b.port && a.gid_index == b.gid_index && a.link_layer == b.link_layer && a.mtu == b.mtu &&
         a.ece.supported == b.ece.supported && a.ece.vendor_id == b.ece.vendor_id && a.ece.options == b.ece.options &&
         a.ece.comp_mask == b.ece.comp_mask && a.qpns == b.qpns && a.split == b.split && a.more_qpn == b.more_qpn;
}

// Endpoint payload offsets.
constexpr std::size_t kEpQpn = 0, kEpPsn = 4, kEpPort = 26, kEpLinkLayer = 28, kEpMtu = 29, kEpEce = 30,
                      kEpQps = 31, kEpEceVendor = 32, kEpMoreQpn = 44;

}  // namespace

BOOST_AUTO_TEST_SUITE(wire_frames)

BOOST_AUTO_TEST_CASE(header_layout_is_little_endian_and_starts_with_NCHA) {
  const Bytes payload{0xAA, 0xBB};
  const Bytes f = encode_frame(0x0102, kToken, payload);
  const Bytes expected{'N', 'C', 'H', 'A',                                // magic
                       0x01, 0x00,                                        // version 1
                       0x02, 0x01,                                        // type 0x0102
                       0x02, 0x00, 0x00, 0x00,                            // length 2
                       0x00, 0x00, 0x00, 0x00,                            // flags
                       0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,    // token
                       0xAA, 0xBB};
  BOOST_TEST(f == expected, boost::test_tools::per_element());
  BOOST_TEST(kHeaderSize == 24u);
}

BOOST_AUTO_TEST_CASE(round_trip) {
  for (std::size_t n : {0, 1, 31, 32, 100, 4095, 4096}) {
    for (std::uint16_t type : {std::uint16_t{1}, std::uint16_t{2}, kAppTypeBase, std::uint16_t{0xffff}}) {
      BOOST_TEST_CONTEXT("payload " << n << " type " << type) {
        const Bytes payload = pattern(n, static_cast<unsigned>(n + type));
        const Bytes f = encode_frame(type, kToken, payload);
        BOOST_TEST(f.size() == kHeaderSize + n);
        auto h = decode_header(f, kToken);
        BOOST_REQUIRE(h.ok());
        BOOST_TEST(h->type == type);
        BOOST_TEST(h->length == n);
        BOOST_TEST(h->token == kToken);
        auto d = decode_frame(f, kToken);
        BOOST_REQUIRE(d.ok());
        BOOST_TEST(d->type == type);
        BOOST_TEST(d->token == kToken);
        BOOST_TEST(d->payload == payload, boost::test_tools::per_element());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(every_truncation_is_reported_as_truncated) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{32}, kMaxPayload}) {
    const Bytes f = encode_frame(kAppTypeBase, kToken, pattern(n));
    for (std::size_t len = 0; len < f.size(); ++len) {
      auto d = decode_frame(std::span<const std::uint8_t>(f).first(len), kToken);
      if (d.ok() || d.error().code != Errc::truncated) {
        BOOST_ERROR("payload " << n << ": a frame cut to " << len << " of " << f.size()
                               << " bytes was not reported as truncated");
        break;
      }
      if (len < kHeaderSize) {
        auto h = decode_header(std::span<const std::uint8_t>(f).first(len), kToken);
        if (h.ok() || h.error().code != Errc::truncated) {
          BOOST_ERROR("a header cut to " << len << " bytes was not reported as truncated");
          break;
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_rejected) {
  Bytes f = encode_frame(kAppTypeBase, kToken, pattern(10));
  Bytes one_more = f;
  one_more.push_back(0);
  BOOST_TEST((code_of(decode_frame(one_more, kToken)) == Errc::bad_length));
  Bytes two_frames = f;
  two_frames.insert(two_frames.end(), f.begin(), f.end());
  BOOST_TEST((code_of(decode_frame(two_frames, kToken)) == Errc::bad_length));
  // The header alone only looks at its own 24 bytes.
  BOOST_TEST(decode_header(two_frames, kToken).ok());
}

BOOST_AUTO_TEST_CASE(bad_magic) {
  const Bytes good = encode_frame(kAppTypeBase, kToken, pattern(4));
  for (std::size_t i = kOffMagic; i < kOffMagic + 4; ++i) {
    Bytes f = good;
    f[i] ^= 0x20;
    BOOST_TEST((code_of(decode_frame(f, kToken)) == Errc::bad_magic), "magic byte " << i);
    BOOST_TEST((code_of(decode_header(f, kToken)) == Errc::bad_magic));
  }
  Bytes swapped = good;  // big-endian magic
  put_u32(swapped, kOffMagic, 0x4E434841u);
  BOOST_TEST((code_of(decode_frame(swapped, kToken)) == Errc::bad_magic));
  Bytes garbage(kHeaderSize + 4, 0xAB);
  BOOST_TEST((code_of(decode_frame(garbage, kToken)) == Errc::bad_magic));
  Bytes zeros(kHeaderSize, 0);
  BOOST_TEST((code_of(decode_frame(zeros, kToken)) == Errc::bad_magic));
}

BOOST_AUTO_TEST_CASE(bad_version) {
  for (std::uint16_t v : {std::uint16_t{0}, std::uint16_t{2}, std::uint16_t{0x0100}, std::uint16_t{0xffff}}) {
    Bytes f = encode_frame(kAppTypeBase, kToken, pattern(4));
    put_u16(f, kOffVersion, v);
    BOOST_TEST((code_of(decode_frame(f, kToken)) == Errc::bad_version), "version " << v);
  }
}

BOOST_AUTO_TEST_CASE(bad_token) {
  const Bytes f = encode_frame(kAppTypeBase, kToken, pattern(4));
  BOOST_TEST((code_of(decode_frame(f, kToken + 1)) == Errc::bad_token));
  BOOST_TEST(decode_frame(f, kAnyToken).ok());  // a reader that routes by token
  BOOST_TEST(decode_frame(f, kAnyToken)->token == kToken);
  BOOST_TEST((code_of(decode_frame(encode_frame(kAppTypeBase, 0, pattern(4)), kAnyToken)) == Errc::bad_token));
  BOOST_TEST((code_of(decode_header(f, ~kToken)) == Errc::bad_token));
  for (std::size_t i = kOffToken; i < kOffToken + 8; ++i) {
    Bytes g = f;
    g[i] ^= 1;
    BOOST_TEST((code_of(decode_frame(g, kToken)) == Errc::bad_token), "token byte " << i);
  }
}

BOOST_AUTO_TEST_CASE(bad_type) {
  Bytes f = encode_frame(kAppTypeBase, kToken, pattern(4));
  put_u16(f, kOffType, 0);
  BOOST_TEST((code_of(decode_frame(f, kToken)) == Errc::bad_type));
  BOOST_TEST((code_of(decode_header(f, kToken)) == Errc::bad_type));
}

BOOST_AUTO_TEST_CASE(reserved_flags_must_be_zero) {
  for (int bit = 0; bit < 32; ++bit) {
    Bytes f = encode_frame(kAppTypeBase, kToken, pattern(4));
    put_u32(f, kOffFlags, 1u << bit);
    auto d = decode_frame(f, kToken);
    BOOST_TEST(!d.ok(), "flag bit " << bit << " accepted");
    if (!d.ok()) BOOST_TEST((d.error().code == Errc::bad_length));
  }
}

BOOST_AUTO_TEST_CASE(oversized_length_claims_are_rejected_without_allocating) {
  for (std::uint32_t claim : {static_cast<std::uint32_t>(kMaxPayload + 1), 0x00100000u, 0x7fffffffu, 0xffffffffu}) {
    BOOST_TEST_CONTEXT("claim " << claim) {
      Bytes header = encode_frame(kAppTypeBase, kToken, {});
      put_u32(header, kOffLength, claim);
      test::AllocationWatch watch;
      BOOST_TEST((code_of(decode_header(header, kToken)) == Errc::oversized));
      // Only the header is there: the claim is refused before anything waits for the rest.
      BOOST_TEST((code_of(decode_frame(header, kToken)) == Errc::oversized));
      BOOST_TEST(watch.largest() < 64u * 1024u);
    }
  }
  // Exactly the limit is fine; the limit is the reader's choice.
  const Bytes at_limit = encode_frame(kAppTypeBase, kToken, pattern(kMaxPayload));
  BOOST_TEST(decode_frame(at_limit, kToken).ok());
  const Bytes small = encode_frame(kAppTypeBase, kToken, pattern(17));
  BOOST_TEST((code_of(decode_frame(small, kToken, 16)) == Errc::oversized));
  BOOST_TEST(decode_frame(small, kToken, 17).ok());
  const Bytes big = encode_frame(kAppTypeBase, kToken, pattern(10000));
  BOOST_TEST((code_of(decode_frame(big, kToken)) == Errc::oversized));
  BOOST_TEST(decode_frame(big, kToken, 10000).ok());
}

BOOST_AUTO_TEST_CASE(length_field_mismatch_is_detected) {
  Bytes f = encode_frame(kAppTypeBase, kToken, pattern(10));
  put_u32(f, kOffLength, 11);  // claims one byte more than present
  BOOST_TEST((code_of(decode_frame(f, kToken)) == Errc::truncated));
  put_u32(f, kOffLength, 9);  // one byte less
  BOOST_TEST((code_of(decode_frame(f, kToken)) == Errc::bad_length));
}

BOOST_AUTO_TEST_CASE(random_token_is_never_zero_and_varies) {
  const auto a = random_token();
  const auto b = random_token();
  BOOST_TEST(a != 0u);
  BOOST_TEST(b != 0u);
  BOOST_TEST(a != b);  // 2^-64 chance of a false failure
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire_endpoint)

BOOST_AUTO_TEST_CASE(layout_and_round_trip) {
  const Endpoint ep = sample_endpoint();
  const Bytes b = encode_endpoint(ep);
  const Bytes expected{0x56, 0x34, 0x12, 0x00,  // qpn
                       0xef, 0xcd, 0xab, 0x00,  // psn
                       0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,  // gid
                       0x34, 0x12,  // lid
                       1,           // port
                       3,           // gid index
                       2,           // link layer (Ethernet)
                       5,           // mtu (4096)
                       1,           // ECE offered
                       0,           // one QP, no split
                       0xb3, 0x15, 0, 0,  // ECE vendor id
                       0x01, 0, 0, 0x30,  // ECE options
                       0, 0, 0, 0,        // ECE comp_mask
                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,   // no more QPs
                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  BOOST_TEST(b == expected, boost::test_tools::per_element());
  BOOST_TEST(b.size() == kEndpointSize);
  auto d = decode_endpoint(b);
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(same(*d, ep));
}

BOOST_AUTO_TEST_CASE(several_qps_layout_and_round_trip) {
  Endpoint ep = sample_endpoint();
  ep.qpns = 3;
  ep.split = true;
  ep.more_qpn[0] = 0x000102;
  ep.more_qpn[1] = 0xffffff;
  const Bytes b = encode_endpoint(ep);
  BOOST_TEST(b.size() == kEndpointSize);
  BOOST_TEST(b[kEpQps] == 0x82);  // count - 1, split on top
  const Bytes more(b.begin() + kEpMoreQpn, b.begin() + kEpMoreQpn + 12);
  BOOST_TEST(more == (Bytes{0x02, 0x01, 0, 0, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0}), boost::test_tools::per_element());
  auto d = decode_endpoint(b);
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(same(*d, ep));
  BOOST_TEST(d->qpn_at(0) == 0x123456u);
  BOOST_TEST(d->qpn_at(2) == 0xffffffu);
  const Endpoint two = d->single(2);  // what QP 2 is connected to
  BOOST_TEST(two.qpn == 0xffffffu);
  BOOST_TEST(two.qpns == 1);
  BOOST_TEST(!two.split);
  BOOST_TEST(two.psn == ep.psn);
  BOOST_TEST(two.ece.options == ep.ece.options);
  // Every count 1..8 round-trips.
  for (int n = 1; n <= kMaxEndpointQps; ++n) {
    Endpoint e = sample_endpoint();
    e.qpns = static_cast<std::uint8_t>(n);
    for (int i = 1; i < n; ++i) e.more_qpn[static_cast<std::size_t>(i - 1)] = 0x100u + static_cast<std::uint32_t>(i);
    auto r = decode_endpoint(encode_endpoint(e));
    BOOST_TEST_REQUIRE(r.ok(), n << " QPs: " << test::err_msg(r));
    BOOST_TEST(same(*r, e));
  }
}

BOOST_AUTO_TEST_CASE(round_trip_at_the_edges_of_every_range) {
  for (std::uint32_t qpn : {1u, 0xffffffu})
    for (std::uint32_t psn : {0u, 0xffffffu})
      for (std::uint8_t mtu : {std::uint8_t{IBV_MTU_256}, std::uint8_t{IBV_MTU_4096}})
        for (std::uint8_t ll : {std::uint8_t{IBV_LINK_LAYER_UNSPECIFIED}, std::uint8_t{IBV_LINK_LAYER_INFINIBAND},
                                std::uint8_t{IBV_LINK_LAYER_ETHERNET}})
          for (std::uint8_t port : {std::uint8_t{1}, std::uint8_t{255}}) {
            Endpoint ep = sample_endpoint();
            ep.qpn = qpn;
            ep.psn = psn;
            ep.mtu = mtu;
            ep.link_layer = ll;
            ep.port = port;
            ep.lid = 0xffff;
            ep.gid_index = 255;
            auto d = decode_endpoint(encode_endpoint(ep));
            BOOST_TEST_REQUIRE(d.ok(), "qpn " << qpn << " psn " << psn << " mtu " << int(mtu) << " ll " << int(ll)
                                              << " port " << int(port) << ": " << test::err_msg(d));
            BOOST_TEST(same(*d, ep));
          }
}

BOOST_AUTO_TEST_CASE(every_truncation_and_extra_byte) {
  const Bytes b = encode_endpoint(sample_endpoint());
  for (std::size_t len = 0; len < b.size(); ++len)
    BOOST_TEST((code_of(decode_endpoint(std::span<const std::uint8_t>(b).first(len))) == Errc::truncated),
               "length " << len);
  Bytes longer = b;
  longer.push_back(0);
  BOOST_TEST((code_of(decode_endpoint(longer)) == Errc::bad_length));
}

BOOST_AUTO_TEST_CASE(field_validation) {
  const Bytes good = encode_endpoint(sample_endpoint());
  auto with = [&](auto mutate) {
    Bytes b = good;
    mutate(b);
    return decode_endpoint(b);
  };
  struct Bad {
    const char* what;
    std::function<void(Bytes&)> mutate;
  };
  const std::vector<Bad> bad = {
      {"qpn 0", [](Bytes& b) { put_u32(b, kEpQpn, 0); }},
      {"qpn 2^24", [](Bytes& b) { put_u32(b, kEpQpn, 0x1000000u); }},
      {"qpn 0xffffffff", [](Bytes& b) { put_u32(b, kEpQpn, 0xffffffffu); }},
      {"psn 2^24", [](Bytes& b) { put_u32(b, kEpPsn, 0x1000000u); }},
      {"psn 0xffffffff", [](Bytes& b) { put_u32(b, kEpPsn, 0xffffffffu); }},
      {"port 0", [](Bytes& b) { b[kEpPort] = 0; }},
      {"mtu code 0", [](Bytes& b) { b[kEpMtu] = 0; }},
      {"mtu code 6", [](Bytes& b) { b[kEpMtu] = 6; }},
      {"mtu code 255", [](Bytes& b) { b[kEpMtu] = 255; }},
      {"link layer 3", [](Bytes& b) { b[kEpLinkLayer] = 3; }},
      {"link layer 255", [](Bytes& b) { b[kEpLinkLayer] = 255; }},
      {"QP count byte 0x08", [](Bytes& b) { b[kEpQps] = 0x08; }},
      {"QP count byte 0x40", [](Bytes& b) { b[kEpQps] = 0x40; }},
      {"two QPs, the second's number 0", [](Bytes& b) { b[kEpQps] = 1; }},
      {"two QPs, the second's number 2^24", [](Bytes& b) {
         b[kEpQps] = 1;
         put_u32(b, kEpMoreQpn, 0x1000000u);
       }},
      {"one QP and a second QP number", [](Bytes& b) { put_u32(b, kEpMoreQpn, 7); }},
      {"three QPs and a fourth QP number", [](Bytes& b) {
         b[kEpQps] = 0x82;
         put_u32(b, kEpMoreQpn, 5);
         put_u32(b, kEpMoreQpn + 4, 6);
         put_u32(b, kEpMoreQpn + 24, 9);
       }},
      {"ECE flag 2", [](Bytes& b) { b[kEpEce] = 2; }},
      {"ECE flag 0xff", [](Bytes& b) { b[kEpEce] = 0xff; }},
      {"ECE fields without ECE", [](Bytes& b) { b[kEpEce] = 0; }},
      {"ECE comp_mask without ECE", [](Bytes& b) {
         b[kEpEce] = 0;
         put_u32(b, kEpEceVendor, 0);
         put_u32(b, kEpEceVendor + 4, 0);
         put_u32(b, kEpEceVendor + 8, 1);
       }},
  };
  for (const auto& c : bad) {
    auto d = with(c.mutate);
    BOOST_TEST(!d.ok(), c.what << " accepted");
    if (!d.ok()) BOOST_TEST((d.error().code == Errc::invalid_argument), c.what);
  }
  BOOST_TEST(with([](Bytes&) {}).ok());
  // No ECE: the flag and every ECE field 0.
  auto none = with([](Bytes& b) {
    b[kEpEce] = 0;
    for (std::size_t i = kEpEceVendor; i < kEpMoreQpn; ++i) b[i] = 0;
  });
  BOOST_TEST_REQUIRE(none.ok());
  BOOST_TEST(!none->ece.supported);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire_bytes)

BOOST_AUTO_TEST_CASE(writer_reader_round_trip) {
  Bytes buf;
  ByteWriter w(buf);
  w.u8(0xfe);
  w.u16(0xbeef);
  w.u32(0xdeadbeef);
  w.u64(0x0123456789abcdefull);
  w.f64(-2.5);
  const Bytes raw{1, 2, 3};
  w.bytes(raw);
  w.str("hello");
  w.str("");
  BOOST_TEST(buf.size() == 1u + 2 + 4 + 8 + 8 + 3 + (2 + 5) + 2);

  ByteReader r(buf);
  std::uint8_t a = 0;
  std::uint16_t b = 0;
  std::uint32_t c = 0;
  std::uint64_t d = 0;
  double e = 0;
  std::uint8_t f[3] = {};
  std::string s1, s2;
  BOOST_TEST(r.u8(a));
  BOOST_TEST(r.u16(b));
  BOOST_TEST(r.u32(c));
  BOOST_TEST(r.u64(d));
  BOOST_TEST(r.f64(e));
  BOOST_TEST(r.bytes(f));
  BOOST_TEST(r.str(s1));
  BOOST_TEST(r.str(s2));
  BOOST_TEST(a == 0xfe);
  BOOST_TEST(b == 0xbeef);
  BOOST_TEST(c == 0xdeadbeefu);
  BOOST_TEST(d == 0x0123456789abcdefull);
  BOOST_TEST(e == -2.5);
  BOOST_TEST((f[0] == 1 && f[1] == 2 && f[2] == 3));
  BOOST_TEST(s1 == "hello");
  BOOST_TEST(s2.empty());
  BOOST_TEST(r.remaining() == 0u);
  BOOST_TEST(!r.u8(a));
}

BOOST_AUTO_TEST_CASE(reader_never_reads_past_the_end) {
  const Bytes three{1, 2, 3};
  ByteReader r(three);
  std::uint32_t v = 77;
  BOOST_TEST(!r.u32(v));
  BOOST_TEST(v == 77u);               // untouched
  BOOST_TEST(r.remaining() == 3u);    // and nothing consumed
  std::uint8_t out[4];
  BOOST_TEST(!r.bytes(out));
  BOOST_TEST(r.remaining() == 3u);
  std::uint16_t h = 0;
  BOOST_TEST(r.u16(h));
  BOOST_TEST(h == 0x0201);
  std::uint64_t q = 0;
  BOOST_TEST(!r.u64(q));
  double dd = 0;
  BOOST_TEST(!r.f64(dd));
  BOOST_TEST(r.remaining() == 1u);

  // A string whose length prefix claims more than is there.
  Bytes s{10, 0, 'a', 'b'};
  ByteReader rs(s);
  std::string str = "keep";
  BOOST_TEST(!rs.str(str));
  BOOST_TEST(rs.remaining() == 4u);  // a failed read consumes nothing, not even the prefix
  // And one longer than the caller's limit.
  Bytes t;
  ByteWriter wt(t);
  wt.str(std::string(20, 'x'));
  ByteReader rt(t);
  BOOST_TEST(!rt.str(str, 19));
  BOOST_TEST(rt.remaining() == 22u);
  ByteReader rt2(t);
  BOOST_TEST(rt2.str(str, 20));
  BOOST_TEST(str == std::string(20, 'x'));
}

BOOST_AUTO_TEST_CASE(strings_longer_than_the_length_prefix_stay_consistent) {
  // The u16 length prefix cannot describe more than 65535 bytes: what is written must still be
  // exactly what the prefix says, so that the reader stays in sync with the writer.
  for (std::size_t n : {0xffff, 0x10000, 70000}) {
    BOOST_TEST_CONTEXT("string of " << n << " bytes") {
      Bytes buf;
      ByteWriter w(buf);
      w.str(std::string(n, 'y'));
      w.u32(0xcafef00d);  // a field after the string
      ByteReader r(buf);
      std::string s;
      BOOST_TEST_REQUIRE(r.str(s, 0xffff));
      BOOST_TEST(s.size() == std::min<std::size_t>(n, 0xffff));
      std::uint32_t after = 0;
      BOOST_TEST(r.u32(after));
      BOOST_TEST(after == 0xcafef00du);
      BOOST_TEST(r.remaining() == 0u);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
