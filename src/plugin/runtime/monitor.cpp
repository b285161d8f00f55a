#include "runtime/monitor.hpp"

#include <map>

namespace nccl_ha::plugin {

std::string expand_path(std::string_view pattern, std::string_view host, long pid, std::vector<std::string>* unknown) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char ch = pattern[i];
    if (ch != '%') {
      out += ch;
      continue;
    }
    if (i + 1 == pattern.size()) {  // a trailing lone %
      out += ch;
      if (unknown) unknown->emplace_back("%");
      break;
    }
    const char next = pattern[++i];
    switch (next) {
      case 'h': out += host; break;
      case 'p': out += std::to_string(pid); break;
      case '%': out += '%'; break;
      default:
        out += '%';
        out += next;
        if (unknown) unknown->push_back(std::string("%") + next);
    }
  }
  return out;
}

CommCounters& CommCounters::operator+=(const CommCounters& o) noexcept {
  failovers += o.failovers;
  failbacks += o.failbacks;
  reprotections += o.reprotections;
  reprotect_dropped += o.reprotect_dropped;
  replayed += o.replayed;
  messages += o.messages;
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  return *this;
}

const char* protection_name(Protection p) noexcept {
  switch (p) {
    case Protection::protected_: return "protected";
    case Protection::unprotected: return "unprotected";
    case Protection::failed: return "failed";
  }
  return "?";
}

std::string prom_escape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char ch : v) {
    if (ch == '\\') out += "\\\\";
    else if (ch == '"') out += "\\\"";
    else if (ch == '\n') out += "\\n";
    else out += ch;
  }
  return out;
}

namespace {

class Exposition {
 public:
  explicit Exposition(const PromSnapshot& s)
      : base_("host=\"" + prom_escape(s.host) + "\",pid=\"" + std::to_string(s.pid) + "\"") {}
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;  // constant texts: no \ or newline to escape
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  // `labels`: further label pairs, already escaped, each starting with a comma.
  void sample(const char* name, const std::string& labels, std::uint64_t value) {
    out_ += name;
    out_ += '{';
    out_ += base_;
    out_ += labels;
    out_ += "} ";
    out_ += std::to_string(value);
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string base_;
  std::string out_;
};

std::string label(const char* name, std::string_view value) {
  return std::string(",") + name + "=\"" + prom_escape(value) + "\"";
}

}  // namespace

std::string format_prom(const PromSnapshot& s) {
  Exposition e(s);
  std::uint64_t by_state[3] = {};
  CommCounters total = s.closed;
  struct PortUse {
    std::uint64_t active = 0;
    std::uint64_t standby = 0;
  };
  std::map<std::string, PortUse> use;
  for (const auto& p : s.ports) use[p.id];
  for (const auto& c : s.comms) {
    if (!c.valid) continue;
    ++by_state[static_cast<int>(c.protection)];
    total += c.counters;
    if (c.protection == Protection::failed) continue;
    if (!c.active_port.empty()) ++use[c.active_port].active;
    if (!c.standby_port.empty()) ++use[c.standby_port].standby;
  }

  e.family("nccl_ha_connections", "gauge",
           "Connections open now, by state: protected (a standby path is up), unprotected (no usable standby: "
           "none, down, connecting, or a failover under way), failed (no usable path left).");
  for (Protection p : {Protection::protected_, Protection::unprotected, Protection::failed})
    e.sample("nccl_ha_connections", label("state", protection_name(p)), by_state[static_cast<int>(p)]);
  e.family("nccl_ha_unprotected_connections", "gauge",
           "Connections open now without a usable standby path (one more fault on them is fatal).");
  e.sample("nccl_ha_unprotected_connections", "", by_state[static_cast<int>(Protection::unprotected)]);

  struct Counter {
    const char* name;
    const char* help;
    std::uint64_t value;
  };
  const Counter counters[] = {
      {"nccl_ha_failovers_total", "Failovers to the standby path (faults), closed connections included.",
       total.failovers},
      {"nccl_ha_failbacks_total", "Planned moves back to the primary port (HA_NCCL_ENABLE_FAILBACK).", total.failbacks},
      {"nccl_ha_reprotections_total", "Standby paths re-established after a failover.", total.reprotections},
      {"nccl_ha_replayed_messages_total", "Messages replayed on the new path by failovers.", total.replayed},
      {"nccl_ha_messages_total", "Messages completed (sends and receives).", total.messages},
      {"nccl_ha_sent_bytes_total", "Bytes of completed sends.", total.bytes_sent},
      {"nccl_ha_received_bytes_total", "Bytes of completed receives.", total.bytes_received},
      {"nccl_ha_unproven_connections_closed_total",
       "Connections to the plugin's listeners and rescue service closed without a byte sent back: they did not "
       "prove the job's secret in time (strangers, scanners, replays, silent sockets).", s.unproven_closed},
      {"nccl_ha_rescue_requests_dropped_total",
       "Rescue requests that proved the connection's key but were not acted on (not from the peer's address, "
       "a request the comm it names does not take, an old attempt).", s.rescue_dropped},
      {"nccl_ha_reprotect_requests_dropped_total",
       "Re-protection requests a peer wrote over a path that were not acted on (an older attempt's, or a "
       "rescue's, which is taken only over the rescue service).", total.reprotect_dropped},
  };
  for (const auto& c : counters) {
    e.family(c.name, "counter", c.help);
    e.sample(c.name, "", c.value);
  }

  e.family("nccl_ha_port_up", "gauge", "1 when the port is up (no port error since its last PORT_ACTIVE), else 0.");
  for (const auto& p : s.ports) e.sample("nccl_ha_port_up", label("port", p.id), p.up ? 1 : 0);
  e.family("nccl_ha_port_connections", "gauge",
           "Connections open now whose active path (role=active) or whose up standby path (role=standby) is on "
           "the port.");
  for (const auto& [port, u] : use) {
    e.sample("nccl_ha_port_connections", label("port", port) + label("role", "active"), u.active);
    e.sample("nccl_ha_port_connections", label("port", port) + label("role", "standby"), u.standby);
  }
  // Fused devices' members: each member's bytes over the connections open now (its share of the
  // device's traffic), by the device's ports, the member and its own port.
  struct MemberBytes {
    std::uint64_t sent = 0, received = 0;
  };
  std::map<std::string, MemberBytes> members;  // key: the labels
  for (const auto& c : s.comms) {
    const auto space = c.member.rfind(' ');
    if (!c.valid || space == std::string::npos) continue;
    MemberBytes& m = members[label("device", c.member.substr(0, space)) + label("member", c.member.substr(space + 1)) +
                             label("port", c.home_port)];
    m.sent += c.counters.bytes_sent;
    m.received += c.counters.bytes_received;
  }
  e.family("nccl_ha_member_bytes", "gauge",
           "Fused devices (makeVDevice): bytes each member connection sent and received, summed over the "
           "connections open now: each member port's share of its device's traffic.");
  for (const auto& [labels, m] : members) {
    e.sample("nccl_ha_member_bytes", labels + label("direction", "sent"), m.sent);
    e.sample("nccl_ha_member_bytes", labels + label("direction", "received"), m.received);
  }
  return e.take();
}

}  // namespace nccl_ha::plugin
