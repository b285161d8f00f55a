// Device discovery: one PortInfo per physical port of every verbs device.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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
  int speed_mbps = 0;        // port_speed_mbps(): active lane speed x active width
  std::uint64_t guid = 0;    // node GUID, host byte order (the plugin's own identity of a device)
  // System image GUID, host byte order: the same for every function of one physical adapter; the
  // guid NCCL reports (getProperties: "same guid = same physical port" is NCCL's NIC identity).
  std::uint64_t sys_image_guid = 0;
  std::string pci_path;      // sysfs realpath of the PCI function ("" when none); NCCL's: nccl_pci_path()
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
  // Soft-RoCE (rdma_rxe): a software device, no PCIe DMA of its own.
  bool soft_roce() const noexcept { return vendor_id == 0xffffff; }
  std::string id() const { return device + ":" + std::to_string(port); }
};

const char* link_layer_name(int link_layer) noexcept;
const char* port_state_name(ibv_port_state state) noexcept;
int mtu_bytes(ibv_mtu mtu) noexcept;

// Lane speed (Mbps) for ibv_port_attr::active_speed, lanes for active_width; 0 when unknown.
int lane_speed_mbps(std::uint8_t active_speed) noexcept;
int width_lanes(std::uint8_t active_width) noexcept;

// The port's speed in Mbps as NCCL's IB transport computes it from ibv_port_attr: the lane rate of
// `active_speed_ex` when non-zero (rdma-core >= 49; XDR = 0x100 and beyond), else of
// `active_speed`, times the lanes of `active_width`. Each encoding is read at its first set bit
// (NCCL's rule): speed bits 0..8 = SDR 2.5, DDR 5, QDR 10, FDR10 10, FDR 14, EDR 25, HDR 50,
// NDR 100, XDR 200 Gb/s per lane; width bits 0..4 = 1x, 4x, 8x, 12x, 2x. An encoding with no known
// bit reads as the table's last entry (XDR, 2x), as NCCL reads it: never 0.
int port_speed_mbps(std::uint8_t active_width, std::uint8_t active_speed, std::uint32_t active_speed_ex) noexcept;

// Ports not ACTIVE when they were discovered (net_ib leaves them out; the plugin lists them, so
// that a job restarted while a port is down numbers its devices as the other ranks do) have no
// negotiated speed: each takes the fastest speed of the ACTIVE ports of its link layer (its NIC's
// siblings, so NCCL's topology sees the rails alike), or keeps its own when no port is ACTIVE.
// Returns the indices of the ports it changed.
std::vector<std::size_t> settle_inactive_speeds(std::vector<PortInfo>& ports);

// The PCI path as NCCL reports it (net_ib ncclIbGetPciPath): when the last component of
// `full_path` is a PCI address DDDD:BB:DD.F, its function digit becomes 0 (the ports of a
// multi-function NIC are one PCI device) and, with `merge_vfs` (NCCL_IB_MERGE_VFS, default 1),
// its two device digits too (virtual functions merge with their NIC). Any other path (Soft-RoCE:
// the netdev's device, e.g. .../0000:00:03.0/virtio0; "" when none) is returned as is.
std::string nccl_pci_path(const std::string& full_path, bool merge_vfs);
// Whether `component` (one path component) is a PCI address DDDD:BB:DD.F (hex digits).
bool is_pci_bdf(std::string_view component) noexcept;
// NCCL's "real port" of each of `nccl_paths` (nccl_pci_path() of the plugin's devices, in device
// order): how many earlier devices share its path ("" shares with none). NCCL reports port
// number + real port, so ports merged onto one PCI device stay distinct. (NCCL compares its
// merged paths up to the bus, or up to the device without VF merging: for merged BDF paths that
// is equality.)
std::vector<int> nccl_real_ports(const std::vector<std::string>& nccl_paths);

// The sort key NCCL gives a device's PCI path (net_ib with NCCL_IB_DEVICE_PCI_ORDER, default 1):
// the PCI address DDDD:BB:DD.F as one number, domain << 20 | bus << 12 | device << 4 | function.
// Taken from the last component of `full_path` that is a PCI address, so a Soft-RoCE port on
// .../0000:00:13.0/virtio3 sorts by its virtio NIC's function; none (no path, no PCI address
// in it) is nullopt.
std::optional<std::int64_t> pci_order_key(std::string_view full_path) noexcept;
// Sorts `ports` the way net_ib orders its devices, so every rank numbers the NICs alike whatever
// order the verbs library lists them in: by pci_order_key, ports with none after all others;
// ties (the ports of one device, devices without a PCI path) by (device name, port).
void sort_pci_order(std::vector<PortInfo>& ports);

struct DiscoveryOptions {
  DeviceFilter filter;           // default: everything
  bool include_inactive = false; // false: only ACTIVE ports
  bool pci_order = true;         // sort_pci_order (NCCL_IB_DEVICE_PCI_ORDER); false: by (device, port)
  std::string sysfs_root = "/sys";
};

// Every port that passes the filter, in PCI order (options.pci_order) or by (device, port).
// Devices that fail to open or query are WARNed about and skipped; a missing verbs library / no
// devices is an empty list.
std::vector<PortInfo> discover_ports(const DiscoveryOptions& options = {});

// Re-reads one port (state, MTU, GID) - e.g. after a port event.
Expected<PortInfo> query_port(ibv_context* ctx, const std::string& device, std::uint32_t port,
                              const std::string& sysfs_root = "/sys");

// Re-reads what a new endpoint takes from the port, cheaply (no sysfs, no device query): state,
// active MTU, LID and, on an active RoCE port, the GID (its index selected again, as
// query_port does). The rest of `info` is kept. For every QP a connection builds: a port whose
// address changed since discovery (a new IP, an SM that moved its LID) is addressed as it is now.
Status refresh_address(ibv_context* ctx, PortInfo& info);

// Sysfs helpers (exposed for tests with a fixture root).
std::string sysfs_pci_path(const std::string& sysfs_root, const std::string& device, const std::string& netdev);
int sysfs_numa_node(const std::string& pci_path);
std::string sysfs_gid_netdev(const std::string& sysfs_root, const std::string& device, std::uint32_t port,
                             std::uint32_t gid_index);

}  // namespace nccl_ha::net
