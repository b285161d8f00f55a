// What init tells the operator: the one INFO|INIT line (init_summary) and one INFO line per
// device (log_devices).
#include "api/init_log.hpp"

#include <cstdio>

#include "core/state.hpp"
#include "runtime/config.hpp"
#include "nccl_ha/version.hpp"
#include "runtime/log.hpp"

namespace nccl_ha::plugin {
namespace {

// A railId / planeId as the log lines show it.
std::string id_text(std::int16_t id) { return id < 0 ? std::string("undef") : std::to_string(id); }

// "; relaxed ordering on; dmabuf rxe0:1 no rxe1:1 no": how NCCL's buffers are registered, for the
// INIT line (mr_ops.hpp; relaxed ordering per device when the devices differ).
std::string registration_summary(const State& s) {
  if (s.devices.empty()) return {};
  bool same = true;
  for (const auto& d : s.devices) same = same && d->relaxed_ordering == s.devices.front()->relaxed_ordering;
  std::string ro = "; relaxed ordering", dmabuf = "; dmabuf";
  if (same) ro += s.devices.front()->relaxed_ordering ? " on" : " off";
  for (const auto& d : s.devices) {
    if (!same) ro += " " + d->port.id() + (d->relaxed_ordering ? " on" : " off");
    dmabuf += " " + d->port.id() + (d->dmabuf_offered ? " yes" : d->dmabuf ? " no (disabled)" : " no");
  }
  return ro + dmabuf;
}

// "; adaptive routing above 8192 B on mlx5_0:1 mlx5_1:1": the ports whose larger messages go as a
// plain write and a size notice (NCCL_IB_ADAPTIVE_ROUTING); nothing when no port does.
std::string adaptive_routing_summary(const State& s) {
  std::string ports;
  for (const auto& d : s.devices)
    if (d->ar_threshold != kNoAdaptiveRouting) ports += " " + d->port.id();
  if (ports.empty()) return {};
  return "; adaptive routing above " + std::to_string(s.config.ar_threshold) + " B on" + ports;
}

}  // namespace

std::string init_summary(const State& s) {
  std::string line = std::string("NET/HA: nccl-ha ") + kVersion + " (net API v6-v12): HA " +
                     (s.config.enable_standby ? "on" : "OFF (HA_NCCL_ENABLE_STANDBY=0)") + "; " +
                     std::to_string(s.devices.size()) + " device(s):";
  for (const auto& d : s.devices) {
    line += " [" + std::to_string(d->index) + "] " + d->port.id() + " " + net::link_layer_name(d->port.link_layer) + " " +
            std::to_string(d->port.speed_mbps) + " Mbps rail " + d->topo.rail.str() + " island " + d->topo.island.str() +
            " railId " + id_text(d->rail_id) + " planeId " + id_text(d->plane_id) +
            " maxComms " + std::to_string(d->max_comms) + " standby " +
            (d->standby_port >= 0 ? s.devices[static_cast<std::size_t>(d->standby_port)]->port.id() : std::string("NONE"));
  }
  line += s.config.island_prefix_len < 0 ? std::string("; islands: prefix from the address")
                                         : "; islands: HA_NCCL_ISLAND_PREFIX_LEN=" + std::to_string(s.config.island_prefix_len);
  const Qos q = resolve_qos(s.config, -1);
  char tail[320];
  std::snprintf(tail, sizeof tail,
                "; handshakes on %s (%s); RTO %d ms, heartbeat %d ms, failover timeout %d ms, failback %s; "
                "tc %u sl %u%s; ptrSupport %s; progress thread %s",
                s.handshake_ip.c_str(), s.handshake_if.c_str(), s.config.rto_ms, s.config.heartbeat_ms,
                s.config.failover_timeout_ms, s.config.enable_failback ? "on" : "off", q.traffic_class,
                q.service_level, s.config.ib_tc < 0 ? " (or the communicator's trafficClass)" : "",
                s.gpu_memory ? "HOST|CUDA" : "HOST", kProgressThreadName);
  return line + tail + registration_summary(s) + adaptive_routing_summary(s);
}

void log_devices(const State& s) {
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const Device& d = *s.devices[i];
    const net::PortInfo& p = d.port;
    const PortTopo& t = d.topo;
    HA_INFO("NET/HA: dev %zu: %s %s %s speed %d Mbps mtu %d gid %u pci %s numa %d guid 0x%llx rail %s island %s "
            "nic %08x pcie %08x; NCCL: railId %s planeId %s pciPath %s port %d guid 0x%llx",
            i, p.id().c_str(), net::link_layer_name(p.link_layer), p.netdev.c_str(), p.speed_mbps,
            net::mtu_bytes(p.active_mtu), p.gid_index, p.pci_path.empty() ? "-" : p.pci_path.c_str(), p.numa_node,
            static_cast<unsigned long long>(p.guid), t.rail.str().c_str(), t.island.str().c_str(), t.nic, t.pcie,
            id_text(d.rail_id).c_str(), id_text(d.plane_id).c_str(), d.pci_path.empty() ? "-" : d.pci_path.c_str(),
            d.nccl_port, static_cast<unsigned long long>(p.sys_image_guid));
  }
}

}  // namespace nccl_ha::plugin
