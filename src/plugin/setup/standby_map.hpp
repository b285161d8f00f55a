// The standby map: the deterministic local choice of one first-choice standby port per primary
// (docs/architecture.md, "Where standbys go") from the PCI/NUMA/rail model of each port
// (PortAffinity, topology.hpp), and HA_NCCL_STANDBY_MAP. It never changes what NCCL is told: NCCL
// still picks the primary among all reported devices.
#pragma once

#include <string>
#include <vector>

#include "nccl_ha/net/discovery.hpp"
#include "runtime/topology.hpp"

namespace nccl_ha::plugin {

struct StandbyChoice { int port = -1; std::string reason; bool mapped = false; };  // per primary index; mapped: HA_NCCL_STANDBY_MAP's

// For each port i, its standby port's index (or -1 with the reason: "only one port", "no usable
// standby port ..."). Rules, in order: never itself; only ports of the same link layer; a different
// physical NIC before another port of the same NIC; then same NUMA node, then same PCIe switch;
// then a different subnet (rail) preferred (unknown subnets rank between different and same);
// ties broken by index (deterministic). `affinity` is indexed like `ports`; a missing entry is
// "all unknown" (the NIC is then the verbs device).
//
// `map` (HA_NCCL_STANDBY_MAP) overrides per primary: "PRIMARY:STANDBY[,PRIMARY:STANDBY...]",
// names are verbs device names ("rxe0") or "device/port" ("mlx5_0/2"). A bare device name as
// PRIMARY means every port of that device in `ports`; as STANDBY its lowest-numbered port there.
// Whitespace around names is ignored, empty entries are skipped. An entry that is malformed,
// names a device/port not in `ports`, maps a port to itself, pairs different link layers or
// repeats a primary already mapped is WARNed about (the text is appended to `warnings`, when
// not null) and ignored; those primaries keep the automatic choice.
std::vector<StandbyChoice> select_standby_ports(const std::vector<net::PortInfo>& ports, const std::vector<PortAffinity>& affinity,
                                                const std::string& map, std::vector<std::string>* warnings);

}  // namespace nccl_ha::plugin
