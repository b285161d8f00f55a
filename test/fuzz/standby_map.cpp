// Standby port choice and HA_NCCL_STANDBY_MAP (src/plugin/setup/standby_map.cpp select_standby_ports). Input: line 1 the
// map ("PRIMARY:STANDBY,..."), every further line one port "DEVICE PORT LINK [NIC NUMA SWITCH
// SUBNET]" (LINK 'i' InfiniBand, 'e' Ethernet, else unspecified; the affinity fields optional, '-'
// for unknown). Properties: one choice per port; a standby port is another port of the same link layer
// (or none, with a reason); a malformed or impossible map entry is a warning, never a crash.
#include "fuzz_common.hpp"
#include "nccl_ha/net/env.hpp"
#include "setup/standby_map.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {
std::vector<std::string> words(const std::string& l) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= l.size()) {
    std::size_t sp = l.find(' ', start);
    if (sp == std::string::npos) sp = l.size();
    out.push_back(l.substr(start, sp - start));
    start = sp + 1;
  }
  return out;
}
std::string field(const std::vector<std::string>& w, std::size_t i) { return i < w.size() && w[i] != "-" ? w[i] : ""; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto ls = fuzz::lines(fuzz::text(data, size));
  const std::string map = ls.empty() ? std::string() : ls[0];
  std::vector<net::PortInfo> ports;
  std::vector<PortAffinity> affinity;
  for (std::size_t i = 1; i < ls.size() && ports.size() < 16; ++i) {
    const auto w = words(ls[i]);
    net::PortInfo p;
    p.device = w[0];
    if (auto n = w.size() > 1 ? net::parse_int(w[1]) : std::nullopt; n && *n >= 0 && *n <= 0xffffffff)
      p.port = static_cast<std::uint32_t>(*n);
    const std::string ll = field(w, 2);
    p.link_layer = ll == "i" ? IBV_LINK_LAYER_INFINIBAND : ll == "e" ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_UNSPECIFIED;
    ports.push_back(p);
    if (w.size() > 3) {  // ports without affinity fields leave the vector short: "all unknown"
      PortAffinity a;
      a.nic = field(w, 3);
      if (auto n = net::parse_int(field(w, 4)); n && *n >= -1 && *n < 1024) a.numa_node = static_cast<int>(*n);
      a.pcie_switch = field(w, 5);
      a.subnet = field(w, 6);
      affinity.resize(ports.size() - 1);
      affinity.push_back(a);
    }
  }
  std::vector<std::string> warnings;
  const auto out = select_standby_ports(ports, affinity, map, &warnings);
  FUZZ_REQUIRE(out.size() == ports.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int b = out[i].port;
    FUZZ_REQUIRE(!out[i].reason.empty());
    if (b < 0) {
      FUZZ_REQUIRE(b == -1);
      continue;
    }
    FUZZ_REQUIRE(static_cast<std::size_t>(b) < ports.size() && static_cast<std::size_t>(b) != i);
    FUZZ_REQUIRE(ports[static_cast<std::size_t>(b)].link_layer == ports[i].link_layer);
  }
  for (const auto& w : warnings) FUZZ_REQUIRE(w.rfind("HA_NCCL_STANDBY_MAP: ignoring '", 0) == 0);
  return 0;
}
