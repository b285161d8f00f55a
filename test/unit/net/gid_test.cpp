// GID index selection on fixture tables, and the GID classification helpers.
#include <arpa/inet.h>

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "nccl_ha/net/gid.hpp"
#include "test_expected.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;

namespace {

ibv_gid gid_from(const char* text) {
  ibv_gid g{};
  BOOST_REQUIRE_MESSAGE(inet_pton(AF_INET6, text, g.raw) == 1, text);
  return g;
}

GidEntry entry(std::uint32_t index, const char* text, GidType type) { return GidEntry{index, gid_from(text), type}; }

// Typical RoCE port: v1 and v2 entries for link-local, global IPv6 and IPv4-mapped addresses.
const char* kLinkLocal = "fe80::5054:ff:fe12:3456";
const char* kGlobal6 = "2001:db8::5054:ff:fe12:3456";
const char* kMapped4 = "::ffff:10.0.0.1";

std::uint32_t select_ok(const std::vector<GidEntry>& t, int ll = IBV_LINK_LAYER_ETHERNET,
                        std::optional<std::int64_t> ov = std::nullopt) {
  auto r = select_gid_index(t, ll, ov);
  BOOST_REQUIRE_MESSAGE(r.ok(), test::err_msg(r));
  return *r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gid_helpers)

BOOST_AUTO_TEST_CASE(classification) {
  BOOST_TEST(is_ipv4_mapped(gid_from("::ffff:192.168.1.2")));
  BOOST_TEST(!is_ipv4_mapped(gid_from("::192.168.1.2")));  // IPv4-compatible, not mapped
  BOOST_TEST(!is_ipv4_mapped(gid_from("1::ffff:192.168.1.2")));
  BOOST_TEST(!is_ipv4_mapped(gid_from(kLinkLocal)));
  BOOST_TEST(is_link_local(gid_from(kLinkLocal)));
  BOOST_TEST(is_link_local(gid_from("febf::1")));
  BOOST_TEST(!is_link_local(gid_from("fec0::1")));
  BOOST_TEST(!is_link_local(gid_from(kGlobal6)));
  BOOST_TEST(is_zero(gid_from("::")));
  BOOST_TEST(!is_zero(gid_from("::1")));
  BOOST_TEST(gid_to_string(gid_from(kLinkLocal)) == kLinkLocal);
  BOOST_TEST(gid_to_string(gid_from("::ffff:10.0.0.1")) == "::ffff:10.0.0.1");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(gid_selection)

BOOST_AUTO_TEST_CASE(roce_preference_order) {
  // Full table: v2 IPv4-mapped wins.
  std::vector<GidEntry> t = {
      entry(0, kLinkLocal, GidType::roce_v1), entry(1, kLinkLocal, GidType::roce_v2),
      entry(2, kGlobal6, GidType::roce_v1),   entry(3, kGlobal6, GidType::roce_v2),
      entry(4, kMapped4, GidType::roce_v1),   entry(5, kMapped4, GidType::roce_v2),
  };
  BOOST_TEST(select_ok(t) == 5u);
  // Without it: v2 global IPv6.
  t.pop_back();
  BOOST_TEST(select_ok(t) == 3u);
  // Without that: v2 link-local (ahead of v1 with an IPv4-mapped address).
  t.erase(t.begin() + 3);
  BOOST_TEST(select_ok(t) == 1u);
  // Only v1 left: the lowest v1 index.
  t.erase(t.begin() + 1);
  BOOST_TEST(select_ok(t) == 0u);
}

BOOST_AUTO_TEST_CASE(preference_does_not_depend_on_table_order) {
  const std::vector<GidEntry> t = {
      entry(9, kMapped4, GidType::roce_v2),
      entry(2, kGlobal6, GidType::roce_v2),
      entry(0, kLinkLocal, GidType::roce_v1),
      entry(1, kLinkLocal, GidType::roce_v2),
  };
  BOOST_TEST(select_ok(t) == 9u);
  const std::vector<GidEntry> u = {
      entry(1, kLinkLocal, GidType::roce_v2),
      entry(0, kLinkLocal, GidType::roce_v1),
      entry(7, kGlobal6, GidType::roce_v2),
  };
  BOOST_TEST(select_ok(u) == 7u);
}

BOOST_AUTO_TEST_CASE(zero_gids_are_skipped) {
  const std::vector<GidEntry> t = {
      entry(0, "::", GidType::roce_v2),  // an empty slot would otherwise rank as v2 "global"
      entry(1, "::", GidType::roce_v2),
      entry(2, kLinkLocal, GidType::roce_v1),
  };
  BOOST_TEST(select_ok(t) == 2u);
  const std::vector<GidEntry> zeros = {entry(0, "::", GidType::roce_v2), entry(1, "::", GidType::roce_v1)};
  auto r = select_gid_index(zeros, IBV_LINK_LAYER_ETHERNET, std::nullopt);
  BOOST_TEST(!r.ok());
  if (!r.ok()) BOOST_TEST((r.error().code == Errc::not_found));
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_lowest_index) {
  const std::vector<GidEntry> t = {
      entry(7, "::ffff:10.0.0.7", GidType::roce_v2),
      entry(3, "::ffff:10.0.0.3", GidType::roce_v2),
      entry(5, "::ffff:10.0.0.5", GidType::roce_v2),
  };
  BOOST_TEST(select_ok(t) == 3u);
  const std::vector<GidEntry> v1 = {entry(4, kLinkLocal, GidType::roce_v1), entry(2, kGlobal6, GidType::roce_v1)};
  BOOST_TEST(select_ok(v1) == 2u);
}

BOOST_AUTO_TEST_CASE(infiniband_uses_index_0) {
  const std::vector<GidEntry> t = {entry(0, "fe80::2", GidType::ib), entry(1, kMapped4, GidType::roce_v2)};
  BOOST_TEST(select_ok(t, IBV_LINK_LAYER_INFINIBAND) == 0u);
  BOOST_TEST(select_ok(t, IBV_LINK_LAYER_UNSPECIFIED) == 0u);
  // On Ethernet the same table would pick the RoCE v2 entry.
  BOOST_TEST(select_ok(t, IBV_LINK_LAYER_ETHERNET) == 1u);
}

BOOST_AUTO_TEST_CASE(override_valid_and_invalid) {
  const std::vector<GidEntry> t = {
      entry(0, kLinkLocal, GidType::roce_v1),
      entry(1, kLinkLocal, GidType::roce_v2),
      entry(2, "::", GidType::roce_v2),
      entry(3, kMapped4, GidType::roce_v2),
  };
  BOOST_TEST(select_ok(t, IBV_LINK_LAYER_ETHERNET, 1) == 1u);  // beats the preference
  BOOST_TEST(select_ok(t, IBV_LINK_LAYER_ETHERNET, 0) == 0u);
  BOOST_TEST(select_ok(t, IBV_LINK_LAYER_INFINIBAND, 3) == 3u);  // applies to IB too
  for (std::int64_t bad : {std::int64_t{2} /* zero GID */, std::int64_t{4} /* absent */, std::int64_t{255},
                           std::int64_t{-1}, std::int64_t{0x100000001}}) {
    auto r = select_gid_index(t, IBV_LINK_LAYER_ETHERNET, bad);
    BOOST_TEST(!r.ok(), "override " << bad << " accepted as " << (r.ok() ? *r : 0));
    if (!r.ok()) {
      BOOST_TEST((r.error().code == Errc::not_found));
      BOOST_TEST(r.error().message.find(std::to_string(bad)) != std::string::npos, r.error().message);
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_table_is_an_error) {
  const std::vector<GidEntry> none;
  auto r = select_gid_index(none, IBV_LINK_LAYER_ETHERNET, std::nullopt);
  BOOST_TEST(!r.ok());
  if (!r.ok()) BOOST_TEST((r.error().code == Errc::not_found));
  auto o = select_gid_index(none, IBV_LINK_LAYER_ETHERNET, 0);
  BOOST_TEST(!o.ok());
}

BOOST_AUTO_TEST_SUITE_END()
