#include "nccl_ha/net/discovery.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <tuple>

#include "nccl_ha/net/env.hpp"
#include "nccl_ha/net/verbs.hpp"
#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::net {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

std::string realpath_or_empty(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return {};
  return buf;
}

// ibv_port_attr with the field rdma-core 49 appended (libibverbs/verbs.h, "verbs: Add support for
// XDR speed in ibv_query_port", 2023): `uint32_t active_speed_ex` right after `port_cap_flags2`,
// at offset 52 on LP64, the struct growing from 52 to 56 bytes. The headers built against may be
// older (rdma-core 44 here), the library found at run time newer or older: the size travels with
// the query (verbs_context::query_port(ctx, port, attr, sizeof attr), as ibv_query_port() passes
// sizeof(*port_attr)). The library's __lib_query_port zeroes the caller's `len` bytes and lets the
// provider fill its own struct when `len` covers it, else queries into a temporary struct of its
// own size and copies `len` bytes back. So with 56 bytes a library without the field leaves it 0,
// one with it fills it, and a future larger struct is cut to ours: never a write past the end.
struct PortAttrEx {
  ibv_port_attr attr;
  std::uint32_t appended_speed_ex;  // active_speed_ex when the headers lack it
};
template <class Attr>
constexpr bool kHasSpeedEx = requires(const Attr& a) { a.active_speed_ex; };
constexpr bool kHeadersHaveSpeedEx = kHasSpeedEx<ibv_port_attr>;
static_assert(kHeadersHaveSpeedEx || (sizeof(ibv_port_attr) == 52 && offsetof(PortAttrEx, appended_speed_ex) == 52 &&
                                      sizeof(PortAttrEx) == 56),
              "ibv_port_attr is not rdma-core's v44 layout: recheck where active_speed_ex lands");

template <class Attr>
std::uint32_t speed_ex_of(const Attr& a, std::uint32_t appended) {
  if constexpr (kHasSpeedEx<Attr>)
    return a.active_speed_ex;
  else
    return appended;
}

// ibv_query_port with room for active_speed_ex (0 when the library does not know it).
int query_port_ex(ibv_context* ctx, std::uint8_t port, PortAttrEx& out) {
  out = PortAttrEx{};
  verbs_context* v = verbs_get_ctx(ctx);
  const bool has_op = v && v->sz >= sizeof(*v) - offsetof(verbs_context, query_port) && v->query_port;
  if (!has_op) return ibv_query_port(ctx, port, &out.attr);  // a library from before the sized op
  return v->query_port(ctx, port, &out.attr, sizeof out);
}

// ibv_query_port_speed (rdma-core 62+, IBVERBS_1.16): the effective speed in units of 100 Mb/s,
// what NCCL prefers when the library has it. Looked up in the libibverbs already loaded (the
// plugin may be loaded RTLD_LOCAL: not through RTLD_DEFAULT); 0 when absent or unsupported by the
// provider (EOPNOTSUPP from the library's default op).
using QueryPortSpeedFn = int (*)(ibv_context*, std::uint32_t, std::uint64_t*);

long long query_port_speed_mbps(ibv_context* ctx, std::uint32_t port) {
  // Looked up once: ports are re-read after every port event (re-protection, flush QPs).
  static const auto fn = reinterpret_cast<QueryPortSpeedFn>(loaded_verbs_symbol("ibv_query_port_speed"));
  std::uint64_t speed = 0;
  return fn && fn(ctx, port, &speed) == 0 ? static_cast<long long>(speed) * 100 : 0;
}

}  // namespace

const char* link_layer_name(int link_layer) noexcept {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND: return "IB";
    case IBV_LINK_LAYER_ETHERNET: return "RoCE";
    default: return "unspecified";
  }
}

const char* port_state_name(ibv_port_state state) noexcept { return ibv_port_state_str(state); }

int mtu_bytes(ibv_mtu mtu) noexcept {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

// ibv_port_attr::active_speed encoding (IBTA): per-lane signalling rate.
int lane_speed_mbps(std::uint8_t active_speed) noexcept {
  switch (active_speed) {
    case 1: return 2500;     // SDR
    case 2: return 5000;     // DDR
    case 4: return 10000;    // QDR
    case 8: return 10000;    // FDR10
    case 16: return 14000;   // FDR
    case 32: return 25000;   // EDR
    case 64: return 50000;   // HDR
    case 128: return 100000; // NDR
    default: return 0;
  }
}

int width_lanes(std::uint8_t active_width) noexcept {
  switch (active_width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

namespace {

// Lane rate (Mbps) of bit `bit` of a speed encoding. No bit, or one past the table: the table's
// last entry, as NCCL reads an encoding it does not know (net_ib ncclIbSpeed: the first set bit
// below the last index, else the last), so a new encoding is never a speed of 0.
int lane_rate_at_bit(int bit) noexcept {
  static constexpr int kRates[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  constexpr int last = static_cast<int>(std::size(kRates)) - 1;
  return kRates[bit >= 0 && bit < last ? bit : last];
}

int lanes_at_bit(int bit) noexcept {
  static constexpr int kLanes[] = {1, 4, 8, 12, 2};
  constexpr int last = static_cast<int>(std::size(kLanes)) - 1;
  return kLanes[bit >= 0 && bit < last ? bit : last];
}

int first_bit(std::uint32_t v) noexcept { return v ? std::countr_zero(v) : -1; }

}  // namespace

int port_speed_mbps(std::uint8_t active_width, std::uint8_t active_speed, std::uint32_t active_speed_ex) noexcept {
  const std::uint32_t speed = active_speed_ex ? active_speed_ex : active_speed;
  return lane_rate_at_bit(first_bit(speed)) * lanes_at_bit(first_bit(active_width));
}

std::vector<std::size_t> settle_inactive_speeds(std::vector<PortInfo>& ports) {
  std::vector<std::size_t> changed;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].active()) continue;
    int fastest = 0;
    for (const auto& p : ports)
      if (p.active() && p.link_layer == ports[i].link_layer) fastest = std::max(fastest, p.speed_mbps);
    if (fastest > 0 && fastest != ports[i].speed_mbps) {
      ports[i].speed_mbps = fastest;
      changed.push_back(i);
    }
  }
  return changed;
}

bool is_pci_bdf(std::string_view c) noexcept {
  // DDDD:BB:DD.F; a domain may have more than 4 digits (e.g. VMD's 10000:00:00.0).
  auto hex = [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; };
  if (c.size() < 12) return false;
  const std::string_view tail = c.substr(c.size() - 8);  // ":BB:DD.F"
  const std::string_view domain = c.substr(0, c.size() - 8);
  return tail[0] == ':' && hex(tail[1]) && hex(tail[2]) && tail[3] == ':' && hex(tail[4]) && hex(tail[5]) &&
         tail[6] == '.' && tail[7] >= '0' && tail[7] <= '7' && std::all_of(domain.begin(), domain.end(), hex);
}

std::optional<std::int64_t> pci_order_key(std::string_view full_path) noexcept {
  while (!full_path.empty()) {
    const std::size_t slash = full_path.rfind('/');
    const std::string_view last = slash == std::string_view::npos ? full_path : full_path.substr(slash + 1);
    if (is_pci_bdf(last)) {
      std::int64_t key = 0;
      for (const char ch : last) {
        if (ch == ':' || ch == '.') continue;
        const int digit = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0' : std::tolower(ch) - 'a' + 10;
        key = key << 4 | digit;
      }
      return key;
    }
    full_path = slash == std::string_view::npos ? std::string_view{} : full_path.substr(0, slash);
  }
  return std::nullopt;
}

void sort_pci_order(std::vector<PortInfo>& ports) {
  struct Keyed {
    std::optional<std::int64_t> key;
    PortInfo port;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(ports.size());
  for (auto& p : ports) keyed.push_back({pci_order_key(p.pci_path), std::move(p)});
  // A total order (a port's device and number are unique): no stable sort needed.
  auto rank = [](const Keyed& k) { return std::tuple(!k.key.has_value(), k.key.value_or(0)); };
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return std::tie(a.port.device, a.port.port) < std::tie(b.port.device, b.port.port);
  });
  for (std::size_t i = 0; i < ports.size(); ++i) ports[i] = std::move(keyed[i].port);
}

std::string nccl_pci_path(const std::string& full_path, bool merge_vfs) {
  const std::size_t slash = full_path.rfind('/');
  const std::string_view last = std::string_view(full_path).substr(slash == std::string::npos ? 0 : slash + 1);
  if (!is_pci_bdf(last)) return full_path;
  std::string p = full_path;
  const std::size_t n = p.size();
  p[n - 1] = '0';                       // function
  if (merge_vfs) p[n - 3] = p[n - 4] = '0';  // device
  return p;
}

std::vector<int> nccl_real_ports(const std::vector<std::string>& nccl_paths) {
  std::vector<int> real(nccl_paths.size(), 0);
  for (std::size_t i = 0; i < nccl_paths.size(); ++i)
    if (!nccl_paths[i].empty())
      real[i] = static_cast<int>(std::count(nccl_paths.begin(), nccl_paths.begin() + static_cast<std::ptrdiff_t>(i),
                                            nccl_paths[i]));
  return real;
}

std::string sysfs_gid_netdev(const std::string& sysfs_root, const std::string& device, std::uint32_t port,
                             std::uint32_t gid_index) {
  return read_first_line(sysfs_root + "/class/infiniband/" + device + "/ports/" + std::to_string(port) +
                         "/gid_attrs/ndevs/" + std::to_string(gid_index));
}

std::string sysfs_pci_path(const std::string& sysfs_root, const std::string& device, const std::string& netdev) {
  // A hardware HCA has a device link; a software device (rxe, siw) sits on a netdev that has one.
  std::string p = realpath_or_empty(sysfs_root + "/class/infiniband/" + device + "/device");
  if (p.empty() && !netdev.empty()) p = realpath_or_empty(sysfs_root + "/class/net/" + netdev + "/device");
  return p;
}

int sysfs_numa_node(const std::string& pci_path) {
  // The function itself, or (virtio: .../0000:00:03.0/virtio0) its parent.
  std::string p = pci_path;
  for (int up = 0; up < 2 && !p.empty(); ++up) {
    std::string v = read_first_line(p + "/numa_node");
    if (!v.empty()) {
      auto n = parse_int(v);
      return n ? static_cast<int>(*n) : -1;
    }
    p = p.substr(0, p.rfind('/'));
  }
  return -1;
}

namespace {

// The GID a RoCE port is addressed by: its table read, the index selected (HA_NCCL_IB_GID_INDEX /
// NCCL_IB_GID_INDEX, else select_gid_index's rule) and both stored in `info`.
Status read_gid(ibv_context* ctx, PortInfo& info) {
  auto table = query_gid_table(ctx, info.port);
  if (!table) return std::move(table).error();
  auto idx = select_gid_index(*table, info.link_layer, env_int_opt({"HA_NCCL_IB_GID_INDEX", "NCCL_IB_GID_INDEX"}, 0, 255));
  if (!idx) return std::move(idx).error();
  info.gid_index = *idx;
  for (const auto& e : *table)
    if (e.index == *idx) info.gid = e.gid;
  return {};
}

}  // namespace

Status refresh_address(ibv_context* ctx, PortInfo& info) {
  ibv_port_attr pattr{};
  if (int rc = ibv_query_port(ctx, static_cast<std::uint8_t>(info.port), &pattr))
    return errno_error(Errc::verbs, "ibv_query_port(" + info.id() + ")", rc);
  info.state = pattr.state;
  info.active_mtu = pattr.active_mtu;
  info.lid = pattr.lid;
  if (!info.roce() || !info.active()) return {};
  return read_gid(ctx, info);
}

Expected<PortInfo> query_port(ibv_context* ctx, const std::string& device, std::uint32_t port,
                              const std::string& sysfs_root) {
  ibv_device_attr dattr{};
  if (int rc = ibv_query_device(ctx, &dattr)) return errno_error(Errc::verbs, "ibv_query_device(" + device + ")", rc);
  PortAttrEx ex;
  if (int rc = query_port_ex(ctx, static_cast<std::uint8_t>(port), ex))
    return errno_error(Errc::verbs, "ibv_query_port(" + device + ":" + std::to_string(port) + ")", rc);
  const ibv_port_attr& pattr = ex.attr;
  PortInfo info;
  info.device = device;
  info.port = port;
  info.link_layer = pattr.link_layer;
  info.state = pattr.state;
  info.active_mtu = pattr.active_mtu;
  // NCCL's order: the library's effective speed, else the port attributes' encodings.
  const long long effective = query_port_speed_mbps(ctx, port);
  info.speed_mbps = effective > 0 && effective <= INT_MAX
                        ? static_cast<int>(effective)
                        : port_speed_mbps(pattr.active_width, pattr.active_speed, speed_ex_of(pattr, ex.appended_speed_ex));
  info.lid = pattr.lid;  // IB's address of the port (RoCE addresses by GID: below)
  info.guid = be64toh(dattr.node_guid);
  info.sys_image_guid = be64toh(dattr.sys_image_guid);
  info.max_qp = static_cast<std::uint32_t>(dattr.max_qp);
  info.max_cq = static_cast<std::uint32_t>(dattr.max_cq);
  info.max_cqe = static_cast<std::uint32_t>(dattr.max_cqe);
  info.vendor_id = dattr.vendor_id;
  info.max_mr = static_cast<std::uint32_t>(dattr.max_mr);
  if (info.roce() && info.active())
    if (auto s = read_gid(ctx, info); !s) HA_WARN("NET/HA: %s: %s", info.id().c_str(), s.error().message.c_str());
  if (info.roce()) {
    // The netdev is a property of the port; GID 0 (link-local) always exists while it is up.
    info.netdev = sysfs_gid_netdev(sysfs_root, device, port, info.gid_index);
    if (info.netdev.empty()) info.netdev = sysfs_gid_netdev(sysfs_root, device, port, 0);
  }
  info.pci_path = sysfs_pci_path(sysfs_root, device, info.netdev);
  info.numa_node = sysfs_numa_node(info.pci_path);
  return info;
}

std::vector<PortInfo> discover_ports(const DiscoveryOptions& options) {
  std::vector<PortInfo> ports;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) {
    HA_INFO("NET/HA: no verbs devices (ibv_get_device_list: errno %d)", errno);
    return ports;
  }
  for (int i = 0; i < n; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    ContextPtr ctx(ibv_open_device(list[i]));
    if (!ctx) {
      HA_WARN("NET/HA: cannot open %s (errno %d); skipping it", name.c_str(), errno);
      continue;
    }
    ibv_device_attr dattr{};
    if (ibv_query_device(ctx.get(), &dattr) != 0) {
      HA_WARN("NET/HA: cannot query %s; skipping it", name.c_str());
      continue;
    }
    for (std::uint32_t port = 1; port <= dattr.phys_port_cnt; ++port) {
      if (!options.filter.matches(name, port)) continue;
      auto info = query_port(ctx.get(), name, port, options.sysfs_root);
      if (!info) {
        HA_WARN("NET/HA: %s", info.error().message.c_str());
        continue;
      }
      if (!options.include_inactive && !info->active()) {
        HA_INFO("NET/HA: %s is %s; not used", info->id().c_str(), port_state_name(info->state));
        continue;
      }
      ports.push_back(std::move(info).value());
    }
  }
  ibv_free_device_list(list);
  std::sort(ports.begin(), ports.end(),
            [](const PortInfo& a, const PortInfo& b) { return a.device != b.device ? a.device < b.device : a.port < b.port; });
  if (options.pci_order) sort_pci_order(ports);
  return ports;
}

}  // namespace nccl_ha::net
