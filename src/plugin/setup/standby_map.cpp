#include "setup/standby_map.hpp"

#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::plugin {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// The ranking of candidate j as the standby port of i: lower is better, compared field by field.
struct Rank {
  int nic;    // 0: a different physical NIC, 1: another port of the same NIC
  int numa;   // 0: same NUMA node, 1: other or unknown
  int pcie;   // 0: same PCIe switch, 1: other or unknown
  int rail;   // 0: different subnet, 1: unknown, 2: same subnet
  std::size_t index;
  auto key() const { return std::tie(nic, numa, pcie, rail, index); }
};

class Selector {
 public:
  Selector(const std::vector<net::PortInfo>& ports, const std::vector<PortAffinity>& affinity)
      : ports_(ports), affinity_(affinity) {}

  const PortAffinity& aff(std::size_t i) const {
    static const PortAffinity kUnknown;
    return i < affinity_.size() ? affinity_[i] : kUnknown;
  }
  std::string nic(std::size_t i) const { return aff(i).nic.empty() ? ports_[i].device : aff(i).nic; }
  std::string name(std::size_t i) const { return ports_[i].device + "/" + std::to_string(ports_[i].port); }

  Rank rank(std::size_t i, std::size_t j) const {
    const PortAffinity &a = aff(i), &b = aff(j);
    Rank r{};
    r.nic = nic(i) == nic(j) ? 1 : 0;
    r.numa = a.numa_node >= 0 && a.numa_node == b.numa_node ? 0 : 1;
    r.pcie = !a.pcie_switch.empty() && a.pcie_switch == b.pcie_switch ? 0 : 1;
    r.rail = a.subnet.empty() || b.subnet.empty() ? 1 : a.subnet != b.subnet ? 0 : 2;
    r.index = j;
    return r;
  }

  // "different NIC, same NUMA node 0, different rail 10.21.0.0/24"
  std::string explain(std::size_t i, std::size_t j) const {
    const PortAffinity &a = aff(i), &b = aff(j);
    std::string s = nic(i) == nic(j) ? "same NIC " + nic(j) : "different NIC";
    if (a.numa_node >= 0 && b.numa_node >= 0)
      s += (a.numa_node == b.numa_node ? ", same NUMA node " : ", other NUMA node ") + std::to_string(b.numa_node);
    else
      s += ", NUMA unknown";
    if (!a.pcie_switch.empty() && !b.pcie_switch.empty())
      s += a.pcie_switch == b.pcie_switch ? ", same PCIe switch" : ", different PCIe switch";
    if (!a.subnet.empty() && !b.subnet.empty())
      s += (a.subnet != b.subnet ? ", different rail " : ", same rail ") + b.subnet;
    else
      s += ", rail unknown";
    return s;
  }

  StandbyChoice automatic(std::size_t i) const {
    if (ports_.size() == 1) return {-1, "only one port"};
    bool found = false;
    Rank best{};
    for (std::size_t j = 0; j < ports_.size(); ++j) {
      if (j == i || ports_[j].link_layer != ports_[i].link_layer) continue;
      Rank r = rank(i, j);
      if (!found || r.key() < best.key()) best = r;
      found = true;
    }
    if (!found)
      return {-1, std::string("no usable standby port: no other ") + net::link_layer_name(ports_[i].link_layer) + " port"};
    return {static_cast<int>(best.index), explain(i, best.index)};
  }

  // Ports named by "rxe0" (every port of the device) or "mlx5_0/2"; nullopt when malformed.
  std::optional<std::vector<std::size_t>> resolve(const std::string& spec) const {
    std::string device = spec;
    std::optional<std::int64_t> port;
    if (auto slash = spec.find('/'); slash != std::string::npos) {
      device = spec.substr(0, slash);
      port = net::parse_int(spec.substr(slash + 1));
      if (!port || *port < 1) return std::nullopt;
    }
    if (device.empty()) return std::nullopt;
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < ports_.size(); ++k)
      if (ports_[k].device == device && (!port || ports_[k].port == static_cast<std::uint64_t>(*port))) out.push_back(k);
    return out;
  }

 private:
  const std::vector<net::PortInfo>& ports_;
  const std::vector<PortAffinity>& affinity_;
};

}  // namespace

std::vector<StandbyChoice> select_standby_ports(const std::vector<net::PortInfo>& ports, const std::vector<PortAffinity>& affinity,
                                                const std::string& map, std::vector<std::string>* warnings) {
  const Selector sel(ports, affinity);
  std::vector<StandbyChoice> out;
  for (std::size_t i = 0; i < ports.size(); ++i) out.push_back(sel.automatic(i));

  auto warn = [&](const std::string& entry, const std::string& why) {
    if (warnings) warnings->push_back("HA_NCCL_STANDBY_MAP: ignoring '" + entry + "': " + why);
  };
  std::vector<bool> mapped(ports.size(), false);
  std::size_t start = 0;
  while (start <= map.size()) {
    std::size_t end = map.find(',', start);
    if (end == std::string::npos) end = map.size();
    const std::string entry = trim(std::string_view(map).substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    const std::size_t colon = entry.find(':');
    if (colon == std::string::npos || entry.find(':', colon + 1) != std::string::npos) {
      warn(entry, "expected PRIMARY:STANDBY (a device name or device/port)");
      continue;
    }
    const std::string lhs = trim(std::string_view(entry).substr(0, colon));
    const std::string rhs = trim(std::string_view(entry).substr(colon + 1));
    const auto primaries = sel.resolve(lhs);
    const auto standbys = sel.resolve(rhs);
    if (!primaries || !standbys) {
      warn(entry, "expected PRIMARY:STANDBY (a device name or device/port)");
      continue;
    }
    if (primaries->empty() || standbys->empty()) {
      warn(entry, "no port '" + (primaries->empty() ? lhs : rhs) + "' among the ports in use");
      continue;
    }
    const std::size_t b = standbys->front();  // a bare device name: its lowest-numbered port
    bool self = false;
    for (std::size_t p : *primaries) self = self || p == b;
    if (self) {
      warn(entry, "maps " + sel.name(b) + " to itself");
      continue;
    }
    for (std::size_t p : *primaries) {
      if (ports[p].link_layer != ports[b].link_layer) {
        warn(entry, sel.name(p) + " is " + net::link_layer_name(ports[p].link_layer) + " but " + sel.name(b) + " is " +
                        net::link_layer_name(ports[b].link_layer));
      } else if (mapped[p]) {
        warn(entry, sel.name(p) + " is already mapped by an earlier entry");
      } else {
        mapped[p] = true;
        out[p] = {static_cast<int>(b), "HA_NCCL_STANDBY_MAP (" + sel.explain(p, b) + ")", true};
      }
    }
  }
  return out;
}

}  // namespace nccl_ha::plugin
