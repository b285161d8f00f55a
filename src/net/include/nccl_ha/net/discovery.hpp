// Device discovery: one PortInfo per physical port of every verbs device.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nccl_ha/net/device_filter.hpp"
#include "nccl_ha/net/gid.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::net {

struct PortInfo {
  std::string device;        // "rxe0", "mlx5_0"
  std::uint32_t port = 1;
  int link_layer = IBV_LINK_LAYER_UNSPECIFIED;  // IBV_LINK_LAYER_INFINIBAND / _ETHERNET
  ibv_port_state state = IBV_PORT_NOP;
  ibv_mtu active_mtu = IBV_MTU_1024;
  std::uint16_t lid = 0;
  int speed_mbps = 0;        // active lane speed x active width
  std::uint64_t guid = 0;    // node GUID, host byte order
  std::string pci_path;      // sysfs realpath of the PCI function ("" when none)
  int numa_node = -1;
  std::string netdev;        // RoCE: the Ethernet interface behind the port ("" for IB)
  // GID chosen by select_gid_index(); meaningful for RoCE, 0 for IB.
  std::uint32_t gid_index = 0;
  ibv_gid gid{};
  std::uint32_t max_qp = 0;
  std::uint32_t max_cq = 0;
  std::uint32_t max_cqe = 0;  // entries per CQ
  std::uint32_t vendor_id = 0;  // 0xffffff: Soft-RoCE (rxe)
  std::uint32_t max_mr = 0;

  bool active() const noexcept { return state == IBV_PORT_ACTIVE; }
  bool roce() const noexcept { return link_layer == IBV_LINK_LAYER_ETHERNET; }
  std::string id() const { return device + ":" + std::to_string(port); }
};

const char* link_layer_name(int link_layer) noexcept;
const char* port_state_name(ibv_port_state state) noexcept;
int mtu_bytes(ibv_mtu mtu) noexcept;

// Lane speed (Mbps) for ibv_port_attr::active_speed, lanes for active_width; 0 when unknown.
int lane_speed_mbps(std::uint8_t active_speed) noexcept;
int width_lanes(std::uint8_t active_width) noexcept;

struct DiscoveryOptions {
  DeviceFilter filter;           // default: everything
  bool include_inactive = false; // false: only ACTIVE ports
  std::string sysfs_root = "/sys";
};

// Every port that passes the filter, sorted by (device, port). Devices that fail to open or
// query are WARNed about and skipped; a missing verbs library / no devices is an empty list.
std::vector<PortInfo> discover_ports(const DiscoveryOptions& options = {});

// Re-reads one port (state, MTU, GID) - e.g. after a port event.
Expected<PortInfo> query_port(ibv_context* ctx, const std::string& device, std::uint32_t port,
                              const std::string& sysfs_root = "/sys");

// Sysfs helpers (exposed for tests with a fixture root).
std::string sysfs_pci_path(const std::string& sysfs_root, const std::string& device, const std::string& netdev);
int sysfs_numa_node(const std::string& pci_path);
std::string sysfs_gid_netdev(const std::string& sysfs_root, const std::string& device, std::uint32_t port,
                             std::uint32_t gid_index);

}  // namespace nccl_ha::net
