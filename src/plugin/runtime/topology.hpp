// The plugin's model of its ports and of the fabric between two nodes (issue #12):
//
//  * PortAffinity: where a port sits in the host (physical NIC, PCIe switch, NUMA node; sysfs).
//  * Rails and islands: a port's rail is its own network (the netdev's subnet for RoCE, the GID
//    subnet prefix for IB); its island is the rail's address masked to HA_NCCL_ISLAND_PREFIX_LEN
//    bits (unset: the rail itself, i.e. only same-subnet ports reach each other). Ports in
//    different islands never reach each other (rail-optimised fabrics, isolated islands: the
//    classification of /work/shared/seeds/mpib-path-separation.md, generalised to IPv6 and IB).
//  * Candidates: a port as it travels in the handshake (conn_msg.hpp), and the deterministic
//    ranking of the standby pairs of one connection that both ends compute alike.
//
// Everything here but port_affinity() and port_rail() (sysfs) is pure.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_ha/net/discovery.hpp"
#include "nccl_ha/net/socket_if.hpp"

namespace nccl_ha::plugin {

// An address prefix in a 128-bit space: IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d, so an IPv4 /24
// has len 120), IPv6 as is, InfiniBand as the port GID (the subnet prefix is its first 64 bits:
// len 64).
struct NetPrefix {
  std::array<std::uint8_t, 16> addr{};  // host bits zero
  std::uint8_t len = 0;                 // 0..128
  bool known = false;                   // false: no address (unknown); addr/len are then zero
  bool v4() const noexcept;             // addr is IPv4-mapped and len >= 96
  std::string str() const;              // "10.20.0.0/24", "fd00:1::/64", "fe80::/64"; "?" when unknown
  friend bool operator==(const NetPrefix&, const NetPrefix&) = default;
};
// `a` masked to `len` bits (len clamped to 0..128); known.
NetPrefix make_prefix(const std::array<std::uint8_t, 16>& a, int len);
// Whether `inner` lies inside `outer` (both known, outer no longer than inner, same leading bits).
bool prefix_contains(const NetPrefix& outer, const NetPrefix& inner) noexcept;

// The internal PCI/NUMA/rail model of one port (select_standby_ports: standby_map.hpp; PortTopo below).
struct PortAffinity {
  std::string pci_path;     // sysfs realpath of the PCI function ("" unknown)
  std::string nic;          // physical NIC identity: PCI domain:bus:device without the function (or the verbs device name when no PCI)
  std::string pcie_switch;  // the upstream bridge path shared by devices behind one switch ("" unknown)
  int numa_node = -1;
  std::string subnet;       // the rail as text (NetPrefix::str(): "10.20.0.0/24", "fe80::/64"), "" unknown
};

// The model of one discovered port. pci_path and numa_node come from `p` (looked up again under
// `sysfs_root` when `p` has none). An SR-IOV virtual function counts as its physical function's
// NIC (its "physfn" link). pcie_switch is the upstream port of the innermost switch above the
// function (two bridges up; "" when the function hangs off a root port). `subnet` is rail.str()
// for a known rail (port_rail()), else "".
PortAffinity port_affinity(const net::PortInfo& p, const std::string& sysfs_root, const NetPrefix& rail);

// The rail of a port:
//  * RoCE: an address of p.netdev in `addrs` with its netmask (IfAddr::prefix_len): the IPv4
//    address the port's GID maps (::ffff:a.b.c.d), else the netdev's first IPv4 address; a
//    netdev without IPv4: its IPv6 address equal to the GID, else its first global / ULA one
//    (never link-local, loopback or multicast). Records without a netmask are passed over.
//  * IB: the subnet prefix (first 64 bits) of GID 0, <sysfs_root>/class/infiniband/<dev>/ports/<port>/gids/0.
// Unknown when there is none. `addrs`: the host's addresses (getifaddrs), e.g. from a test.
NetPrefix port_rail(const net::PortInfo& p, std::span<const net::IfAddr> addrs, const std::string& sysfs_root);

// The island of a rail: the rail's address masked to `island_prefix_len` bits (IPv4 bits for an
// IPv4 rail: 15 -> len 96 + 15; bits of the 128-bit address for IPv6 and IB rails), never longer
// than the rail; < 0 (HA_NCCL_ISLAND_PREFIX_LEN unset): the rail itself. Unknown rail: unknown.
NetPrefix island_of(const NetPrefix& rail, int island_prefix_len);

// The topology of one local port: what the standby choice needs.
struct PortTopo {
  NetPrefix rail;          // port_rail()
  NetPrefix island;        // island_of(rail, HA_NCCL_ISLAND_PREFIX_LEN)
  std::uint32_t nic = 0;   // topo_hash(PortAffinity::nic): the physical NIC; 0 never used for a known one
  std::uint32_t pcie = 0;  // topo_hash(PortAffinity::pcie_switch), 0 = unknown
  std::int32_t numa = -1;  // NUMA node, -1 unknown
  friend bool operator==(const PortTopo&, const PortTopo&) = default;
};

// FNV-1a (32 bits) of `s`: stable across hosts and builds; "" -> 0 (unknown), a known value never 0.
std::uint32_t topo_hash(std::string_view s) noexcept;

// PortTopo of a port from its affinity and rail (computed once per device at init).
PortTopo port_topo(const PortAffinity& a, const NetPrefix& rail, int island_prefix_len);

// One port as a candidate for a connection's paths, as both sides see it (it travels in the
// handshake: conn_msg.hpp).
struct Candidate {
  std::uint8_t dev = 0;         // the owner's NCCL device index
  std::uint8_t link_layer = 0;  // IBV_LINK_LAYER_INFINIBAND (1) / _ETHERNET (2)
  std::uint8_t flags = 0;       // kCandUp | kCandPrimary | kCandPreferred
  std::uint16_t load = 0;       // connections whose standby is on this port now (saturates at 65535)
  PortTopo topo;                // rail, island, nic, pcie, numa
  friend bool operator==(const Candidate&, const Candidate&) = default;
};
constexpr std::uint8_t kCandUp = 1;         // the port is ACTIVE
constexpr std::uint8_t kCandPrimary = 2;    // the connection's primary port on this side
// HA_NCCL_STANDBY_MAP names it as the standby port of this side's primary; else, for a fused
// device's member, it is the next member's port (CommBase::sibling)
constexpr std::uint8_t kCandPreferred = 4;
constexpr std::uint8_t kCandFlags = kCandUp | kCandPrimary | kCandPreferred;
constexpr std::size_t kMaxCandidates = 32;  // per side, on the wire

// A load count as Candidate::load carries it (saturated at 65535).
constexpr std::uint16_t candidate_load(std::size_t n) noexcept { return n > 0xffff ? 0xffff : static_cast<std::uint16_t>(n); }
// The device of the candidate flagged kCandPrimary (the first one), -1 when none.
int primary_dev(std::span<const Candidate> side) noexcept;
// Whether a connection's own pair of ports (the kCandPrimary candidate of each side) is up at both
// ends. Both sides of a handshake decide from the same two lists: a connection whose pair is down
// starts on another pair (handshake_common.hpp start_on_standby).
bool home_pair_up(std::span<const Candidate> a, std::span<const Candidate> b) noexcept;
// Whether the two primaries can reach each other (reachable: one island; true when either is not
// listed). A pair that cannot (e.g. a fused device's member i whose ports at the two ends lie in
// different islands) is not tried when the connection has a standby pair inside an island: it
// starts there (home_usable); with none it is tried as NCCL chose it.
bool home_pair_reachable(std::span<const Candidate> a, std::span<const Candidate> b) noexcept;
// The connection starts on its own pair: up at both ends, and reachable unless there is no other
// pair to start on (`has_standby_pair`: the listener's offer). Both ends decide alike.
inline bool home_usable(std::span<const Candidate> a, std::span<const Candidate> b, bool has_standby_pair) noexcept {
  return home_pair_up(a, b) && (home_pair_reachable(a, b) || !has_standby_pair);
}

struct PortPair {
  int a = -1;  // device index on side A (the connector / sender)
  int b = -1;  // device index on side B (the listener / receiver)
  friend bool operator==(const PortPair&, const PortPair&) = default;
};

// Whether a port on one side can reach a port on the other: the same link layer, and the same
// island. Two known islands: each port's rail lies in the other's island (with the same
// HA_NCCL_ISLAND_PREFIX_LEN on both nodes that is exactly "the islands are equal"; with different
// settings the narrower one wins, never a pair either side calls isolated). An unknown island on
// either side is allowed: the connection attempt will tell.
bool reachable(const Candidate& x, const Candidate& y) noexcept;

// Standby pairs for a connection whose active path is `active`, best first, deterministic (pure;
// both sides compute the same list from the same inputs). Candidates: every (x in a, y in b) with
// reachable(x, y), both kCandUp, and (x.dev, y.dev) != active. Order (lexicographic, first
// difference wins):
//   1. preferred: both ports kCandPreferred, before one, before none (HA_NCCL_STANDBY_MAP, or a
//      fused device's next member, overrides the automatic order on its side);
//   2. separation from the active pair, per side: 0 = another physical NIC (topo.nic differs, or
//      is unknown on either port), 1 = another port of the same NIC, 2 = the active port itself;
//      the max of the two sides, then the sum;
//   3. rail: how many sides' port is on the same rail (known and equal) as that side's active port;
//   4. load: x.load + y.load (fewest standbys first: a node's connections spread over its ports);
//   5. island certainty: both islands known before one or both unknown;
//   6. NUMA: how many sides' port is on another (or unknown) NUMA node than that side's active port;
//   7. PCIe: how many sides' port is behind another (or unknown) PCIe switch than that side's active port;
//   8. ties: by a.dev, then b.dev ascending.
// `active` devices missing from the lists count as "nothing known" for the comparisons against
// them. Device indices are unique per side (as decode_* guarantee); with repeated ones the
// order among the repeats follows the input.
std::vector<PortPair> rank_standby_pairs(std::span<const Candidate> a, std::span<const Candidate> b, PortPair active);

// Human-readable reason for a pair vs the active one, in the order of the ranking:
// "different NIC on both sides, different rail, load 0+1, same NUMA, same PCIe switch".
std::string explain_pair(std::span<const Candidate> a, std::span<const Candidate> b, PortPair pair, PortPair active);

}  // namespace nccl_ha::plugin
