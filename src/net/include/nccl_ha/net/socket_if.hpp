// The interface and address the plugin's TCP handshakes listen on, chosen with NCCL's rules for
// NCCL_SOCKET_IFNAME (HA_NCCL_SOCKET_IFNAME wins) and NCCL_SOCKET_FAMILY:
//
//   "eth,ens"     interfaces whose names start with eth or ens
//   "=eth0,eth1"  exactly these names ('=' applies to the whole list)
//   "^docker,lo"  every interface except those starting with docker or lo ("^=" excludes exact names)
//
// Empty items are skipped and text after ':' in an item is ignored, as NCCL does; a spec that names
// no interface at all ("^", "=", "^=", ",") is an error (NCCL would ignore a lone '^' or match
// nothing). Unset or empty: automatic.
//
// Pure: the caller lists the host's addresses (getifaddrs) as IfAddr records. Only interfaces
// that are up count. Among the candidates the best address wins: IPv4, then global / ULA IPv6,
// then link-local IPv6 (which needs a scope id) only if nothing else is left; ties go to the
// earlier record. A positive list takes any matching interface, loopback and RDMA netdevs included
// (the user named them). Automatic mode and '^' lists never take loopback, docker* or virbr*, and
// prefer an interface that is not the netdev of an RDMA port (a management network survives rail
// faults) before falling back to one that is. Nothing usable is an error that says what was seen.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::net {

// One address of one interface (getifaddrs gives one entry per address).
struct IfAddr {
  std::string name;
  int family = 0;                       // AF_INET / AF_INET6 (others are ignored)
  std::array<std::uint8_t, 16> addr{};  // network order; IPv4 in the first 4 bytes
  bool up = false;
  bool loopback = false;
  int prefix_len = -1;                  // the netmask's length (ifa_netmask), -1 unknown
};

// A parsed NCCL_SOCKET_IFNAME.
struct SocketIfSpec {
  std::vector<std::string> names;  // prefixes, or exact names with `exact`
  bool exclude = false;
  bool exact = false;
  bool matches(const std::string& ifname) const;  // true when the name is selected (after '^')
};

// Errc::invalid_argument when the spec names no interface.
Expected<SocketIfSpec> parse_socket_ifname(const std::string& spec);

// NCCL_SOCKET_FAMILY: "AF_INET" or "AF_INET6" (exact, as NCCL); anything else is an error.
Expected<int> parse_socket_family(const std::string& value);

struct SocketIfQuery {
  std::string spec;                              // empty: automatic
  std::string spec_var = "NCCL_SOCKET_IFNAME";   // the variable it came from, for messages
  int family = 0;                                // 0: either; AF_INET / AF_INET6: only that one
  std::string family_var = "NCCL_SOCKET_FAMILY";
  std::vector<std::string> rdma_netdevs;         // netdevs of the RDMA ports in use
};

struct SocketIfChoice {
  std::string name;     // interface
  std::string address;  // numeric; a link-local IPv6 address carries its scope: "fe80::1%eth0"
  int family = 0;
  bool link_local = false;
  bool rdma_netdev = false;  // automatic mode had to take an RDMA port's netdev
};

// Errc::invalid_argument for a malformed spec, Errc::not_found when nothing fits; the message
// names the variable and lists what was seen and why it was not taken.
Expected<SocketIfChoice> choose_socket_if(const std::vector<IfAddr>& ifs, const SocketIfQuery& query);

// The numeric text of an address record ("10.0.0.1", "fd00::1"), without scope.
std::string address_text(const IfAddr& a);

}  // namespace nccl_ha::net
