#include "runtime/config.hpp"

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "nccl_ha/net/env.hpp"
#include "nccl_ha/net/qp.hpp"
#include "nccl_ha/net/socket_if.hpp"
#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::plugin {
namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// 0/1, true/false, yes/no, on/off (any case); anything else -> WARN + fallback.
bool env_bool(const net::EnvLookup& env, const char* name, bool fallback) {
  auto s = net::env_string(env, {name});
  if (!s) return fallback;
  const std::string v = lower(*s);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  HA_WARN("NET/HA: %s='%s' is invalid (expected 0/1, true/false, yes/no or on/off); using the default %d", name,
          s->c_str(), fallback ? 1 : 0);
  return fallback;
}

int env_int(const net::EnvLookup& env, const char* name, int fallback, int min, int max) {
  return static_cast<int>(net::env_int(env, {name}, fallback, min, max));
}

// A renamed setting: the name to read. The old name is still read when the new one is not set,
// with a WARN that names the new one; when both are set the new one wins and the old one is
// WARNed about as ignored.
const char* renamed(const net::EnvLookup& env, const char* name, const char* old_name) {
  const auto old = net::env_string(env, {old_name});
  if (!old) return name;
  if (net::env_string(env, {name})) {
    HA_WARN("NET/HA: %s='%s' is deprecated and ignored: %s is set", old_name, old->c_str(), name);
    return name;
  }
  HA_WARN("NET/HA: %s is deprecated: use %s (its value '%s' is taken for now)", old_name, name, old->c_str());
  return old_name;
}

std::string fmt_ms(double ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.2f ms" : "%.0f ms", ms);
  return buf;
}

std::string port_file(const std::string& sysfs_root, const std::string& device, std::uint32_t port,
                      const char* name) {
  std::ifstream in(sysfs_root + "/class/infiniband/" + device + "/ports/" + std::to_string(port) + "/" + name);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::string quoted_if_needed(const std::string& s) {
  bool plain = !s.empty();
  for (char ch : s) plain = plain && !std::isspace(static_cast<unsigned char>(ch));
  return plain ? s : "\"" + s + "\"";
}

// The dma-buf and relaxed-ordering settings: the HA_ variable wins over NCCL's; `*_var` names the
// one that was set (its WARN names it too: net::env_int).
void read_registration(const net::EnvLookup& env, Config& c) {
  const char* which = nullptr;
  if (net::env_string(env, {"HA_NCCL_DMABUF_ENABLE", "NCCL_DMABUF_ENABLE"}, &which)) c.dmabuf_enable_var = which;
  c.dmabuf_enable = static_cast<int>(net::env_int(env, {"HA_NCCL_DMABUF_ENABLE", "NCCL_DMABUF_ENABLE"}, 1, 0, 1));
  which = nullptr;
  if (net::env_string(env, {"HA_NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_PCI_RELAXED_ORDERING"}, &which))
    c.relaxed_ordering_var = which;
  c.relaxed_ordering = static_cast<int>(
      net::env_int(env, {"HA_NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_PCI_RELAXED_ORDERING"}, 2, 0, 2));
  c.gdr_flush_disable = net::env_int(env, {"HA_NCCL_IB_GDR_FLUSH_DISABLE", "NCCL_IB_GDR_FLUSH_DISABLE"}, 0, 0, 1) != 0;
  c.ece_enable = net::env_int(env, {"HA_NCCL_IB_ECE_ENABLE", "NCCL_IB_ECE_ENABLE"}, 1,
                              std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()) != 0;
}

// Several QPs per path as net_ib reads NCCL_IB_QPS_PER_CONNECTION (a count, default 1) and
// NCCL_IB_SPLIT_DATA_ON_QPS (0/1); a count beyond what an endpoint carries is taken as the most it does.
void read_qps(const net::EnvLookup& env, Config& c) {
  const char* which = nullptr;
  const auto n = net::env_int(env, {"HA_NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION"}, 1, 1,
                              std::numeric_limits<std::int32_t>::max());
  if (n > net::kMaxEndpointQps) {
    (void)net::env_string(env, {"HA_NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION"}, &which);
    HA_WARN("NET/HA: %s=%lld: this plugin connects at most %d QPs per path; %d are used", which ? which : "",
            static_cast<long long>(n), net::kMaxEndpointQps, net::kMaxEndpointQps);
  }
  c.qps_per_connection = static_cast<int>(std::min<long long>(n, net::kMaxEndpointQps));
  c.split_data_on_qps =
      net::env_int(env, {"HA_NCCL_IB_SPLIT_DATA_ON_QPS", "NCCL_IB_SPLIT_DATA_ON_QPS"}, 0, 0, 1) != 0;
}

// Adaptive routing as net_ib reads it: -2 is its "not set" (the link layer decides), any other
// non-zero value is on; a threshold of -2 is the default, and one beyond 2^31 would never split a
// message NCCL sends (a negative one is refused: it would split even empty messages).
void read_adaptive_routing(const net::EnvLookup& env, Config& c) {
  c.adaptive_routing = static_cast<int>(net::env_int(env, {"HA_NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_ADAPTIVE_ROUTING"},
                                                     c.adaptive_routing, std::numeric_limits<std::int32_t>::min(),
                                                     std::numeric_limits<std::int32_t>::max()));
  if (c.adaptive_routing != -2 && c.adaptive_routing != 0) c.adaptive_routing = 1;
  auto t = net::env_int(env, {"HA_NCCL_IB_AR_THRESHOLD", "NCCL_IB_AR_THRESHOLD"}, 8192, -2, 1LL << 31);
  if (t == -1) {
    HA_WARN("NET/HA: an adaptive-routing threshold of -1 is not a size (expected bytes, or -2: the default); 8192 is used");
    t = 8192;
  }
  c.ar_threshold = t < 0 ? 8192 : static_cast<std::uint64_t>(t);
}

// HA_NCCL_MAX_POLL, else its old name HA_NCCL_TEST_MAX_POLL (WARNed about: deprecated).
int read_max_poll(const net::EnvLookup& env, int fallback) {
  return static_cast<int>(net::env_int(env, {renamed(env, "HA_NCCL_MAX_POLL", "HA_NCCL_TEST_MAX_POLL")}, fallback, 1, 64));
}

// HA_NCCL_LOG_LEVEL is the reactor logger's (its initial level, WARN when unknown): an unknown
// value is WARNed about here, at init, where NCCL's log shows it.
void check_log_level(const net::EnvLookup& env) {
  const auto v = net::env_string(env, {"HA_NCCL_LOG_LEVEL"});
  if (v && !parse_log_level(*v))
    HA_WARN("NET/HA: HA_NCCL_LOG_LEVEL='%s' is not a log level (expected %s, any case); WARN is used", v->c_str(),
            kLogLevelNames);
}

}  // namespace

Config Config::from_env() { return from_lookup(net::process_env()); }

Config Config::from_lookup(const net::EnvLookup& env) {
  Config c;
  c.max_poll = read_max_poll(env, c.max_poll);
  check_log_level(env);
  c.handshake_timeout_ms = env_int(env, "HA_NCCL_HANDSHAKE_TIMEOUT_MS", c.handshake_timeout_ms, 100, 3600000);
  const char* which = nullptr;
  c.socket_ifname = net::env_string(env, {"HA_NCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}, &which).value_or("");
  if (which) c.socket_ifname_var = which;
  which = nullptr;
  if (auto fam = net::env_string(env, {"HA_NCCL_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY"}, &which)) {
    c.socket_family_var = which;
    auto parsed = net::parse_socket_family(*fam);
    if (parsed)
      c.socket_family = *parsed;
    else
      HA_WARN("NET/HA: ignoring %s='%s': %s; handshakes use either family (IPv4 preferred)", which, fam->c_str(),
              parsed.error().message.c_str());
  }
  c.debug = env_int(env, "HA_NCCL_DEBUG", c.debug, 0, 3);
  c.enable_standby = env_bool(env, renamed(env, "HA_NCCL_ENABLE_STANDBY", "HA_NCCL_ENABLE_BACKUP"), c.enable_standby);
  c.heartbeat_ms = env_int(env, "HA_NCCL_HEARTBEAT_MS", c.heartbeat_ms, 10, 60000);
  c.rto_ms = env_int(env, "HA_NCCL_RTO_MS", c.rto_ms, 10, 600000);
  c.max_retries = env_int(env, "HA_NCCL_MAX_RETRIES", c.max_retries, 0, 1000000);
  c.retry_window_ms = env_int(env, "HA_NCCL_RETRY_WINDOW_MS", c.retry_window_ms, 1000, 86400000);
  // On by default with HA: traffic goes home (issue #19). Without HA only an explicit 1 (warned about).
  c.enable_failback = env_bool(env, "HA_NCCL_ENABLE_FAILBACK", c.enable_standby && c.enable_failback);
  c.failback_hold_ms = env_int(env, "HA_NCCL_FAILBACK_HOLD_MS", c.failback_hold_ms, 0, 3600000);
  c.use_progress_thread = env_bool(env, "HA_NCCL_USE_PROGRESS_THREAD", c.use_progress_thread);
  c.failover_timeout_ms = env_int(env, "HA_NCCL_FAILOVER_TIMEOUT_MS", c.failover_timeout_ms, 50, 60000);
  c.rescue_timeout_ms = env_int(env, "HA_NCCL_RESCUE_TIMEOUT_MS", c.rescue_timeout_ms, 100, 600000);
  c.standby_map = net::env_string(env, {renamed(env, "HA_NCCL_STANDBY_MAP", "HA_NCCL_BACKUP_MAP")}).value_or("");
  if (auto len = net::env_string(env, {"HA_NCCL_ISLAND_PREFIX_LEN"})) {
    const auto v = net::parse_int(*len);
    if (v && *v >= 0 && *v <= 128)
      c.island_prefix_len = static_cast<int>(*v);
    else
      HA_WARN("NET/HA: HA_NCCL_ISLAND_PREFIX_LEN='%s' is invalid (expected an integer in [0, 128]); using the "
              "default: islands from the address (each port's own subnet)", len->c_str());
  }
  c.stats_file = net::env_string(env, {"HA_NCCL_STATS_FILE"}).value_or("");
  c.stripe_weights_file = net::env_string(env, {"HA_NCCL_STRIPE_WEIGHTS_FILE"}).value_or("");
  c.prom_file = net::env_string(env, {"HA_NCCL_PROM_FILE"}).value_or("");
  c.prom_interval_ms = env_int(env, "HA_NCCL_PROM_INTERVAL_MS", c.prom_interval_ms, 100, 3600000);
  c.force_ib_timeout = env_bool(env, "HA_NCCL_FORCE_IB_TIMEOUT", c.force_ib_timeout);
  c.force_flush = env_bool(env, "HA_NCCL_FORCE_FLUSH", c.force_flush);
  read_adaptive_routing(env, c);
  c.ib_tc = static_cast<int>(net::env_int(env, {"HA_NCCL_IB_TC", "NCCL_IB_TC"}, c.ib_tc, -1, 255));
  c.ib_sl = static_cast<int>(net::env_int(env, {"HA_NCCL_IB_SL", "NCCL_IB_SL"}, c.ib_sl, -1, 15));
  c.ib_fifo_tc = static_cast<int>(net::env_int(env, {"HA_NCCL_IB_FIFO_TC", "NCCL_IB_FIFO_TC"}, c.ib_fifo_tc, -1, 255));
  which = nullptr;
  if (auto merge = net::env_string(env, {"HA_NCCL_IB_MERGE_VFS", "NCCL_IB_MERGE_VFS"}, &which)) {
    c.ib_merge_vfs_var = which;
    if (*merge == "0" || *merge == "1")
      c.ib_merge_vfs = *merge == "1";
    else
      HA_WARN("NET/HA: %s='%s' is invalid (expected 0 or 1); using the default 1 (virtual functions merged)", which,
              merge->c_str());
  }
  c.ib_device_pci_order = net::env_int(env, {"HA_NCCL_IB_DEVICE_PCI_ORDER", "NCCL_IB_DEVICE_PCI_ORDER"}, 1, 0, 1) != 0;
  c.ib_merge_nics = net::env_int(env, {"HA_NCCL_IB_MERGE_NICS", "NCCL_IB_MERGE_NICS"}, 1, 0, 1) != 0;
  read_registration(env, c);
  read_qps(env, c);
  return c;
}

Qos resolve_qos(const Config& c, int comm_traffic_class) {
  Qos q;
  const bool from_comm = comm_traffic_class >= 0 && comm_traffic_class <= 255;
  if (c.ib_tc >= 0) q.traffic_class = static_cast<std::uint8_t>(c.ib_tc);
  else if (from_comm) q.traffic_class = static_cast<std::uint8_t>(comm_traffic_class);
  if (c.ib_sl >= 0) q.service_level = static_cast<std::uint8_t>(c.ib_sl);
  else if (from_comm && comm_traffic_class <= 15) q.service_level = static_cast<std::uint8_t>(comm_traffic_class);
  return q;
}

std::uint64_t ar_threshold_for(const Config& c, std::uint8_t link_layer) {
  const bool on = c.adaptive_routing == -2 ? link_layer == IBV_LINK_LAYER_INFINIBAND : c.adaptive_routing != 0;
  return on ? c.ar_threshold : kNoAdaptiveRouting;
}

Qos receiver_qos(const Config& c, const Qos& connector, bool roce) {
  Qos q = connector;
  if (roce && c.ib_fifo_tc >= 0) q.traffic_class = static_cast<std::uint8_t>(c.ib_fifo_tc);
  return q;
}

double hw_retry_window_ms(std::uint32_t qp_timeout, std::uint32_t qp_retry_cnt) {
  if (qp_timeout == 0) return 0;
  return 4.096e-3 * std::ldexp(1.0, static_cast<int>(qp_timeout)) * (static_cast<double>(qp_retry_cnt) + 1);
}

std::vector<std::string> unhonoured_nccl_settings(const net::EnvLookup& env) {
  struct Unhonoured {
    const char* name;
    const char* harmless;  // the value that asks for nothing net_ib would do differently ("": none)
    const char* instead;
  };
  static constexpr Unhonoured kList[] = {
      {"NCCL_IB_USE_INLINE", "0", "no inline data"},
      {"NCCL_IB_ADDR_FAMILY", "", "the GID: HA_NCCL_IB_GID_INDEX / NCCL_IB_GID_INDEX, else RoCE v2 IPv4 first"},
      {"NCCL_IB_ADDR_RANGE", "", "the GID: HA_NCCL_IB_GID_INDEX / NCCL_IB_GID_INDEX, else RoCE v2 IPv4 first"},
      {"NCCL_IB_ROCE_VERSION_NUM", "", "the GID: HA_NCCL_IB_GID_INDEX / NCCL_IB_GID_INDEX, else RoCE v2 IPv4 first"},
  };
  std::vector<std::string> out;
  for (const auto& u : kList) {
    const auto v = env(u.name);
    if (!v || (*u.harmless && *v == u.harmless)) continue;
    out.push_back(std::string(u.name) + "=" + *v + " (" + u.instead + ")");
  }
  return out;
}

std::vector<std::string> config_warnings(const Config& c, std::uint32_t qp_timeout, std::uint32_t qp_retry_cnt) {
  std::vector<std::string> w;
  const std::string rto = "HA_NCCL_RTO_MS=" + std::to_string(c.rto_ms);
  if (qp_timeout == 0)
    w.push_back("QP timeout 0 disables the RC ACK timeout: the hardware never reports a dead path" +
                std::string(c.enable_standby ? "; only the soft RTO (" + rto + ") detects it" : ""));
  if (!c.enable_standby) {
    if (c.enable_failback) w.push_back("HA_NCCL_ENABLE_FAILBACK=1 has no effect with HA_NCCL_ENABLE_STANDBY=0");
    return w;  // the rest concerns failover, which is off
  }
  const double window = hw_retry_window_ms(qp_timeout, qp_retry_cnt);
  if (c.rto_ms < 2 * window) {  // never for timeout 0: no window
    w.push_back(rto + " is below twice the hardware retry window (" + fmt_ms(window) + " = 4.096 us x 2^" +
                std::to_string(qp_timeout) + " x (" + std::to_string(qp_retry_cnt) +
                " + 1)): a slow but live path can be failed over; use at least " +
                std::to_string(static_cast<long long>(std::ceil(2 * window))));
  }
  if (static_cast<long long>(c.heartbeat_ms) * 3 > c.rto_ms) {
    w.push_back("HA_NCCL_HEARTBEAT_MS=" + std::to_string(c.heartbeat_ms) + " x 3 missed heartbeats exceeds " + rto +
                ": a dead standby is noticed only after the soft RTO has already failed over to it");
  }
  if (c.max_retries == 0)
    w.push_back("HA_NCCL_MAX_RETRIES=0 allows no failover: the first path failure is fatal, as without HA");
  if (c.enable_failback && static_cast<long long>(c.failback_hold_ms) < 3LL * c.heartbeat_ms) {
    w.push_back("HA_NCCL_FAILBACK_HOLD_MS=" + std::to_string(c.failback_hold_ms) +
                " is shorter than 3 heartbeats (HA_NCCL_HEARTBEAT_MS=" + std::to_string(c.heartbeat_ms) +
                "): a flapping primary can be failed back to before it is known to be stable");
  }
  return w;
}

std::string describe(const Config& c) {
  auto b = [](bool v) { return v ? "1" : "0"; };
  std::string s;
  auto add = [&s](const char* name, const std::string& value) {
    if (!s.empty()) s += ' ';
    s += name;
    s += '=';
    s += value;
  };
  add("HA_NCCL_MAX_POLL", std::to_string(c.max_poll));
  add("HA_NCCL_HANDSHAKE_TIMEOUT_MS", std::to_string(c.handshake_timeout_ms));
  add("HA_NCCL_SOCKET_IFNAME", quoted_if_needed(c.socket_ifname));
  add("HA_NCCL_SOCKET_FAMILY", c.socket_family == AF_INET ? "AF_INET" : c.socket_family == AF_INET6 ? "AF_INET6" : "any");
  add("HA_NCCL_DEBUG", std::to_string(c.debug));
  add("HA_NCCL_ENABLE_STANDBY", b(c.enable_standby));
  add("HA_NCCL_HEARTBEAT_MS", std::to_string(c.heartbeat_ms));
  add("HA_NCCL_RTO_MS", std::to_string(c.rto_ms));
  add("HA_NCCL_MAX_RETRIES", std::to_string(c.max_retries));
  add("HA_NCCL_RETRY_WINDOW_MS", std::to_string(c.retry_window_ms));
  add("HA_NCCL_ENABLE_FAILBACK", b(c.enable_failback));
  add("HA_NCCL_FAILBACK_HOLD_MS", std::to_string(c.failback_hold_ms));
  add("HA_NCCL_USE_PROGRESS_THREAD", b(c.use_progress_thread));
  add("HA_NCCL_FAILOVER_TIMEOUT_MS", std::to_string(c.failover_timeout_ms));
  add("HA_NCCL_RESCUE_TIMEOUT_MS", std::to_string(c.rescue_timeout_ms));
  add("HA_NCCL_STANDBY_MAP", quoted_if_needed(c.standby_map));
  add("HA_NCCL_ISLAND_PREFIX_LEN", c.island_prefix_len < 0 ? std::string("unset") : std::to_string(c.island_prefix_len));
  add("HA_NCCL_STATS_FILE", quoted_if_needed(c.stats_file));
  add("HA_NCCL_PROM_FILE", quoted_if_needed(c.prom_file));
  add("HA_NCCL_PROM_INTERVAL_MS", std::to_string(c.prom_interval_ms));
  add("HA_NCCL_FORCE_IB_TIMEOUT", b(c.force_ib_timeout));
  add("HA_NCCL_FORCE_FLUSH", b(c.force_flush));
  add("HA_NCCL_IB_TC", c.ib_tc < 0 ? std::string("unset") : std::to_string(c.ib_tc));
  add("HA_NCCL_IB_SL", c.ib_sl < 0 ? std::string("unset") : std::to_string(c.ib_sl));
  add("HA_NCCL_IB_FIFO_TC", c.ib_fifo_tc < 0 ? std::string("unset") : std::to_string(c.ib_fifo_tc));
  add("HA_NCCL_IB_MERGE_VFS", b(c.ib_merge_vfs));
  add("HA_NCCL_IB_DEVICE_PCI_ORDER", b(c.ib_device_pci_order));
  add("HA_NCCL_IB_MERGE_NICS", b(c.ib_merge_nics));
  add("HA_NCCL_STRIPE_WEIGHTS_FILE", quoted_if_needed(c.stripe_weights_file));
  add("HA_NCCL_DMABUF_ENABLE", std::to_string(c.dmabuf_enable));
  add("HA_NCCL_IB_PCI_RELAXED_ORDERING", std::to_string(c.relaxed_ordering));
  add("HA_NCCL_IB_GDR_FLUSH_DISABLE", b(c.gdr_flush_disable));
  add("HA_NCCL_IB_ECE_ENABLE", b(c.ece_enable));
  add("HA_NCCL_IB_QPS_PER_CONNECTION", std::to_string(c.qps_per_connection));
  add("HA_NCCL_IB_SPLIT_DATA_ON_QPS", b(c.split_data_on_qps));
  add("HA_NCCL_IB_ADAPTIVE_ROUTING", c.adaptive_routing == -2 ? std::string("auto") : b(c.adaptive_routing != 0));
  add("HA_NCCL_IB_AR_THRESHOLD", std::to_string(c.ar_threshold));
  return s;
}

bool apm_enabled(const std::string& sysfs_root, const std::string& device, std::uint32_t port) {
  auto v = net::parse_int(port_file(sysfs_root, device, port, "apm_enable"));
  return v && *v != 0;
}

bool apm_supported(const std::string& sysfs_root, const std::string& device, std::uint32_t port) {
  std::string v = port_file(sysfs_root, device, port, "cap_mask");
  if (v.size() < 3 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X')) return false;
  std::uint32_t mask = 0;
  auto [end, ec] = std::from_chars(v.data() + 2, v.data() + v.size(), mask, 16);
  if (ec != std::errc{} || end != v.data() + v.size()) return false;
  return (mask & IBV_PORT_AUTO_MIGR_SUP) != 0;
}

}  // namespace nccl_ha::plugin
