// init / devices / getProperties: honest per-port devices and the resource budget.
#include <ifaddrs.h>
#include <unistd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <list>
#include <mutex>

#include "api/init.hpp"
#include "api/init_log.hpp"
#include "core/state.hpp"
#include "datapath/p2p.hpp"
#include "ha/attempt_gate.hpp"
#include "ha/control_ops.hpp"
#include "ha/liveness.hpp"
#include "ha/profiler.hpp"
#include "ha/rescue.hpp"
#include "nccl_ha/net/env.hpp"
#include "nccl_ha/net/socket_if.hpp"
#include "nccl_ha/reactor/fd_watcher.hpp"
#include "runtime/gdr.hpp"
#include "runtime/log.hpp"
#include "runtime/stripe_weights.hpp"
#include "runtime/vdevice.hpp"
#include "setup/setup.hpp"
#include "setup/standby_map.hpp"

namespace nccl_ha::plugin {
namespace {

std::mutex g_init_mutex;
std::unique_ptr<State> g_state;     // guarded by g_init_mutex for creation/destruction
std::atomic<State*> g_state_ptr{nullptr};
// v11+ contexts alive, one per communicator (g_init_mutex); a context is the address of its
// element (std::list: stable addresses).
std::list<CommParams> g_contexts;

// Budget: every comm will own 2 paths (primary + standby) of `qps.count` QPs each and one CQ each,
// NCCL runs ~16 channels per peer, each connection keeps up to 64 work requests in flight and the
// send side must absorb maxRecvs completions per request (a split message: one per QP). Flush QPs
// (HA_NCCL_FORCE_FLUSH, GPU memory) add a loopback QP and CQ per device to every receive comm: 3
// per comm on average.
int compute_max_comms(const net::PortInfo& p, bool flush_qps, QpPlan qps, bool log) {
  const long kCqsPerComm = flush_qps ? 3 : 2;
  const long kQpsPerComm = 2L * qps.count + (flush_qps ? 1 : 0);
  constexpr long kChannels = 16, kWrPerConn = 64;
  const long qp_limit = static_cast<long>(p.max_qp) / (kQpsPerComm * kChannels);
  const long cqe_per_comm = (kWrPerConn * kMaxRecvs + kWrPerConn) * (qps.split ? qps.count : 1);
  const long cqe_budget = static_cast<long>(p.max_cqe) * std::max<long>(1, std::min<long>(p.max_cq, 1024));
  const long cqe_limit = cqe_budget / (cqe_per_comm * kCqsPerComm * kChannels);
  const long mr_limit = static_cast<long>(p.max_mr) / (4 * kChannels);  // FIFO MRs + user buffers
  const long result = std::max<long>(1, std::min({qp_limit, cqe_limit, mr_limit, 256L}));
  if (log)
    HA_INFO("NET/HA: %s maxComms budget: max_qp %u -> %ld, max_cqe %u x max_cq %u -> %ld, max_mr %u -> %ld; "
            "maxComms = min(..., 256) = %ld (%ld QPs/comm, %ld channels, %ld WRs, maxRecvs %d)",
            p.id().c_str(), p.max_qp, qp_limit, p.max_cqe, p.max_cq, cqe_limit, p.max_mr, mr_limit, result,
            kQpsPerComm, kChannels, kWrPerConn, kMaxRecvs);
  return static_cast<int>(result);
}

// The host's IPv4 / IPv6 addresses as records for net::choose_socket_if().
std::vector<net::IfAddr> host_addresses() {
  std::vector<net::IfAddr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    HA_WARN("NET/HA: getifaddrs failed: %s", std::strerror(errno));
    return out;
  }
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_name) continue;
    net::IfAddr a;
    a.name = i->ifa_name;
    a.family = i->ifa_addr->sa_family;
    a.up = (i->ifa_flags & IFF_UP) != 0;
    a.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    std::array<std::uint8_t, 16> mask{};
    if (a.family == AF_INET) {
      std::memcpy(a.addr.data(), &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
      if (i->ifa_netmask) std::memcpy(mask.data(), &reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr, 4);
    } else if (a.family == AF_INET6) {
      std::memcpy(a.addr.data(), &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
      if (i->ifa_netmask) std::memcpy(mask.data(), &reinterpret_cast<const sockaddr_in6*>(i->ifa_netmask)->sin6_addr, 16);
    } else {
      continue;
    }
    if (i->ifa_netmask) {  // the leading one bits
      a.prefix_len = 0;
      for (std::size_t k = 0; k < mask.size() && mask[k] == 0xff; ++k) a.prefix_len += 8;
      if (a.prefix_len < 128) a.prefix_len += std::countl_one(mask[static_cast<std::size_t>(a.prefix_len / 8)]);
    }
    out.push_back(std::move(a));
  }
  freeifaddrs(list);
  return out;
}

// The address handles advertise (net/socket_if.hpp: NCCL's NCCL_SOCKET_IFNAME / _FAMILY rules).
// Nothing usable fails init: a silent 127.0.0.1 would only fail later, on the peer's host.
ncclResult_t pick_handshake_address(State& s, const std::vector<net::IfAddr>& addrs) {
  net::SocketIfQuery q;
  q.spec = s.config.socket_ifname;
  q.spec_var = s.config.socket_ifname_var;
  q.family = s.config.socket_family;
  q.family_var = s.config.socket_family_var;
  for (const auto& d : s.devices)
    if (!d->port.netdev.empty()) q.rdma_netdevs.push_back(d->port.netdev);
  auto choice = net::choose_socket_if(addrs, q);
  if (!choice) {
    HA_WARN("NET/HA: %s", choice.error().message.c_str());
    return choice.error().code == Errc::invalid_argument ? ncclInvalidUsage : ncclSystemError;
  }
  s.handshake_ip = choice->address;
  s.handshake_if = choice->name;
  if (choice->link_local)
    HA_INFO("NET/HA: handshakes on the link-local %s: the handle carries its scope id and the peer uses it as "
            "its own (NCCL's rule: %s must have the same interface index on every host)",
            choice->address.c_str(), choice->name.c_str());
  if (choice->rdma_netdev)
    HA_INFO("NET/HA: no interface besides the RDMA netdevs: handshakes on %s share a rail", choice->name.c_str());
  return ncclSuccess;
}

// The reactor's workers: blocking verbs work (handshakes, re-protection, flush QPs) and file I/O
// (stats, Prometheus), off the progress thread. Created on demand. At the process's priority: a
// lower one (nice +10 was tried) lets NCCL's busy-polling proxy thread starve them when it shares
// their core, and 128 handshakes then ran past HA_NCCL_HANDSHAKE_TIMEOUT_MS (reprotect bench).
constexpr const char* kWorkerThreadName = "ncclHaWorker";
constexpr std::size_t kWorkerThreads = 2;
constexpr int kWorkerNice = 0;

// The topology of every device (topology.hpp: rail, island, NIC, PCIe switch, NUMA node) and its
// local first-choice standby port (standby_map.hpp), logged. `addrs`: the host's addresses (the
// RoCE rails).
void assign_standby_ports(State& s, const std::vector<net::IfAddr>& addrs) {
  std::vector<net::PortInfo> ports;
  std::vector<PortAffinity> affinity;
  for (const auto& d : s.devices) {
    const NetPrefix rail = port_rail(d->port, addrs, "/sys");
    ports.push_back(d->port);
    affinity.push_back(port_affinity(d->port, "/sys", rail));
    d->topo = port_topo(affinity.back(), rail, s.config.island_prefix_len);
  }
  std::vector<std::string> warnings;
  const auto choices = select_standby_ports(ports, affinity, s.config.standby_map, &warnings);
  for (const auto& w : warnings) HA_WARN("NET/HA: HA_NCCL_STANDBY_MAP: %s", w.c_str());
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    Device& d = *s.devices[i];
    d.standby_port = s.config.enable_standby ? choices[i].port : -1;
    d.standby_mapped = d.standby_port >= 0 && choices[i].mapped;
    if (d.standby_port >= 0)  // each connection's standby pair is agreed with its peer (standby.cpp, listen.cpp)
      HA_INFO("NET/HA: standby port of %s is %s (%s)%s", d.port.id().c_str(),
              s.devices[static_cast<std::size_t>(d.standby_port)]->port.id().c_str(), choices[i].reason.c_str(),
              d.standby_mapped ? "; preferred in every standby pair chosen with a peer"
                              : "; each connection's standby pair is chosen with its peer");
    else if (s.config.enable_standby)  // the operator expects protection and will not get it
      HA_WARN("NET/HA: %s has no standby port (%s): its connections are NOT protected", d.port.id().c_str(),
              choices[i].reason.c_str());
    else
      HA_INFO("NET/HA: %s has no standby: HA_NCCL_ENABLE_STANDBY=0", d.port.id().c_str());
  }
}

// What getProperties reports about each device, as NCCL's IB transport would: the PCI path with
// the function (and, NCCL_IB_MERGE_VFS, the VF) digits merged, the port number plus the real port
// (earlier devices on the same merged path), and NCCL_IB_HCA's rail and plane of the entry that
// selected the port, else undefined: NCCL is never told a rail the plugin inferred (its rails and
// islands from the addresses serve the plugin's own standby choice; on InfiniBand or a flat RoCE
// subnet they would put every NIC on one rail, and NCCL's rail-matching search would pair NICs
// across rails). The full path stays in port.pci_path for the plugin's own topology.
void assign_nccl_identity(State& s, const net::DeviceFilter& filter) {
  std::vector<std::string> paths;
  for (const auto& d : s.devices) paths.push_back(net::nccl_pci_path(d->port.pci_path, s.config.ib_merge_vfs));
  const std::vector<int> real = net::nccl_real_ports(paths);
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    Device& d = *s.devices[i];
    const auto* entry = filter.selecting_entry(d.port.device, d.port.port);
    d.pci_path = std::move(paths[i]);
    d.nccl_port = static_cast<int>(d.port.port) + real[i];
    d.rail_id = entry && entry->rail ? *entry->rail : std::int16_t{-1};
    d.plane_id = entry && entry->plane ? *entry->plane : std::int16_t{-1};
  }
  std::vector<std::int16_t> planes;
  for (const auto& d : s.devices) planes.push_back(d->plane_id);
  auto idx = plane_indices(planes);
  if (!idx) HA_WARN("NET/HA: NCCL_IB_HCA's planes: %s; no ports will be fused", idx.error().message.c_str());
  for (std::size_t i = 0; i < s.devices.size(); ++i) s.devices[i]->plane_idx = idx ? (*idx)[i] : -1;
}

// Port errors and device-fatal events reach the data path at once through Device::fault_gen.
void watch_port_events(State& s, Device& d) {
  d.events = std::make_unique<reactor::AsyncEventPump>(s.reactor, d.ctx.get(), d.port.device);
  d.subscription = d.events->subscribe([&d](const reactor::DeviceEvent& ev) {
    using K = reactor::DeviceEventKind;
    const bool this_port = ev.scope != reactor::EventScope::port || ev.port == d.port.port;
    if (!this_port) return;
    if (ev.kind == K::port_error || ev.kind == K::device_fatal) {
      d.last_fault.store(static_cast<int>(ev.kind), std::memory_order_relaxed);
      d.port_up.store(false, std::memory_order_relaxed);
      d.fault_gen.fetch_add(1, std::memory_order_release);
      HA_INFO("NET/HA: %s: %s", d.port.id().c_str(), reactor::to_string(ev.kind));
    } else if (ev.kind == K::port_active || ev.kind == K::gid_change || ev.kind == K::lid_change ||
               ev.kind == K::sm_change) {  // new paths on it are addressed as it is now (make_path)
      if (ev.kind == K::port_active) d.port_up.store(true, std::memory_order_relaxed);
      d.recover_gen.fetch_add(1, std::memory_order_relaxed);  // re-protection onto it starts now
      HA_INFO("NET/HA: %s: %s", d.port.id().c_str(), reactor::to_string(ev.kind));
    } else {
      return;
    }
    wake_watchers(d);  // every comm on the port acts now, whether or not NCCL calls
  });
  d.events->start();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// HA_NCCL_STATS_FILE / HA_NCCL_PROM_FILE with %h and %p expanded; an unknown %x is kept (WARN).
std::string expand_file_name(const char* var, const std::string& pattern, const std::string& host) {
  if (pattern.empty()) return pattern;
  std::vector<std::string> unknown;
  std::string path = expand_path(pattern, host, static_cast<long>(getpid()), &unknown);
  for (const auto& u : unknown)
    HA_WARN("NET/HA: %s='%s': unknown '%s' kept as is (%%h: host name, %%p: pid, %%%%: %%)", var, pattern.c_str(),
            u.c_str());
  if (path != pattern) HA_INFO("NET/HA: %s is %s", var, path.c_str());
  return path;
}

// The P_Key index every QP of `d` takes (NCCL_IB_PKEY: net_ib's meaning, an index into the port's
// table) must name a valid P_Key there; otherwise the port is left out: falling back to the
// default partition would put the job's traffic where the operator said it must not go.
bool partition_usable(const Device& d, const net::PortInfo& port) {
  const char* which = nullptr;
  if (!net::env_string({"HA_NCCL_IB_PKEY", "NCCL_IB_PKEY"}, &which)) return true;
  const std::uint16_t index = d.timeouts.pkey_index;
  __be16 pkey = 0;
  const int rc = ibv_query_pkey(d.ctx.get(), static_cast<std::uint8_t>(port.port), index, &pkey);
  if (rc != 0 || (ntohs(pkey) & 0x7fff) == 0) {
    HA_WARN("NET/HA: skipping %s: %s=%u names no P_Key in its table (%s)", port.id().c_str(), which, index,
            rc != 0 ? "no such index" : "the entry is empty");
    return false;
  }
  HA_INFO("NET/HA: %s: P_Key index %u (0x%04x, %s)", port.id().c_str(), index, ntohs(pkey), which);
  return true;
}

// Opens the device of one discovered port for the plugin: context, PD, MR cache, completion
// channel, its comm budget, QP timeouts (Soft-RoCE's adjusted), the registration choices (dma-buf,
// relaxed ordering); and says what the operator must know about it: the settings' trade-offs
// (once per distinct text, `warned`; a WARN when the user tuned them: `user_tuned`), APM.
// nullptr, after a WARN: the port is skipped.
std::unique_ptr<Device> open_port(const State& s, net::PortInfo port, std::vector<std::string>& warned, bool user_tuned) {
  auto ctx = net::open_device(port.device);
  if (!ctx) {
    HA_WARN("NET/HA: skipping %s: %s", port.id().c_str(), ctx.error().message.c_str());
    return nullptr;
  }
  auto pd = net::alloc_pd(ctx->get());
  if (!pd) {
    HA_WARN("NET/HA: skipping %s: %s", port.id().c_str(), pd.error().message.c_str());
    return nullptr;
  }
  auto d = std::make_unique<Device>();
  d->ctx = std::move(ctx).value();
  d->pd = std::move(pd).value();
  d->mrs = std::make_unique<MrCache>(d->pd.get());
  d->channel.reset(ibv_create_comp_channel(d->ctx.get()));
  if (!d->channel || !reactor::set_nonblocking(d->channel->fd)) {
    HA_WARN("NET/HA: skipping %s: no completion channel (%s)", port.id().c_str(), std::strerror(errno));
    return nullptr;
  }
  d->name = port.device;
  d->timeouts = net::QpTimeouts::from_env();
  d->ar_threshold = ar_threshold_for(s.config, port.link_layer);
  d->offer_ece = s.config.ece_enable;
  d->qp_plan = QpPlan{s.config.qps_per_connection, s.config.split_data_on_qps};
  if (!partition_usable(*d, port)) return nullptr;
  // Soft-RoCE retries for ever with retry_cnt 7 (hardware gives up after 7): cap it at 6 so a
  // dead path surfaces as IBV_WC_RETRY_EXC_ERR there too. Its ACKs run late under load, so
  // 67 ms (timeout 14) x 7 tries fails healthy streams: use ~0.5 s (17). Explicit
  // HA_NCCL_QP_TIMEOUT / HA_NCCL_QP_RETRY_CNT (or NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT) always win.
  if (port.soft_roce()) {
    if (!net::env_string({"HA_NCCL_QP_RETRY_CNT", "NCCL_IB_RETRY_CNT"}) && d->timeouts.retry_cnt == 7)
      d->timeouts.retry_cnt = 6;
    if (!net::env_string({"HA_NCCL_QP_TIMEOUT", "NCCL_IB_TIMEOUT"}) && !s.config.force_ib_timeout)
      d->timeouts.timeout = 17;
    HA_INFO("NET/HA: %s is Soft-RoCE: QP timeout %u, retry count %u", port.id().c_str(), d->timeouts.timeout,
            d->timeouts.retry_cnt);
  }
  for (const auto& w : config_warnings(s.config, d->timeouts.timeout, d->timeouts.retry_cnt))
    if (std::find(warned.begin(), warned.end(), w) == warned.end()) {  // once per distinct text
      warned.push_back(w);
      // A WARN for the user's own settings; the defaults' trade-off (a 1 s soft RTO beats the
      // hardware's retries to a black hole, on Soft-RoCE by far) is stated at INFO.
      if (user_tuned)
        HA_WARN("NET/HA: %s: %s", port.id().c_str(), w.c_str());
      else
        HA_INFO("NET/HA: %s: defaults: %s", port.id().c_str(), w.c_str());
    }
  if (s.config.enable_standby && apm_enabled("/sys", port.device, port.port))
    HA_WARN("NET/HA: %s: automatic path migration (APM) is on; it competes with nccl-ha's failover. "
            "Disable APM or set HA_NCCL_ENABLE_STANDBY=0", port.id().c_str());
  d->index = static_cast<int>(s.devices.size());
  d->port_up.store(port.active(), std::memory_order_relaxed);
  if (!port.active())
    HA_WARN("NET/HA: %s is %s at init: listed (NCCL device %d), its connections start on another pair of ports "
            "until it is ACTIVE", port.id().c_str(), net::port_state_name(port.state), d->index);
  d->port = std::move(port);
  decide_registration(s.config, real_mr_ops(), *d, s.devices.empty());  // dma-buf probe, relaxed ordering
  d->max_comms = compute_max_comms(d->port, s.flush_qps(*d), d->qp_plan, s.config.debug || log_enabled(LogLevel::info));
  return d;
}

// The settings line, in lines that NCCL's logger does not cut (1024 bytes with its prefix): the
// plugin's own settings, then from HA_NCCL_IB_TC on those of NCCL's IB transport, then the test
// hooks; each line begins "NET/HA: settings: " (readers join them).
void log_settings(const std::string& all, const std::string& hooks) {
  const auto ib = all.find(" HA_NCCL_IB_TC=");
  HA_INFO("NET/HA: settings: %s", all.substr(0, ib).c_str());
  if (ib != std::string::npos) HA_INFO("NET/HA: settings: %s", all.substr(ib + 1).c_str());
  if (!hooks.empty()) HA_INFO("NET/HA: settings: %s", hooks.c_str());
}

ncclResult_t create_state() {
  auto s = std::make_unique<State>();
  s->config = Config::from_env();
  s->hooks = TestHooks::from_lookup(net::process_env());
  const std::string hooks = s->hooks.settings();  // test builds only
  log_settings(describe(s->config), hooks);
  if (const auto unhonoured = unhonoured_nccl_settings(net::process_env()); !unhonoured.empty()) {
    std::string list;
    for (const auto& u : unhonoured) list += (list.empty() ? "" : "; ") + u;
    HA_WARN("NET/HA: NCCL settings this plugin does not honour: %s", list.c_str());
  }
  if (s->hooks.any()) {  // never in a build without test hooks (test_hooks.hpp)
    HA_WARN("NET/HA: test hooks set (this plugin was built with NCCL_HA_TEST_HOOKS=ON, for tests only): %s",
            s->hooks.effects().c_str());
    if (const int ms = s->hooks.reaper_delay_ms())
      s->reaper.delay_destructions(std::chrono::milliseconds(ms), s->hooks.reaper_delay_down_only());
  }
  s->host = host_name();
  s->stats_path = expand_file_name("HA_NCCL_STATS_FILE", s->config.stats_file, s->host);
  s->prom_path = expand_file_name("HA_NCCL_PROM_FILE", s->config.prom_file, s->host);
  const std::string peer_mem = gpu_peer_memory("/sys");
  s->gpu_memory = !peer_mem.empty();
  if (s->gpu_memory)
    HA_INFO("NET/HA: GPU peer memory (%s): ptrSupport HOST|CUDA, GPU receives flushed by RDMA READ", peer_mem.c_str());
  else
    HA_INFO("NET/HA: no GPU peer-memory client loaded (nvidia-peermem / nv_peer_mem): ptrSupport HOST");
  net::DiscoveryOptions opts;
  opts.filter = net::DeviceFilter::from_env();
  opts.pci_order = s->config.ib_device_pci_order;
  // Every port the filter selects, down ones too: a process started while a port is down (a
  // restarted job) numbers its devices as the other ranks do, so the rails still line up, and its
  // connections there start on a live pair and go home when the port comes up (issue #19).
  // Ports never meant to be used (not cabled) are left out with NCCL_IB_HCA / HA_NCCL_IB_HCA.
  opts.include_inactive = true;
  std::vector<std::string> warned;
  bool user_tuned = false;
  for (const char* v : {"HA_NCCL_RTO_MS", "HA_NCCL_HEARTBEAT_MS", "HA_NCCL_QP_TIMEOUT", "HA_NCCL_QP_RETRY_CNT",
                        "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT",
                        "HA_NCCL_MAX_RETRIES", "HA_NCCL_FAILBACK_HOLD_MS", "HA_NCCL_ENABLE_FAILBACK"})
    user_tuned = user_tuned || net::env_string({v}).has_value();
  std::vector<net::PortInfo> ports = net::discover_ports(opts);
  for (const std::size_t i : net::settle_inactive_speeds(ports))
    HA_INFO("NET/HA: %s is %s at init: its speed is reported as its ACTIVE siblings' (%d Mbps)", ports[i].id().c_str(),
            net::port_state_name(ports[i].state), ports[i].speed_mbps);
  for (auto& port : ports)
    if (auto d = open_port(*s, std::move(port), warned, user_tuned)) s->devices.push_back(std::move(d));
  const std::vector<net::IfAddr> addrs = host_addresses();
  assign_standby_ports(*s, addrs);
  assign_nccl_identity(*s, opts.filter);
  s->vdevices = std::make_unique<VDeviceTable>(static_cast<int>(s->devices.size()));
  if (ncclResult_t rc = pick_handshake_address(*s, addrs); rc != ncclSuccess) return rc;
  log_devices(*s);
  log_init_line(init_summary(*s));
  s->reactor.set_workers(kWorkerThreads, kWorkerThreadName, kWorkerNice);
  s->reactor.start(kProgressThreadName);
  if (s->config.use_progress_thread)
    for (auto& d : s->devices) watch_port_events(*s, *d);
  g_state = std::move(s);
  g_state_ptr.store(g_state.get(), std::memory_order_release);
  for (auto& d : g_state->devices) watch_channel(*d);
  start_monitoring(*g_state);
  start_stripe_weights(g_state->reactor, g_state->config.stripe_weights_file, g_state->devices);
  if (g_state->config.enable_standby) {
    if (auto r = RescueService::start(g_state->handshake_ip))
      g_state->rescue = std::move(r).value();
    else
      HA_WARN("NET/HA: %s: a connection that loses its active and standby paths together fails", r.error().message.c_str());
  }
  return ncclSuccess;
}

// Finalize returns within 1 s whatever the network does (NCCL's abort must not hang on a dead
// port, issue #19): the reactor gets kReactorGrace to unwind its coroutines, and the reaper until
// kFinalizeBound after finalize started to destroy the last paths; what is left then is destroyed
// in the background (reaper.hpp). The rest of the second is margin for a busy host (the threads
// involved must still be scheduled).
constexpr std::chrono::milliseconds kReactorGrace{300};
constexpr std::chrono::milliseconds kFinalizeBound{700};

// Comms NCCL did not close before the last finalize (an abort path, a leak): closed here as
// closeSend / closeRecv would, NCCL's reference dropped too, so their QPs reach the reaper
// within finalize's bound. The reactor is stopped: nothing else holds them.
void close_open_comms(State& s) {
  std::vector<std::shared_ptr<CommBase>> open;
  {
    std::lock_guard<std::mutex> lock(s.comms.mutex);
    for (const auto& e : s.comms.live)
      if (auto c = e.comm.lock()) open.push_back(std::move(c));
  }
  if (open.empty()) return;
  HA_WARN("NET/HA: finalize: %zu comm(s) were never closed (closeSend / closeRecv): closing them now", open.size());
  for (const auto& c : open) close_at_finalize(*c);
}

// `bounded`: finalize (NCCL may dlclose the plugin next; a background reaper is safe because the
// plugin then pins itself). Not at unload (UnloadGuard): a library being dlclose'd cannot keep
// itself mapped, so the reaper is waited for, however long that takes.
void destroy_state(bool bounded) {
  if (!g_state) return;
  const auto t0 = std::chrono::steady_clock::now();
  State& s = *g_state;
  drop_connect_ops();  // connect ops NCCL never completed: their comms' paths go to the reaper
  // 1. No coroutine runs any more (they are cancelled; the stubborn ones abandoned), so nothing
  //    below races with the progress thread; state() stays valid for the comms closed in 2.
  using Ms = std::chrono::duration<double, std::milli>;
  auto since = [t0] { return Ms(std::chrono::steady_clock::now() - t0).count(); };
  s.reactor.stop(kReactorGrace);
  if (s.rescue) s.rescue->stop();
  s.rescue.reset();
  for (auto& d : s.devices) {  // they live on the reactor: before it goes
    d->subscription.reset();
    d->events.reset();
  }
  const double stopped_ms = since();
  // 2. What NCCL left open.
  close_open_comms(s);
  const double closed_ms = since();
  // 3. The reactor goes, and with it the frames it abandoned (control tasks holding comms,
  //    handshakes, verbs jobs): their comms and paths reach the reaper while the devices, taken
  //    out of the state first, are still open.
  auto devices = std::move(s.devices);
  Reaper reaper = std::move(s.reaper);
  g_state_ptr.store(nullptr, std::memory_order_release);
  g_state.reset();
  const double frames_ms = since();
  // 4. The reaper destroys the rest, the devices close after their last path.
  const auto out = reaper.finish(std::move(devices), bounded ? t0 + kFinalizeBound : std::chrono::steady_clock::time_point::max(), bounded);
  if (out.handed_off)
    HA_WARN("NET/HA: finalize: %d QP(s) not destroyed within %lld ms (%s): they are destroyed in the background "
            "(their ports' devices close after them; the plugin stays loaded until the process exits)",
            out.pending, static_cast<long long>(kFinalizeBound.count()), out.ports.c_str());
  if (out.held > 0)
    HA_WARN("NET/HA: finalize: %d path(s) still held by connections that were never closed or accepted: their "
            "devices stay open", out.held);
  HA_INFO("NET/HA: finalize took %.1f ms (reactor stopped at %.1f, open comms closed at %.1f, its frames gone at "
          "%.1f, then the reaper waited %.1f ms)",
          since(), stopped_ms, closed_ms, frames_ms, out.waited_ms);
}

// At unload, the progress thread must be gone before the code it runs is unmapped.
struct UnloadGuard {
  ~UnloadGuard() {
    std::lock_guard<std::mutex> lock(g_init_mutex);
    destroy_state(false);
  }
} g_unload_guard;

}  // namespace

State::State() : pairs(std::make_unique<LivenessRegistry>()), attempts(std::make_unique<AttemptGate>()) {}

State::~State() {
  for (auto& d : devices)
    if (d) {
      d->subscription.reset();
      d->events.reset();
    }
}

State* state() noexcept { return g_state_ptr.load(std::memory_order_acquire); }

Device* device_or_warn(int dev, const char* what) noexcept {
  State* s = state();
  if (!s) {
    HA_WARN("NET/HA: %s called before init", what);
    return nullptr;
  }
  if (dev < 0 || static_cast<std::size_t>(dev) >= s->devices.size()) {
    HA_WARN("NET/HA: %s: device index %d out of range (%zu devices)", what, dev, s->devices.size());
    return nullptr;
  }
  return s->devices[static_cast<std::size_t>(dev)].get();
}

std::optional<DeviceMembers> members_or_warn(int dev, const char* what) noexcept {
  State* s = state();
  DeviceMembers m;
  const VDevice* v = s && s->vdevices ? s->vdevices->find(dev) : nullptr;
  if (!v) {
    Device* d = device_or_warn(dev, what);
    if (!d) return std::nullopt;
    m.ports[0] = d;
    m.count = 1;
    return m;
  }
  for (int i = 0; i < v->count; ++i) m.ports[static_cast<std::size_t>(i)] = s->devices[static_cast<std::size_t>(v->members[static_cast<std::size_t>(i)])].get();
  m.count = v->count;
  m.vdevice = v;
  return m;
}

ncclResult_t init(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  install_nccl_logger(logger);
  install_profiler(profiler);
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_state) return ncclSuccess;
  try {
    return create_state();
  } catch (const std::exception& e) {
    HA_WARN("NET/HA: init failed: %s", e.what());
    return ncclSystemError;
  }
}

ncclResult_t context_init(const CommParams& params, void** ctx) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  *ctx = &g_contexts.emplace_back(params);
  return ncclSuccess;
}

namespace {
std::list<CommParams>::iterator find_context(void* ctx) {
  return std::find_if(g_contexts.begin(), g_contexts.end(), [ctx](const CommParams& p) { return &p == ctx; });
}
}  // namespace

ncclResult_t context_finalize(void* ctx) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  const auto it = find_context(ctx);
  if (it == g_contexts.end()) {
    HA_WARN("NET/HA: finalize: %p is not a context of this plugin", ctx);
    return ncclInvalidArgument;
  }
  g_contexts.erase(it);
  if (g_contexts.empty()) destroy_state(true);  // NCCL may dlclose us next
  return ncclSuccess;
}

std::optional<CommParams> context_params(void* ctx) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  const auto it = find_context(ctx);
  if (it == g_contexts.end()) return std::nullopt;
  return *it;
}

ncclResult_t devices(int* ndev) {
  State* s = state();
  if (!s || !ndev) return ncclInvalidArgument;
  *ndev = static_cast<int>(s->devices.size());
  return ncclSuccess;
}

namespace {

// One port as NCCL sees it.
void port_properties(const State& s, int dev, Device& d, Props* props) {
  *props = Props{};
  props->name = d.name.data();
  props->pci_path = d.pci_path.empty() ? nullptr : d.pci_path.data();
  props->guid = d.port.sys_image_guid;  // NCCL's: one adapter, one guid (its ports merge in NCCL's topology)
  props->ptr_support = NCCL_PTR_HOST | (s.gpu_memory ? NCCL_PTR_CUDA : 0) |  // detected (gdr.hpp)
                       (d.dmabuf_offered ? NCCL_PTR_DMABUF : 0);            // probed (mr_ops.hpp)
  props->reg_is_global = 1;            // registrations are cached per device and shared by all comms
  props->force_flush = s.config.force_flush ? 1 : 0;
  props->speed = d.port.speed_mbps;
  props->port = d.nccl_port;
  props->latency = 0;
  props->max_comms = d.max_comms;
  props->max_recvs = kMaxRecvs;
  props->max_p2p_bytes = 1ull << 30;
  props->max_coll_bytes = 1ull << 30;
  props->ndevs = 1;
  props->devs[0] = dev;
  props->rail_id = d.rail_id;
  props->plane_id = d.plane_id;
}

}  // namespace

ncclResult_t get_properties(int dev, Props* props) {
  const auto m = members_or_warn(dev, "getProperties");
  if (!m || !props) return ncclInvalidArgument;
  State& s = *state();
  const VDevice* v = m->vdevice;
  if (!v) {
    port_properties(s, dev, m->first(), props);
    return ncclSuccess;
  }
  // A fused device, as net_ib reports one: the first member's facts, with the merged name, speed,
  // rail and plane (vdevice.hpp); memory kinds every member takes; the comms each member can hold
  // (a connection on it has a path on every member).
  port_properties(s, v->members[0], m->first(), props);
  props->name = const_cast<char*>(v->name.c_str());  // NCCL's field is char*; it never writes it
  props->speed = v->speed;
  props->rail_id = v->rail_id;
  props->plane_id = v->plane_id;
  props->ndevs = v->count;
  for (int i = 0; i < m->count; ++i) {
    const Device& d = *m->ports[static_cast<std::size_t>(i)];
    props->devs[i] = v->members[static_cast<std::size_t>(i)];
    props->max_comms = std::min(props->max_comms, d.max_comms);
    if (!d.dmabuf_offered) props->ptr_support &= ~NCCL_PTR_DMABUF;
  }
  return ncclSuccess;
}

ncclResult_t make_vdevice(std::span<const int> devs, int max_members, int* out) {
  State* s = state();
  if (!s) {
    HA_WARN("NET/HA: makeVDevice called before init");
    return ncclInvalidUsage;
  }
  if (!out) return ncclInvalidArgument;
  std::vector<MemberFacts> ports;
  for (const auto& d : s->devices)
    ports.push_back({d->name, d->port.speed_mbps, d->port.link_layer, d->rail_id, d->plane_id, d->plane_idx});
  std::string asked;
  for (int d : devs) asked += (asked.empty() ? "" : ",") + std::to_string(d);
  auto v = merge_ports(ports, devs, max_members);
  if (!v) {
    HA_WARN("NET/HA: makeVDevice [%s]: %s", asked.c_str(), v.error().message.c_str());
    return ncclInvalidUsage;
  }
  if (v->count == 1) {  // a port as it is (NCCL asks for no such device, but may)
    *out = v->members[0];
    return ncclSuccess;
  }
  if (!s->config.ib_merge_nics) {
    HA_INFO("NET/HA: makeVDevice %s: not made, NCCL_IB_MERGE_NICS=0", v->name.c_str());
    return ncclInvalidUsage;
  }
  auto index = s->vdevices->add(*v);
  if (!index) {
    HA_WARN("NET/HA: makeVDevice %s: %s", v->name.c_str(), index.error().message.c_str());
    return ncclInvalidUsage;
  }
  // Each connection on it has a connection on every member pair and splits each message between
  // them by the members' weights (datapath/fused.hpp); each of those keeps its own standby.
  HA_INFO("NET/HA: makeVDevice %s is device %d (speed %d, rail %d, plane %d): each connection on it stripes over "
          "its %d ports",
          v->name.c_str(), *index, v->speed, v->rail_id, v->plane_id, v->count);
  *out = *index;
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
