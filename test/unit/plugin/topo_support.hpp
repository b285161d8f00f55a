// Builders for the topology and handshake tests: prefixes from text, candidates, address records.
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/topology.hpp"

// Printable in Boost.Test's messages.
namespace nccl_ha::plugin {
inline std::ostream& operator<<(std::ostream& os, const NetPrefix& p) { return os << p.str(); }
inline std::ostream& operator<<(std::ostream& os, const PortPair& p) { return os << "(" << p.a << "," << p.b << ")"; }
inline std::ostream& operator<<(std::ostream& os, const std::vector<PortPair>& v) {
  for (const auto& p : v) os << p;
  return os;
}
}  // namespace nccl_ha::plugin

namespace nccl_ha::test {

// "10.20.0.0", 24 -> 10.20.0.0/24 (len 120); the host bits of `text` are masked off.
inline plugin::NetPrefix v4(const char* text, int bits) {
  std::array<std::uint8_t, 16> a{};
  a[10] = a[11] = 0xff;
  BOOST_REQUIRE(::inet_pton(AF_INET, text, a.data() + 12) == 1);
  return plugin::make_prefix(a, 96 + bits);
}

inline plugin::NetPrefix v6(const char* text, int len) {
  std::array<std::uint8_t, 16> a{};
  BOOST_REQUIRE(::inet_pton(AF_INET6, text, a.data()) == 1);
  return plugin::make_prefix(a, len);
}

// A port as a candidate: its rail, its island (island_of the rail with `island_len`, -1: the
// rail), NIC "nic<dev>" unless given, NUMA node, up.
struct CandSpec {
  int dev = 0;
  plugin::NetPrefix rail{};
  int island_len = -1;
  std::string nic = {};  // "" -> "nic<dev>"
  int numa = 0;
  std::string pcie = "sw0";
  std::uint8_t flags = plugin::kCandUp;
  std::uint16_t load = 0;
  std::uint8_t link_layer = IBV_LINK_LAYER_ETHERNET;
};

inline plugin::Candidate cand(const CandSpec& s) {
  plugin::Candidate c;
  c.dev = static_cast<std::uint8_t>(s.dev);
  c.link_layer = s.link_layer;
  c.flags = s.flags;
  c.load = s.load;
  plugin::PortAffinity a;
  a.nic = s.nic.empty() ? "nic" + std::to_string(s.dev) : s.nic;
  a.pcie_switch = s.pcie;
  a.numa_node = s.numa;
  c.topo = plugin::port_topo(a, s.rail, s.island_len);
  return c;
}

// One address record of `name`: "10.20.0.1" (IPv4) or an IPv6 text, with its netmask length.
inline net::IfAddr if_addr(const std::string& name, const char* text, int prefix_len) {
  net::IfAddr r;
  r.name = name;
  r.up = true;
  r.prefix_len = prefix_len;
  r.family = std::string(text).find(':') == std::string::npos ? AF_INET : AF_INET6;
  BOOST_REQUIRE(::inet_pton(r.family, text, r.addr.data()) == 1);
  return r;
}

}  // namespace nccl_ha::test
