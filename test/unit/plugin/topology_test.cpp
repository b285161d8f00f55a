// The port topology (topology.hpp): prefixes, rails from address lists and sysfs, islands,
// reachability, and the ranking of standby pairs on multi-rail layouts (issue #12).
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/topology.hpp"
#include "topo_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using nccl_ha::test::cand;
using nccl_ha::test::CandSpec;
using nccl_ha::test::if_addr;
using nccl_ha::test::v4;
using nccl_ha::test::v6;
namespace fs = std::filesystem;

namespace {

// One node's ports: device i on rail 10.(20 + rails[i]).0.0/24, NUMA node rails[i] / 2, each its
// own NIC; `primary` flagged primary (-1: none). island_len: HA_NCCL_ISLAND_PREFIX_LEN (-1 unset).
std::vector<Candidate> node(const std::vector<int>& rails, int primary, int island_len = -1) {
  std::vector<Candidate> out;
  for (std::size_t i = 0; i < rails.size(); ++i) {
    CandSpec s;
    s.dev = static_cast<int>(i);
    const std::string net = "10." + std::to_string(20 + rails[i]) + ".0.0";
    s.rail = v4(net.c_str(), 24);
    s.island_len = island_len;
    s.numa = rails[i] / 2;
    if (static_cast<int>(i) == primary) s.flags |= kCandPrimary;
    out.push_back(cand(s));
  }
  return out;
}

int rail(const Candidate& c) { return c.topo.rail.addr[13] - 20; }

std::vector<PortPair> pairs_of(std::initializer_list<std::pair<int, int>> l) {
  std::vector<PortPair> out;
  for (auto [a, b] : l) out.push_back({a, b});
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(net_prefix)

BOOST_AUTO_TEST_CASE(make_prefix_masks_and_clamps) {
  const NetPrefix p = v4("10.20.7.9", 24);
  BOOST_TEST(p.known);
  BOOST_TEST(p.len == 120);
  BOOST_TEST(p.str() == "10.20.7.0/24");
  BOOST_TEST(p.v4());
  BOOST_TEST(v4("10.21.255.1", 15).str() == "10.20.0.0/15");
  BOOST_TEST(v4("10.20.0.1", 0).str() == "0.0.0.0/0");
  BOOST_TEST(v4("10.20.0.1", 32).str() == "10.20.0.1/32");
  BOOST_TEST(v6("fd00:1:2:3::9", 64).str() == "fd00:1:2:3::/64");
  BOOST_TEST(v6("fe80::2:c903:f1:2345", 64).str() == "fe80::/64");
  BOOST_TEST(v6("fe80::1", 200).len == 128);  // clamped
  BOOST_TEST(v6("fe80::1", -5).len == 0);
  BOOST_TEST(v6("fe80::1", -5).str() == "::/0");
  BOOST_TEST(!v6("fd00::1", 64).v4());
  BOOST_TEST(!make_prefix(v4("10.20.0.1", 24).addr, 80).v4());  // the mapping bits are cut: no longer IPv4
  BOOST_TEST(NetPrefix{}.str() == "?");
  BOOST_TEST(!NetPrefix{}.v4());
}

BOOST_AUTO_TEST_CASE(containment) {
  BOOST_TEST(prefix_contains(v4("10.20.0.0", 15), v4("10.21.3.0", 24)));
  BOOST_TEST(!prefix_contains(v4("10.20.0.0", 15), v4("10.22.0.0", 24)));
  BOOST_TEST(!prefix_contains(v4("10.20.0.0", 24), v4("10.20.0.0", 15)));  // the outer one is narrower
  BOOST_TEST(prefix_contains(v4("10.20.0.0", 24), v4("10.20.0.0", 24)));
  BOOST_TEST(!prefix_contains(NetPrefix{}, v4("10.20.0.0", 24)));
  BOOST_TEST(!prefix_contains(v6("fd00::", 16), v4("10.20.0.0", 24)));
}

BOOST_AUTO_TEST_CASE(fnv1a_hash) {
  BOOST_TEST(topo_hash("") == 0u);
  BOOST_TEST(topo_hash("a") == 0xe40c292cu);  // the FNV-1a test vector
  BOOST_TEST(topo_hash("foobar") == 0xbf9cf968u);
  BOOST_TEST(topo_hash("0000:03:00") != topo_hash("0000:04:00"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(port_model)

namespace {
net::PortInfo roce(const std::string& netdev, const char* gid_text) {
  net::PortInfo p;
  p.device = "rxe0";
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  p.netdev = netdev;
  BOOST_REQUIRE(::inet_pton(AF_INET6, gid_text, p.gid.raw) == 1);
  return p;
}
const std::vector<net::IfAddr> kHost{
    if_addr("eth0", "192.168.1.5", 24),  if_addr("eth1", "10.99.0.1", 16),   if_addr("eth1", "10.20.0.5", 24),
    if_addr("eth1", "fe80::1", 64),      if_addr("eth1", "fd00:1::5", 64),   if_addr("eth2", "fe80::2", 64),
    if_addr("eth2", "fd00:2::7", 64),    if_addr("eth2", "2001:db8::7", 48), if_addr("eth3", "fe80::3", 64),
    if_addr("eth4", "10.40.0.1", -1),    if_addr("eth4", "10.41.0.1", 24),
};
}  // namespace

BOOST_AUTO_TEST_CASE(roce_rail_is_the_gid_address_with_its_netmask) {
  BOOST_TEST(port_rail(roce("eth1", "::ffff:10.20.0.5"), kHost, "/nonexistent").str() == "10.20.0.0/24");
  // A GID that maps no address of the netdev (RoCE v1, link-local): the first IPv4 address.
  BOOST_TEST(port_rail(roce("eth1", "fe80::1"), kHost, "/nonexistent").str() == "10.99.0.0/16");
  BOOST_TEST(port_rail(roce("eth1", "::ffff:10.77.0.5"), kHost, "/nonexistent").str() == "10.99.0.0/16");
}

BOOST_AUTO_TEST_CASE(ipv6_only_netdevs_use_their_global_address) {
  BOOST_TEST(port_rail(roce("eth2", "2001:db8::7"), kHost, "").str() == "2001:db8::/48");
  BOOST_TEST(port_rail(roce("eth2", "fe80::2"), kHost, "").str() == "fd00:2::/64");  // the first global / ULA
  BOOST_TEST(!port_rail(roce("eth3", "fe80::3"), kHost, "").known);                 // link-local only
}

BOOST_AUTO_TEST_CASE(no_address_no_rail) {
  BOOST_TEST(!port_rail(roce("eth9", "::ffff:10.20.0.5"), kHost, "").known);  // not in the list
  BOOST_TEST(!port_rail(roce("", "::ffff:10.20.0.5"), kHost, "").known);
  BOOST_TEST(!port_rail(roce("eth1", "::ffff:10.20.0.5"), {}, "").known);
  // A record without a netmask is passed over, even the GID's own address.
  BOOST_TEST(port_rail(roce("eth4", "::ffff:10.40.0.1"), kHost, "").str() == "10.41.0.0/24");
  net::PortInfo unspecified = roce("eth1", "::ffff:10.20.0.5");
  unspecified.link_layer = IBV_LINK_LAYER_UNSPECIFIED;
  BOOST_TEST(!port_rail(unspecified, kHost, "").known);
}

BOOST_AUTO_TEST_CASE(ib_rail_is_the_subnet_prefix_of_gid_0) {
  const fs::path root = fs::temp_directory_path() / ("nccl-ha-topo-" + std::to_string(::getpid()));
  fs::create_directories(root / "class/infiniband/mlx5_0/ports/1/gids");
  std::ofstream(root / "class/infiniband/mlx5_0/ports/1/gids/0") << "fe80:0000:0000:0001:0002:c903:00f1:2345\n";
  net::PortInfo p;
  p.device = "mlx5_0";
  p.link_layer = IBV_LINK_LAYER_INFINIBAND;
  BOOST_TEST(port_rail(p, kHost, root.string()).str() == "fe80:0:0:1::/64");
  p.device = "mlx5_1";  // no GID file
  BOOST_TEST(!port_rail(p, kHost, root.string()).known);
  fs::remove_all(root);
}

BOOST_AUTO_TEST_CASE(islands_from_the_prefix_length) {
  const NetPrefix rail = v4("10.21.0.0", 24);
  BOOST_TEST(island_of(rail, -1) == rail);  // unset: the rail itself
  BOOST_TEST(island_of(rail, 15).str() == "10.20.0.0/15");
  BOOST_TEST(island_of(rail, 14).str() == "10.20.0.0/14");
  BOOST_TEST(island_of(rail, 0).str() == "0.0.0.0/0");
  BOOST_TEST(island_of(rail, 24) == rail);
  BOOST_TEST(island_of(rail, 40) == rail);   // longer than the rail: clamped to it
  BOOST_TEST(island_of(rail, 128) == rail);
  const NetPrefix r6 = v6("fd00:1:2:3::", 64);
  BOOST_TEST(island_of(r6, 48).str() == "fd00:1:2::/48");  // IPv6: bits of the 128-bit address
  BOOST_TEST(island_of(r6, 100) == r6);
  BOOST_TEST(island_of(v6("fe80:0:0:1::", 64), 15).str() == "fe80::/15");
  BOOST_TEST(!island_of(NetPrefix{}, 15).known);
}

BOOST_AUTO_TEST_CASE(port_topo_from_affinity_and_rail) {
  PortAffinity a;
  a.nic = "0000:03:00";
  a.numa_node = 1;
  const PortTopo t = port_topo(a, v4("10.21.0.0", 24), 15);
  BOOST_TEST(t.rail.str() == "10.21.0.0/24");
  BOOST_TEST(t.island.str() == "10.20.0.0/15");
  BOOST_TEST(t.nic == topo_hash("0000:03:00"));
  BOOST_TEST(t.pcie == 0u);  // unknown switch
  BOOST_TEST(t.numa == 1);
  a.numa_node = -7;
  a.pcie_switch = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  const PortTopo u = port_topo(a, NetPrefix{}, 15);
  BOOST_TEST(!u.rail.known);
  BOOST_TEST(!u.island.known);
  BOOST_TEST(u.numa == -1);
  BOOST_TEST(u.pcie != 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(standby_pairs)

BOOST_AUTO_TEST_CASE(rail_optimised_four_rails_stay_on_their_rail) {
  const auto a = node({0, 1, 2, 3}, 0), b = node({0, 1, 2, 3}, 0);
  const auto pairs = rank_standby_pairs(a, b, {0, 0});
  // Islands are the rails: never a cross-rail pair; rail 1 first (the primary's NUMA node).
  BOOST_TEST(pairs == pairs_of({{1, 1}, {2, 2}, {3, 3}}), pairs);
  for (const auto& p : pairs) BOOST_TEST(rail(a[p.a]) == rail(b[p.b]), pairs);
  BOOST_TEST(explain_pair(a, b, pairs[0], {0, 0}) ==
             "different NIC on both sides, different rail, load 0+0, same NUMA, same PCIe switch");
  BOOST_TEST(explain_pair(a, b, pairs[1], {0, 0}) ==
             "different NIC on both sides, different rail, load 0+0, other NUMA, same PCIe switch");
}

BOOST_AUTO_TEST_CASE(islands_of_two_rails_allow_cross_rail_pairs_inside_only) {
  // HA_NCCL_ISLAND_PREFIX_LEN=15 over 10.20..10.23/24: islands {rail 0, 1} and {rail 2, 3}.
  const auto a = node({0, 1, 2, 3}, 0, 15), b = node({0, 1, 2, 3}, 0, 15);
  BOOST_TEST(a[1].topo.island.str() == "10.20.0.0/15");
  BOOST_TEST(a[2].topo.island.str() == "10.22.0.0/15");
  const auto pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{1, 1}, {2, 2}, {2, 3}, {3, 2}, {3, 3}, {0, 1}, {1, 0}}), pairs);
  for (const auto& p : pairs) BOOST_TEST(rail(a[p.a]) / 2 == rail(b[p.b]) / 2, pairs);
  // Rail 1 of B down: the best pair in the primary's island crosses rails (A rail 1 - B rail 0).
  auto b1 = b;
  b1[1].flags &= static_cast<std::uint8_t>(~kCandUp);
  const auto in_island = rank_standby_pairs(std::span(a).first(2), std::span(b1).first(2), {0, 0});
  BOOST_TEST(in_island == pairs_of({{1, 0}}), in_island);
  BOOST_TEST(explain_pair(a, b1, {1, 0}, {0, 0}) ==
             "different NIC on A, the active port on B, same rail on one side, load 0+0, same NUMA, same PCIe switch");
}

BOOST_AUTO_TEST_CASE(asymmetric_numbering_pairs_by_rail_not_by_index) {
  // B's rxe0 is rail 2, rxe1 rail 3, rxe2 rail 0 (its primary), rxe3 rail 1.
  const auto a = node({0, 1, 2, 3}, 0), b = node({2, 3, 0, 1}, 2);
  const auto pairs = rank_standby_pairs(a, b, {0, 2});
  BOOST_TEST(pairs == pairs_of({{1, 3}, {2, 0}, {3, 1}}), pairs);
  for (const auto& p : pairs) BOOST_TEST(rail(a[p.a]) == rail(b[p.b]), pairs);
}

BOOST_AUTO_TEST_CASE(loads_spread_the_standbys_over_the_rails) {
  auto a = node({0, 1, 2, 3}, 0), b = node({0, 1, 2, 3}, 0);
  std::vector<int> chosen;
  for (int conn = 0; conn < 4; ++conn) {
    const auto pairs = rank_standby_pairs(a, b, {0, 0});
    BOOST_REQUIRE(!pairs.empty());
    chosen.push_back(rail(a[pairs[0].a]));
    ++a[pairs[0].a].load;  // the standby now lives there, on both nodes
    ++b[pairs[0].b].load;
  }
  BOOST_TEST(chosen == (std::vector<int>{1, 2, 3, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_port_that_is_down_is_skipped) {
  const auto a = node({0, 1, 2, 3}, 0);
  auto b = node({0, 1, 2, 3}, 0);
  b[1].flags &= static_cast<std::uint8_t>(~kCandUp);
  auto pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{2, 2}, {3, 3}}), pairs);
  auto a2 = a;
  a2[2].flags = 0;
  pairs = rank_standby_pairs(a2, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{3, 3}}), pairs);
}

// A connection whose own pair is down at one end starts on the best live pair (issue #19 item 1):
// both sides see it from the same lists, and the pairs ranked against the home pair are all live.
BOOST_AUTO_TEST_CASE(a_home_pair_down_at_either_end_starts_on_a_live_pair) {
  const auto a = node({0, 1}, 0), b = node({0, 1}, 0);
  BOOST_TEST(home_pair_up(a, b));
  for (int side = 0; side < 2; ++side) {
    auto x = a, y = b;
    (side == 0 ? x : y)[0].flags &= static_cast<std::uint8_t>(~kCandUp);
    BOOST_TEST(!home_pair_up(x, y));
    BOOST_TEST(!home_pair_up(y, x));
    BOOST_TEST(rank_standby_pairs(x, y, {0, 0}) == pairs_of({{1, 1}}), rank_standby_pairs(x, y, {0, 0}));
  }
  auto none = a;
  for (auto& c : none) c.flags &= static_cast<std::uint8_t>(~kCandPrimary);
  BOOST_TEST(!home_pair_up(none, b));  // no primary listed: nothing to call up
}

// A home pair across islands is never tried (issue #33 item 4: a fused device's member i whose
// ports lie in different islands at the two ends): it is "not up", and the pairs it starts on
// are all inside one island.
BOOST_AUTO_TEST_CASE(a_home_pair_across_islands_starts_on_a_pair_inside_one) {
  const auto a = node({0, 1, 2, 3}, 0, 15), b = node({2, 3, 0, 1}, 0, 15);  // b's device 0 on rail 2
  BOOST_TEST(home_pair_up(a, b));
  BOOST_TEST(!home_pair_reachable(a, b));
  BOOST_TEST(!home_pair_reachable(b, a));
  BOOST_TEST(!home_usable(a, b, true));  // a pair inside an island to start on: the home pair is not tried
  BOOST_TEST(home_usable(a, b, false));  // none: tried as NCCL chose it (it may still work)
  const auto pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(!pairs.empty());
  for (const PortPair& p : pairs)
    BOOST_TEST(reachable(a[static_cast<std::size_t>(p.a)], b[static_cast<std::size_t>(p.b)]), p.a << "," << p.b);
  BOOST_TEST(home_usable(a, node({0, 3, 2, 1}, 0, 15), true));  // rail 0 at both ends
  BOOST_TEST(home_usable(a, node({1, 0, 2, 3}, 0, 15), true));  // rails 0 and 1: one island (10.20.0.0/15)
  auto down = b;
  down[0].flags &= static_cast<std::uint8_t>(~kCandUp);
  BOOST_TEST(!home_usable(a, down, false));  // down is down, whatever else there is
  auto none = a;
  for (auto& c : none) c.flags &= static_cast<std::uint8_t>(~kCandPrimary);
  BOOST_TEST(home_pair_reachable(none, b));  // nothing to say it cannot
}

BOOST_AUTO_TEST_CASE(the_standby_map_preference_wins) {
  auto a = node({0, 1, 2, 3}, 0), b = node({0, 1, 2, 3}, 0);
  a[3].flags |= kCandPreferred;
  auto pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs.front() == (PortPair{3, 3}), pairs);  // one side's map is enough against none
  b[2].flags |= kCandPreferred;
  a[3].flags &= static_cast<std::uint8_t>(~kCandPreferred);
  a[2].flags |= kCandPreferred;
  a[1].load = 9;
  pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{2, 2}, {3, 3}, {1, 1}}), pairs);  // both sides, then load
  BOOST_TEST(explain_pair(a, b, pairs[0], {0, 0}).rfind("HA_NCCL_STANDBY_MAP on both sides, ", 0) == 0u,
             explain_pair(a, b, pairs[0], {0, 0}));
}

BOOST_AUTO_TEST_CASE(another_nic_before_another_port_of_the_same_nic) {
  // One flat subnet. A: a dual-port NIC (devices 0 and 1) and a second NIC (2); B: two NICs.
  const NetPrefix flat = v4("10.20.0.0", 24);
  const std::vector<Candidate> a{cand({.dev = 0, .rail = flat, .nic = "nicA", .flags = kCandUp | kCandPrimary}),
                                 cand({.dev = 1, .rail = flat, .nic = "nicA"}), cand({.dev = 2, .rail = flat, .nic = "nicB"})};
  const std::vector<Candidate> b{cand({.dev = 0, .rail = flat, .nic = "nicC", .flags = kCandUp | kCandPrimary}),
                                 cand({.dev = 1, .rail = flat, .nic = "nicD"})};
  const auto pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{2, 1}, {1, 1}, {0, 1}, {2, 0}, {1, 0}}), pairs);
  BOOST_TEST(explain_pair(a, b, {1, 1}, {0, 0}) ==
             "same NIC, other port on A, different NIC on B, same rail, load 0+0, same NUMA, same PCIe switch");
}

BOOST_AUTO_TEST_CASE(infiniband_subnet_prefixes_are_islands) {
  auto ib = [](int dev, const char* prefix, int island_len, std::uint8_t flags = kCandUp) {
    return cand({.dev = dev, .rail = v6(prefix, 64), .island_len = island_len, .flags = flags,
                 .link_layer = IBV_LINK_LAYER_INFINIBAND});
  };
  std::vector<Candidate> a{ib(0, "fe80::", -1, kCandUp | kCandPrimary), ib(1, "fe80:0:0:1::", -1)};
  a.push_back(cand({.dev = 2}));  // a RoCE port, island unknown: never paired with IB
  const std::vector<Candidate> b{ib(0, "fe80::", -1, kCandUp | kCandPrimary), ib(1, "fe80:0:0:1::", -1)};
  auto pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{1, 1}}), pairs);
  // HA_NCCL_ISLAND_PREFIX_LEN=48: both subnets are one island.
  const std::vector<Candidate> a48{ib(0, "fe80::", 48, kCandUp | kCandPrimary), ib(1, "fe80:0:0:1::", 48)};
  const std::vector<Candidate> b48{ib(0, "fe80::", 48, kCandUp | kCandPrimary), ib(1, "fe80:0:0:1::", 48)};
  pairs = rank_standby_pairs(a48, b48, {0, 0});
  BOOST_TEST(pairs == pairs_of({{1, 1}, {0, 1}, {1, 0}}), pairs);
}

BOOST_AUTO_TEST_CASE(nothing_reachable_gives_no_pair) {
  const auto a = node({0, 1}, 0);
  auto b = node({0, 1}, 0);
  for (auto& c : b) c.topo = cand({.rail = v4(c.dev == 0 ? "10.30.0.0" : "10.31.0.0", 24)}).topo;
  BOOST_TEST(rank_standby_pairs(a, b, {0, 0}).empty());
  const auto one = node({0}, 0);
  BOOST_TEST(rank_standby_pairs(one, one, {0, 0}).empty());  // only the active pair
  BOOST_TEST(rank_standby_pairs({}, one, {0, 0}).empty());
}

BOOST_AUTO_TEST_CASE(unknown_islands_are_allowed_after_known_ones_at_equal_load) {
  auto a = node({0, 1}, 0), b = node({0, 1}, 0);
  a.push_back(cand({.dev = 2}));  // no address: rail and island unknown
  b.push_back(cand({.dev = 2}));
  auto pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{1, 1}, {1, 2}, {2, 1}, {2, 2}, {0, 2}, {2, 0}}), pairs);
  BOOST_TEST(explain_pair(a, b, {2, 2}, {0, 0}).find("rail unknown, load 0+0, island unknown") != std::string::npos,
             explain_pair(a, b, {2, 2}, {0, 0}));
  a[1].load = 3;  // load ranks before certainty
  pairs = rank_standby_pairs(a, b, {0, 0});
  BOOST_TEST(pairs == pairs_of({{2, 1}, {2, 2}, {1, 1}, {1, 2}, {0, 2}, {2, 0}}), pairs);
}

BOOST_AUTO_TEST_CASE(reachability_needs_the_link_layer_and_the_island) {
  const Candidate x = cand({.rail = v4("10.21.0.0", 24), .island_len = 15});
  const Candidate y = cand({.rail = v4("10.20.0.0", 24), .island_len = 15});
  BOOST_TEST(reachable(x, y));
  BOOST_TEST(reachable(y, x));
  Candidate ib = y;
  ib.link_layer = IBV_LINK_LAYER_INFINIBAND;
  BOOST_TEST(!reachable(x, ib));
  // Settings that differ between the nodes: the narrower island decides.
  const Candidate narrow = cand({.rail = v4("10.20.0.0", 24)});
  BOOST_TEST(!reachable(x, narrow));
  BOOST_TEST(reachable(cand({.rail = v4("10.20.0.0", 24), .island_len = 15}), narrow));
  BOOST_TEST(reachable(x, cand({})));  // unknown island: the connection attempt will tell
}

BOOST_AUTO_TEST_CASE(missing_active_ports_count_as_nothing_known) {
  const auto a = node({1, 2}, -1), b = node({1, 2}, -1);
  const auto pairs = rank_standby_pairs(a, b, {7, 7});
  BOOST_TEST(pairs == pairs_of({{0, 0}, {1, 1}}), pairs);
  BOOST_TEST(explain_pair(a, b, {0, 0}, {7, 7}) ==
             "different NIC on both sides, rail unknown, load 0+0, NUMA unknown, PCIe switch unknown");
  BOOST_TEST(explain_pair(a, b, {5, 0}, {7, 7}) == "not among the candidates");
}

BOOST_AUTO_TEST_CASE(the_order_does_not_depend_on_the_input_order) {
  auto a = node({0, 1, 2, 3, 0, 1, 2, 3}, 0, 15), b = node({2, 3, 0, 1, 1, 0, 3, 2}, 2, 15);
  a[5].load = 2;
  b[6].flags |= kCandPreferred;
  b[7].flags = 0;
  a[3].topo = cand({.dev = 3}).topo;  // one unknown
  const auto want = rank_standby_pairs(a, b, {0, 2});
  BOOST_TEST(want.size() > 10u, want);
  std::mt19937 rng(12);
  for (int round = 0; round < 20; ++round) {
    auto sa = a, sb = b;
    std::shuffle(sa.begin(), sa.end(), rng);
    std::shuffle(sb.begin(), sb.end(), rng);
    BOOST_TEST(rank_standby_pairs(sa, sb, {0, 2}) == want, "round " << round);
  }
}

BOOST_AUTO_TEST_SUITE_END()
