// Backup (shadow path) selection: the plugin's internal PCI/NUMA/rail model of each port
// (ARCHITECTURE.md 2.2) and the deterministic choice of one backup port per primary (2.3).
// It never changes what NCCL is told: NCCL still picks the primary among all reported devices.
#pragma once

#include <string>
#include <vector>

#include "nccl_ha/net/discovery.hpp"

namespace nccl_ha::plugin {

struct PortAffinity {          // the internal PCI/NUMA/rail model of one port
  std::string pci_path;        // sysfs realpath of the PCI function ("" unknown)
  std::string nic;             // physical NIC identity: PCI domain:bus:device without the function (or the verbs device name when no PCI)
  std::string pcie_switch;     // the upstream bridge path shared by devices behind one switch ("" unknown)
  int numa_node = -1;
  std::string subnet;          // rail: IPv4 network of the netdev "10.20.0.0/24" for RoCE, GID subnet prefix hex for IB, "" unknown
};

// The model of one discovered port. pci_path and numa_node come from `p` (looked up again under
// `sysfs_root` when `p` has none). An SR-IOV virtual function counts as its physical function's
// NIC (its "physfn" link). pcie_switch is the upstream port of the innermost switch above the
// function (two bridges up; "" when the function hangs off a root port). `subnet` is used as
// given; "" derives it: RoCE -> netdev_subnet(p.netdev), IB -> the subnet prefix of GID 0 from
// <sysfs_root>/class/infiniband/<dev>/ports/<port>/gids/0 ("fe80:0000:0000:0000").
PortAffinity port_affinity(const net::PortInfo& p, const std::string& sysfs_root, const std::string& subnet);

// "10.20.0.0/24": the network of the first IPv4 address of `netdev` (getifaddrs); "" when none.
std::string netdev_subnet(const std::string& netdev);

struct BackupChoice { int backup = -1; std::string reason; };  // per primary index

// For each port i, the backup port index (or -1 with the reason: "only one port", "no usable
// backup ..."). Rules, in order: never itself; only ports of the same link layer; a different
// physical NIC before another port of the same NIC; then same NUMA node, then same PCIe switch;
// then a different subnet (rail) preferred (unknown subnets rank between different and same);
// ties broken by index (deterministic). `affinity` is indexed like `ports`; a missing entry is
// "all unknown" (the NIC is then the verbs device).
//
// `map` (HA_NCCL_BACKUP_MAP) overrides per primary: "PRIMARY:BACKUP[,PRIMARY:BACKUP...]",
// names are verbs device names ("rxe0") or "device/port" ("mlx5_0/2"). A bare device name as
// PRIMARY means every port of that device in `ports`; as BACKUP its lowest-numbered port there.
// Whitespace around names is ignored, empty entries are skipped. An entry that is malformed,
// names a device/port not in `ports`, maps a port to itself, pairs different link layers or
// repeats a primary already mapped is WARNed about (the text is appended to `warnings`, when
// not null) and ignored; those primaries keep the automatic choice.
std::vector<BackupChoice> select_backups(const std::vector<net::PortInfo>& ports, const std::vector<PortAffinity>& affinity,
                                         const std::string& map, std::vector<std::string>* warnings);

}  // namespace nccl_ha::plugin
