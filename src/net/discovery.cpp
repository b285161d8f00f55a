#include "nccl_ha/net/discovery.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>

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

Expected<PortInfo> query_port(ibv_context* ctx, const std::string& device, std::uint32_t port,
                              const std::string& sysfs_root) {
  ibv_device_attr dattr{};
  if (int rc = ibv_query_device(ctx, &dattr)) return errno_error(Errc::verbs, "ibv_query_device(" + device + ")", rc);
  ibv_port_attr pattr{};
  if (int rc = ibv_query_port(ctx, static_cast<std::uint8_t>(port), &pattr))
    return errno_error(Errc::verbs, "ibv_query_port(" + device + ":" + std::to_string(port) + ")", rc);
  PortInfo info;
  info.device = device;
  info.port = port;
  info.link_layer = pattr.link_layer;
  info.state = pattr.state;
  info.active_mtu = pattr.active_mtu;
  info.lid = pattr.lid;
  info.speed_mbps = lane_speed_mbps(pattr.active_speed) * width_lanes(pattr.active_width);
  info.guid = be64toh(dattr.node_guid);
  info.max_qp = static_cast<std::uint32_t>(dattr.max_qp);
  info.max_cq = static_cast<std::uint32_t>(dattr.max_cq);
  info.max_cqe = static_cast<std::uint32_t>(dattr.max_cqe);
  info.vendor_id = dattr.vendor_id;
  info.max_mr = static_cast<std::uint32_t>(dattr.max_mr);
  if (info.roce() && info.active()) {
    auto table = query_gid_table(ctx, port);
    if (table) {
      auto idx = select_gid_index(*table, info.link_layer, env_int_opt({"HA_NCCL_IB_GID_INDEX", "NCCL_IB_GID_INDEX"}, 0, 255));
      if (idx) {
        info.gid_index = *idx;
        for (const auto& e : *table)
          if (e.index == *idx) info.gid = e.gid;
      } else {
        HA_WARN("NET/HA: %s: %s", info.id().c_str(), idx.error().message.c_str());
      }
    } else {
      HA_WARN("NET/HA: %s: %s", info.id().c_str(), table.error().message.c_str());
    }
  }
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
  return ports;
}

}  // namespace nccl_ha::net
