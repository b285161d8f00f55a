#include "nccl_ha/net/socket_if.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <tuple>

namespace nccl_ha::net {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool is_v6_link_local(const IfAddr& a) { return a.family == AF_INET6 && a.addr[0] == 0xfe && (a.addr[1] & 0xc0) == 0x80; }

bool is_loopback_address(const IfAddr& a) {
  if (a.family == AF_INET) return a.addr[0] == 127;
  for (std::size_t i = 0; i < 15; ++i)
    if (a.addr[i] != 0) return false;
  return a.addr[15] == 1;  // ::1
}

const char* family_name(int family) { return family == AF_INET ? "AF_INET" : family == AF_INET6 ? "AF_INET6" : "?"; }

// Why automatic mode (and a '^' list) does not take an interface; nullptr: it may.
const char* guarded_reason(const IfAddr& a) {
  if (a.loopback || is_loopback_address(a)) return "loopback";
  if (starts_with(a.name, "docker") || starts_with(a.name, "virbr")) return "container/VM bridge";
  return nullptr;
}

}  // namespace

bool SocketIfSpec::matches(const std::string& ifname) const {
  const bool hit = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return exact ? ifname == n : starts_with(ifname, n);
  });
  return hit != exclude;
}

Expected<SocketIfSpec> parse_socket_ifname(const std::string& raw) {
  SocketIfSpec s;
  std::size_t pos = 0;
  // NCCL's order: '^' first, then '='.
  if (pos < raw.size() && raw[pos] == '^') {
    s.exclude = true;
    ++pos;
  }
  if (pos < raw.size() && raw[pos] == '=') {
    s.exact = true;
    ++pos;
  }
  while (pos <= raw.size()) {
    std::size_t comma = raw.find(',', pos);
    if (comma == std::string::npos) comma = raw.size();
    std::string item = raw.substr(pos, comma - pos);
    item = item.substr(0, item.find(':'));  // NCCL ignores a ":port" suffix
    if (!item.empty()) s.names.push_back(std::move(item));
    pos = comma + 1;
  }
  if (s.names.empty()) return make_error(Errc::invalid_argument, "names no interface");
  return s;
}

Expected<int> parse_socket_family(const std::string& value) {
  if (value == "AF_INET") return AF_INET;
  if (value == "AF_INET6") return AF_INET6;
  return make_error(Errc::invalid_argument, "expected AF_INET or AF_INET6");
}

std::string address_text(const IfAddr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.family != AF_INET && a.family != AF_INET6) return "?";
  if (!::inet_ntop(a.family, a.addr.data(), buf, sizeof buf)) return "?";
  return buf;
}

Expected<SocketIfChoice> choose_socket_if(const std::vector<IfAddr>& ifs, const SocketIfQuery& q) {
  const bool automatic = q.spec.empty();
  SocketIfSpec spec;
  if (!automatic) {
    auto parsed = parse_socket_ifname(q.spec);
    if (!parsed) return make_error(Errc::invalid_argument, q.spec_var + "='" + q.spec + "' " + parsed.error().message);
    spec = std::move(parsed).value();
  }
  // Loopback and bridges never, RDMA netdevs last: automatic mode, and a '^' list (excluding
  // some names does not ask for loopback).
  const bool guarded = automatic || spec.exclude;
  std::vector<std::string> seen;
  auto note = [&seen](const IfAddr& a, const std::string& why) {
    std::string entry = a.name + " " + address_text(a) + " (" + why + ")";
    if (std::find(seen.begin(), seen.end(), entry) == seen.end()) seen.push_back(std::move(entry));
  };
  using Key = std::tuple<bool, bool, bool, std::size_t>;  // link-local, RDMA netdev, IPv6, order
  const IfAddr* best = nullptr;
  Key best_key{};
  bool best_rail = false;
  for (std::size_t i = 0; i < ifs.size(); ++i) {
    const IfAddr& a = ifs[i];
    if (a.family != AF_INET && a.family != AF_INET6) continue;
    if (!a.up) {
      note(a, "down");
      continue;
    }
    if (!automatic && !spec.matches(a.name)) {
      note(a, spec.exclude ? "excluded" : "not listed");
      continue;
    }
    if (guarded) {
      if (const char* why = guarded_reason(a)) {
        note(a, why);
        continue;
      }
    }
    if (q.family != 0 && a.family != q.family) {
      note(a, std::string("not ") + family_name(q.family));
      continue;
    }
    const bool rail =
        guarded && std::find(q.rdma_netdevs.begin(), q.rdma_netdevs.end(), a.name) != q.rdma_netdevs.end();
    const Key key{is_v6_link_local(a), rail, a.family == AF_INET6, i};
    if (!best || key < best_key) {
      best = &a;
      best_key = key;
      best_rail = rail;
    }
  }
  if (best) {
    SocketIfChoice c;
    c.name = best->name;
    c.family = best->family;
    c.link_local = is_v6_link_local(*best);
    c.address = address_text(*best) + (c.link_local ? "%" + best->name : "");
    c.rdma_netdev = best_rail;
    return c;
  }
  std::string msg;
  if (automatic)
    msg = "no interface for the plugin's TCP handshakes: " + q.spec_var +
          " is unset (or empty) and automatic selection never takes loopback, docker* or virbr*";
  else
    msg = q.spec_var + "='" + q.spec + "' matches no usable interface";
  if (q.family != 0) msg += std::string(" with ") + q.family_var + "=" + family_name(q.family);
  msg += "; seen: ";
  if (seen.empty()) msg += "no IPv4 or IPv6 address at all";
  constexpr std::size_t kMaxListed = 16;
  for (std::size_t i = 0; i < seen.size() && i < kMaxListed; ++i) msg += (i ? ", " : "") + seen[i];
  if (seen.size() > kMaxListed) msg += ", and " + std::to_string(seen.size() - kMaxListed) + " more";
  if (automatic) msg += "; set " + q.spec_var + " (e.g. =lo for a single-host run)";
  return make_error(Errc::not_found, msg);
}

}  // namespace nccl_ha::net
