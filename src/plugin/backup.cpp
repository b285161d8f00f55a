#include "backup.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <bit>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string_view>
#include <tuple>

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::plugin {
namespace {

std::string realpath_or_empty(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

bool all_hex(std::string_view s) {
  for (char ch : s)
    if (!std::isxdigit(static_cast<unsigned char>(ch))) return false;
  return !s.empty();
}

// "0000:03:00.1" (the domain may be longer than 4 digits, e.g. VMD's "10000").
bool is_pci_function(std::string_view s) {
  if (s.size() < 12) return false;
  const std::size_t n = s.size();
  return s[n - 2] == '.' && s[n - 1] >= '0' && s[n - 1] <= '7' && all_hex(s.substr(n - 4, 2)) && s[n - 5] == ':' &&
         all_hex(s.substr(n - 7, 2)) && s[n - 8] == ':' && all_hex(s.substr(0, n - 8));
}

// (component, end offset of the component in `path`) for every PCI function in the path.
std::vector<std::pair<std::string, std::size_t>> pci_functions(const std::string& path) {
  std::vector<std::pair<std::string, std::size_t>> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string comp = path.substr(start, end - start);
    if (is_pci_function(comp)) out.emplace_back(comp, end);
    start = end + 1;
  }
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string ib_gid_prefix(const std::string& sysfs_root, const net::PortInfo& p) {
  std::ifstream in(sysfs_root + "/class/infiniband/" + p.device + "/ports/" + std::to_string(p.port) + "/gids/0");
  std::string gid;
  if (in) std::getline(in, gid);
  // "fe80:0000:0000:0000:0002:c903:00f1:2345": the first four groups are the subnet prefix.
  if (gid.size() < 39 || gid[19] != ':') return {};
  return gid.substr(0, 19);
}

// The ranking of candidate j as the backup of i: lower is better, compared field by field.
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

  BackupChoice automatic(std::size_t i) const {
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
      return {-1, std::string("no usable backup: no other ") + net::link_layer_name(ports_[i].link_layer) + " port"};
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

std::string netdev_subnet(const std::string& netdev) {
  ifaddrs* list = nullptr;
  if (netdev.empty() || ::getifaddrs(&list) != 0) return {};
  std::string out;
  for (ifaddrs* a = list; a && out.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || !a->ifa_netmask || a->ifa_addr->sa_family != AF_INET || netdev != a->ifa_name) continue;
    const std::uint32_t addr = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    const std::uint32_t mask = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
    const in_addr network{htonl(addr & mask)};
    char buf[INET_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET, &network, buf, sizeof buf)) out = std::string(buf) + "/" + std::to_string(std::popcount(mask));
  }
  ::freeifaddrs(list);
  return out;
}

PortAffinity port_affinity(const net::PortInfo& p, const std::string& sysfs_root, const std::string& subnet) {
  PortAffinity a;
  a.pci_path = p.pci_path.empty() ? net::sysfs_pci_path(sysfs_root, p.device, p.netdev) : p.pci_path;
  a.numa_node = p.numa_node >= 0 ? p.numa_node : net::sysfs_numa_node(a.pci_path);
  // A virtual function belongs to the NIC of its physical function.
  std::string physical = a.pci_path.empty() ? std::string() : realpath_or_empty(a.pci_path + "/physfn");
  if (physical.empty()) physical = a.pci_path;
  const auto functions = pci_functions(physical);
  if (!functions.empty()) {
    const std::string& f = functions.back().first;
    a.nic = f.substr(0, f.rfind('.'));  // domain:bus:device
  } else {
    a.nic = p.device;
  }
  // [root port, (switch upstream port, switch downstream port)..., function]: the upstream port
  // of the innermost switch is two levels above the function.
  if (functions.size() >= 3) a.pcie_switch = physical.substr(0, functions[functions.size() - 3].second);
  if (!subnet.empty())
    a.subnet = subnet;
  else if (p.roce())
    a.subnet = netdev_subnet(p.netdev);
  else if (p.link_layer == IBV_LINK_LAYER_INFINIBAND)
    a.subnet = ib_gid_prefix(sysfs_root, p);
  return a;
}

std::vector<BackupChoice> select_backups(const std::vector<net::PortInfo>& ports, const std::vector<PortAffinity>& affinity,
                                         const std::string& map, std::vector<std::string>* warnings) {
  const Selector sel(ports, affinity);
  std::vector<BackupChoice> out;
  for (std::size_t i = 0; i < ports.size(); ++i) out.push_back(sel.automatic(i));

  auto warn = [&](const std::string& entry, const std::string& why) {
    if (warnings) warnings->push_back("HA_NCCL_BACKUP_MAP: ignoring '" + entry + "': " + why);
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
      warn(entry, "expected PRIMARY:BACKUP (a device name or device/port)");
      continue;
    }
    const std::string lhs = trim(std::string_view(entry).substr(0, colon));
    const std::string rhs = trim(std::string_view(entry).substr(colon + 1));
    const auto primaries = sel.resolve(lhs);
    const auto backups = sel.resolve(rhs);
    if (!primaries || !backups) {
      warn(entry, "expected PRIMARY:BACKUP (a device name or device/port)");
      continue;
    }
    if (primaries->empty() || backups->empty()) {
      warn(entry, "no port '" + (primaries->empty() ? lhs : rhs) + "' among the ports in use");
      continue;
    }
    const std::size_t b = backups->front();  // a bare device name: its lowest-numbered port
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
        out[p] = {static_cast<int>(b), "HA_NCCL_BACKUP_MAP (" + sel.explain(p, b) + ")"};
      }
    }
  }
  return out;
}

}  // namespace nccl_ha::plugin
