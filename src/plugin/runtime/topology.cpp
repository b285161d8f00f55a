#include "runtime/topology.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <tuple>

namespace nccl_ha::plugin {
namespace {

// ------------------------------------------------------------------ host model (sysfs)

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

// ------------------------------------------------------------------ addresses

using Addr = std::array<std::uint8_t, 16>;

bool is_v4_mapped(const Addr& a) noexcept {
  return std::all_of(a.begin(), a.begin() + 10, [](std::uint8_t b) { return b == 0; }) && a[10] == 0xff && a[11] == 0xff;
}

// A global or unique-local IPv6 address: not unspecified, loopback, link-local, multicast or IPv4-mapped.
bool is_routable_v6(const Addr& a) noexcept {
  const bool zero_head = std::all_of(a.begin(), a.begin() + 15, [](std::uint8_t b) { return b == 0; });
  if (zero_head && a[15] <= 1) return false;  // :: and ::1
  if (a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)) return false;
  return !is_v4_mapped(a);
}

// An IfAddr as a prefix of the 128-bit space (IPv4 mapped); unknown without a usable netmask.
NetPrefix record_prefix(const net::IfAddr& r) {
  if (r.family == AF_INET && r.prefix_len >= 0 && r.prefix_len <= 32) {
    Addr a{};
    a[10] = a[11] = 0xff;
    std::copy(r.addr.begin(), r.addr.begin() + 4, a.begin() + 12);
    return make_prefix(a, 96 + r.prefix_len);
  }
  if (r.family == AF_INET6 && r.prefix_len >= 0 && r.prefix_len <= 128) return make_prefix(r.addr, r.prefix_len);
  return {};
}

NetPrefix netdev_rail(const std::string& netdev, const Addr& gid, std::span<const net::IfAddr> addrs) {
  if (netdev.empty()) return {};
  const net::IfAddr* v4 = nullptr;
  const net::IfAddr* v6 = nullptr;
  for (const auto& r : addrs) {
    if (r.name != netdev || !record_prefix(r).known) continue;
    if (r.family == AF_INET) {
      const bool is_gid = is_v4_mapped(gid) && std::equal(r.addr.begin(), r.addr.begin() + 4, gid.begin() + 12);
      if (!v4 || is_gid) v4 = &r;
      if (is_gid) break;  // the address the GID maps wins over the first one
    } else if (is_routable_v6(r.addr) && (!v6 || (r.addr == gid && v6->addr != gid))) {
      v6 = &r;  // the first one, or the GID's own address
    }
  }
  if (v4) return record_prefix(*v4);
  return v6 ? record_prefix(*v6) : NetPrefix{};
}

NetPrefix ib_rail(const std::string& sysfs_root, const net::PortInfo& p) {
  std::ifstream in(sysfs_root + "/class/infiniband/" + p.device + "/ports/" + std::to_string(p.port) + "/gids/0");
  std::string text;
  if (in) std::getline(in, text);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  Addr gid{};
  if (::inet_pton(AF_INET6, text.c_str(), gid.data()) != 1) return {};
  return make_prefix(gid, 64);
}

// ------------------------------------------------------------------ ranking

const Candidate* find_dev(std::span<const Candidate> side, int dev) noexcept {
  for (const auto& c : side)
    if (c.dev == dev) return &c;
  return nullptr;
}

const Candidate& nothing_known() {
  static const Candidate kNothing{};
  return kNothing;
}

// How one side's port of a pair compares with that side's active port.
struct SideView {
  int sep = 0;        // 0 another NIC, 1 another port of the same NIC, 2 the active port
  bool same_rail = false;
  bool numa_other = true;  // another or unknown NUMA node
  bool pcie_other = true;  // another or unknown PCIe switch
  bool island_known = false;
  bool preferred = false;
  bool rail_known = false;  // both rails known (for the explanation)
  bool numa_known = false;  // both NUMA nodes known
  bool pcie_known = false;  // both PCIe switches known
};

SideView view(const Candidate& c, int active_dev, const Candidate* act) {
  const Candidate& x = act ? *act : nothing_known();
  SideView v;
  v.sep = c.dev == active_dev ? 2 : (act && c.topo.nic != 0 && c.topo.nic == x.topo.nic ? 1 : 0);
  v.rail_known = c.topo.rail.known && act && x.topo.rail.known;
  v.same_rail = v.rail_known && c.topo.rail == x.topo.rail;
  v.numa_known = c.topo.numa >= 0 && act && x.topo.numa >= 0;
  v.numa_other = !(v.numa_known && c.topo.numa == x.topo.numa);
  v.pcie_known = c.topo.pcie != 0 && act && x.topo.pcie != 0;
  v.pcie_other = !(v.pcie_known && c.topo.pcie == x.topo.pcie);
  v.island_known = c.topo.island.known;
  v.preferred = (c.flags & kCandPreferred) != 0;
  return v;
}

struct PairKey {
  int unpreferred, sep_max, sep_sum, same_rails, load, uncertain, numa, pcie, a, b;
  auto tie() const { return std::tie(unpreferred, sep_max, sep_sum, same_rails, load, uncertain, numa, pcie, a, b); }
};

PairKey key_of(const Candidate& x, const Candidate& y, const SideView& va, const SideView& vb) {
  PairKey k{};
  k.unpreferred = 2 - int(va.preferred) - int(vb.preferred);
  k.sep_max = std::max(va.sep, vb.sep);
  k.sep_sum = va.sep + vb.sep;
  k.same_rails = int(va.same_rail) + int(vb.same_rail);
  k.load = int(x.load) + int(y.load);
  k.uncertain = va.island_known && vb.island_known ? 0 : 1;
  k.numa = int(va.numa_other) + int(vb.numa_other);
  k.pcie = int(va.pcie_other) + int(vb.pcie_other);
  k.a = x.dev;
  k.b = y.dev;
  return k;
}

// "same NUMA", "other NUMA", "NUMA unknown", or per side when the sides differ.
std::string per_side(const char* what, bool known_a, bool other_a, bool known_b, bool other_b) {
  auto word = [](bool known, bool other) { return !known ? "unknown" : other ? "other" : "same"; };
  const std::string wa = word(known_a, other_a), wb = word(known_b, other_b);
  if (wa == wb) return wa == "unknown" ? std::string(what) + " unknown" : wa + " " + what;
  return std::string(what) + " " + wa + " on A, " + wb + " on B";
}

}  // namespace

// ------------------------------------------------------------------ prefixes

bool NetPrefix::v4() const noexcept { return known && len >= 96 && is_v4_mapped(addr); }

std::string NetPrefix::str() const {
  if (!known) return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4()) {
    ::inet_ntop(AF_INET, addr.data() + 12, buf, sizeof buf);
    return std::string(buf) + "/" + std::to_string(len - 96);
  }
  ::inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(len);
}

NetPrefix make_prefix(const std::array<std::uint8_t, 16>& a, int len) {
  NetPrefix p;
  p.known = true;
  p.len = static_cast<std::uint8_t>(std::clamp(len, 0, 128));
  for (int i = 0; i < 16; ++i) {
    const int bits = std::clamp(p.len - 8 * i, 0, 8);  // of this byte, kept
    p.addr[i] = static_cast<std::uint8_t>(a[i] & (0xff00u >> bits));
  }
  return p;
}

bool prefix_contains(const NetPrefix& outer, const NetPrefix& inner) noexcept {
  return outer.known && inner.known && outer.len <= inner.len && make_prefix(inner.addr, outer.len).addr == outer.addr;
}

// ------------------------------------------------------------------ a port's model

PortAffinity port_affinity(const net::PortInfo& p, const std::string& sysfs_root, const NetPrefix& rail) {
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
  if (rail.known) a.subnet = rail.str();
  return a;
}

NetPrefix port_rail(const net::PortInfo& p, std::span<const net::IfAddr> addrs, const std::string& sysfs_root) {
  if (p.link_layer == IBV_LINK_LAYER_INFINIBAND) return ib_rail(sysfs_root, p);
  if (!p.roce()) return {};
  Addr gid{};
  std::copy(std::begin(p.gid.raw), std::end(p.gid.raw), gid.begin());
  return netdev_rail(p.netdev, gid, addrs);
}

NetPrefix island_of(const NetPrefix& rail, int island_prefix_len) {
  if (!rail.known || island_prefix_len < 0) return rail;
  const int want = rail.v4() ? 96 + std::min(island_prefix_len, 32) : island_prefix_len;
  return make_prefix(rail.addr, std::min<int>(want, rail.len));
}

std::uint32_t topo_hash(std::string_view s) noexcept {
  if (s.empty()) return 0;
  std::uint32_t h = 2166136261u;
  for (char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 16777619u;
  }
  return h != 0 ? h : 1;
}

PortTopo port_topo(const PortAffinity& a, const NetPrefix& rail, int island_prefix_len) {
  PortTopo t;
  t.rail = rail;
  t.island = island_of(rail, island_prefix_len);
  t.nic = topo_hash(a.nic);
  t.pcie = topo_hash(a.pcie_switch);
  t.numa = a.numa_node >= 0 ? a.numa_node : -1;
  return t;
}

// ------------------------------------------------------------------ candidates and pairs

int primary_dev(std::span<const Candidate> side) noexcept {
  for (const auto& c : side)
    if (c.flags & kCandPrimary) return c.dev;
  return -1;
}

namespace {
const Candidate* primary_of(std::span<const Candidate> side) noexcept {
  for (const auto& c : side)
    if (c.flags & kCandPrimary) return &c;
  return nullptr;
}
}  // namespace

bool home_pair_up(std::span<const Candidate> a, std::span<const Candidate> b) noexcept {
  const Candidate *x = primary_of(a), *y = primary_of(b);
  return x && y && (x->flags & kCandUp) && (y->flags & kCandUp);
}

bool home_pair_reachable(std::span<const Candidate> a, std::span<const Candidate> b) noexcept {
  const Candidate *x = primary_of(a), *y = primary_of(b);
  return !x || !y || reachable(*x, *y);
}

bool reachable(const Candidate& x, const Candidate& y) noexcept {
  if (x.link_layer != y.link_layer) return false;
  const PortTopo &tx = x.topo, &ty = y.topo;
  if (!tx.island.known || !ty.island.known) return true;
  return prefix_contains(tx.island, ty.rail) && prefix_contains(ty.island, tx.rail);
}

std::vector<PortPair> rank_standby_pairs(std::span<const Candidate> a, std::span<const Candidate> b, PortPair active) {
  const Candidate* act_a = find_dev(a, active.a);
  const Candidate* act_b = find_dev(b, active.b);
  std::vector<PairKey> keys;
  for (const auto& x : a) {
    if (!(x.flags & kCandUp)) continue;
    const SideView va = view(x, active.a, act_a);
    for (const auto& y : b) {
      if (!(y.flags & kCandUp) || (x.dev == active.a && y.dev == active.b) || !reachable(x, y)) continue;
      keys.push_back(key_of(x, y, va, view(y, active.b, act_b)));
    }
  }
  std::stable_sort(keys.begin(), keys.end(), [](const PairKey& l, const PairKey& r) { return l.tie() < r.tie(); });
  std::vector<PortPair> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back({k.a, k.b});
  return out;
}

std::string explain_pair(std::span<const Candidate> a, std::span<const Candidate> b, PortPair pair, PortPair active) {
  const Candidate* x = find_dev(a, pair.a);
  const Candidate* y = find_dev(b, pair.b);
  if (!x || !y) return "not among the candidates";
  const SideView va = view(*x, active.a, find_dev(a, active.a));
  const SideView vb = view(*y, active.b, find_dev(b, active.b));
  static constexpr const char* kSep[] = {"different NIC", "same NIC, other port", "the active port"};
  std::string s;
  if (va.preferred || vb.preferred)
    s = std::string("HA_NCCL_STANDBY_MAP on ") + (va.preferred && vb.preferred ? "both sides" : va.preferred ? "A" : "B") + ", ";
  s += va.sep == vb.sep ? std::string(kSep[va.sep]) + " on both sides"
                        : std::string(kSep[va.sep]) + " on A, " + kSep[vb.sep] + " on B";
  const int same_rails = int(va.same_rail) + int(vb.same_rail);
  if (same_rails == 2)
    s += ", same rail";
  else if (same_rails == 1)
    s += ", same rail on one side";
  else
    s += va.rail_known && vb.rail_known ? ", different rail" : ", rail unknown";
  s += ", load " + std::to_string(x->load) + "+" + std::to_string(y->load);
  if (!va.island_known || !vb.island_known) s += ", island unknown";
  s += ", " + per_side("NUMA", va.numa_known, va.numa_other, vb.numa_known, vb.numa_other);
  s += ", " + per_side("PCIe switch", va.pcie_known, va.pcie_other, vb.pcie_known, vb.pcie_other);
  return s;
}


}  // namespace nccl_ha::plugin
