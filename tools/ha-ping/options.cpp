#include "options.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "nccl_ha/net/env.hpp"
#include "token_option.hpp"

namespace ha_ping {
namespace {

using nccl_ha::Errc;
using nccl_ha::make_error;
using nccl_ha::Status;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    auto pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}

nccl_ha::Expected<std::uint64_t> parse_u64(const std::string& flag, const std::string& v, std::uint64_t min,
                                           std::uint64_t max) {
  auto n = nccl_ha::net::parse_int(v);
  if (!n || *n < 0 || static_cast<std::uint64_t>(*n) < min || static_cast<std::uint64_t>(*n) > max)
    return make_error(Errc::invalid_argument, flag + ": '" + v + "' is not an integer in [" + std::to_string(min) + ", " +
                                                  std::to_string(max) + "]");
  return static_cast<std::uint64_t>(*n);
}

// One option: short letter (0: none), long name, whether it takes a value, what it does.
struct Spec {
  char short_name;
  const char* long_name;
  bool takes_value;
  Status (*apply)(Options& o, const std::string& v);
};

template <class T>
Status set_uint(T& field, const char* flag, const std::string& v, std::uint64_t min, std::uint64_t max,
                std::uint64_t scale = 1) {
  auto n = parse_u64(flag, v, min, max);
  if (!n) return std::move(n).error();
  field = static_cast<T>(*n * scale);
  return {};
}

Status set_min_bw(Options& o, const std::string& v) {
  std::string num = v;
  o.min_bw_percent = !num.empty() && num.back() == '%';
  if (o.min_bw_percent) num.pop_back();
  char* end = nullptr;
  const double x = num.empty() ? -1 : std::strtod(num.c_str(), &end);
  if (num.empty() || *end != '\0' || !(x >= 0) || !std::isfinite(x))  // "inf", "1e999": no threshold
    return make_error(Errc::invalid_argument,
                      "--min-bw: '" + v + "' is neither a non-negative number (MiB/s) nor a percentage like 80%");
  if (o.min_bw_percent && (x <= 0 || x > 100))
    return make_error(Errc::invalid_argument, "--min-bw: '" + v + "': a percentage of the link speed is in (0%, 100%]");
  o.min_bw = x;
  return {};
}

const Spec kSpecs[] = {
    {'h', "help", false, [](Options& o, const std::string&) -> Status { return o.help = true, Status{}; }},
    {0, "version", false, [](Options& o, const std::string&) -> Status { return o.version = true, Status{}; }},
    {0, "json", false, [](Options& o, const std::string&) -> Status { return o.json = true, Status{}; }},
    {0, "json-file", true, [](Options& o, const std::string& v) -> Status { return o.json_file = v, Status{}; }},
    {'p', "port", true, [](Options& o, const std::string& v) { return set_uint(o.port, "--port", v, 1, 65535); }},
    {0, "bind", true, [](Options& o, const std::string& v) -> Status { return o.bind = v, Status{}; }},
    {0, "rails", true,
     [](Options& o, const std::string& v) -> Status {
       o.rails = split(v, ',');
       for (auto& r : o.rails)
         if (r.empty()) return make_error(Errc::invalid_argument, "--rails: empty entry in '" + v + "'");
       return {};
     }},
    {'d', "ib-dev", true,
     [](Options& o, const std::string& v) -> Status {
       if (v.empty()) return make_error(Errc::invalid_argument, "--ib-dev: empty device name");
       return o.ib_dev = v, Status{};
     }},
    {'i', "ib-port", true, [](Options& o, const std::string& v) { return set_uint(o.ib_port, "--ib-port", v, 1, 255); }},
    {'x', "gid-index", true,
     [](Options& o, const std::string& v) -> Status {
       std::uint32_t g = 0;
       if (auto s = set_uint(g, "--gid-index", v, 0, 255); !s) return s;
       return o.gid_index = g, Status{};
     }},
    {'s', "sizes", true,
     [](Options& o, const std::string& v) -> Status {
       auto s = parse_sizes(v);
       if (!s) return std::move(s).error();
       return o.sizes = *s, Status{};
     }},
    {0, "size", true,
     [](Options& o, const std::string& v) -> Status {
       auto s = parse_sizes(v);
       if (!s) return std::move(s).error();
       return o.sizes = *s, Status{};
     }},
    {'n', "iters", true, [](Options& o, const std::string& v) { return set_uint(o.iters, "--iters", v, 1, 1000000); }},
    {0, "bw-iters", true,
     [](Options& o, const std::string& v) { return set_uint(o.bw_iters, "--bw-iters", v, 1, 1000000); }},
    {'D', "duration", true,
     [](Options& o, const std::string& v) { return set_uint(o.duration_s, "--duration", v, 1, 3600); }},
    {'t', "tx-depth", true, [](Options& o, const std::string& v) { return set_uint(o.window, "--tx-depth", v, 1, 128); }},
    {0, "window", true, [](Options& o, const std::string& v) { return set_uint(o.window, "--window", v, 1, 128); }},
    {0, "report_gbits", false, [](Options& o, const std::string&) -> Status { return o.report_gbits = true, Status{}; }},
    {0, "report-gbits", false, [](Options& o, const std::string&) -> Status { return o.report_gbits = true, Status{}; }},
    {0, "min-bw", true, set_min_bw},
    {0, "timeout", true,
     [](Options& o, const std::string& v) { return set_uint(o.timeout_ms, "--timeout", v, 1, 3600, 1000); }},
    {'T', "tclass", true,
     [](Options& o, const std::string& v) -> Status {
       o.tclass_source = "--tclass";
       return set_uint(o.tclass, "--tclass", v, 0, 255);
     }},
    {'S', "sl", true,
     [](Options& o, const std::string& v) -> Status {
       o.sl_source = "--sl";
       return set_uint(o.sl, "--sl", v, 0, 15);
     }},
    {0, "count", true, [](Options& o, const std::string& v) { return set_uint(o.count, "--count", v, 1, 1000000); }},
    {0, "serve", false, [](Options& o, const std::string&) -> Status { return o.count = 0, Status{}; }},
    {0, "token", true,
     [](Options& o, const std::string& v) -> Status {
       // Checked with the environment's after parsing (an empty one is an error there).
       o.token = v;
       o.token_source = "--token";
       return {};
     }},
    {0, "max-size", true,
     [](Options& o, const std::string& v) -> Status {
       auto s = parse_sizes(v);
       if (!s || s->size() != 1)
         return make_error(Errc::invalid_argument,
                           "--max-size: '" + v + "' is not one size in [1, 1G] (K/M/G suffixes)");
       o.max_size_given = true;
       return o.max_size = s->front(), Status{};
     }},
    {0, "list", false, [](Options& o, const std::string&) -> Status { return o.list = true, Status{}; }},
    {0, "fuse", true,
     [](Options& o, const std::string& v) -> Status {
       std::vector<int> devs;
       for (auto item : split(v, ',')) {
         auto n = nccl_ha::net::parse_int(std::string(item));
         if (!n || *n < 0 || *n > 1024)
           return make_error(Errc::invalid_argument, "--fuse: '" + v + "' is not a list of device numbers (0,1)");
         devs.push_back(static_cast<int>(*n));
       }
       if (devs.empty()) return make_error(Errc::invalid_argument, "--fuse: empty list");
       o.fuse.push_back(std::move(devs));
       return Status{};
     }},
    {0, "plugin", true,
     [](Options& o, const std::string& v) -> Status {
       if (v.empty()) return make_error(Errc::invalid_argument, "--plugin: empty path");
       return o.plugin = v, Status{};
     }},
};

const Spec* find_long(std::string_view name) {
  for (const auto& s : kSpecs)
    if (name == s.long_name) return &s;
  return nullptr;
}

const Spec* find_short(char c) {
  for (const auto& s : kSpecs)
    if (s.short_name == c) return &s;
  return nullptr;
}

// QoS default from the environment, the plugin's variables and order: the first variable that is
// set wins, -1 means unset; a malformed value is an error here (the plugin WARNs and ignores it,
// but a link check that silently does not apply the asked-for QoS would lie).
Status env_qos(const EnvLookup& env, const char* ha_name, const char* nccl_name, std::uint64_t max, std::uint8_t& value,
               std::string& source) {
  for (const char* name : {ha_name, nccl_name}) {
    const char* v = env(name);
    if (!v) continue;
    auto n = nccl_ha::net::parse_int(v);
    if (!n || *n < -1 || *n > static_cast<std::int64_t>(max))
      return make_error(Errc::invalid_argument, std::string(name) + "='" + v + "' is not an integer in [0, " +
                                                    std::to_string(max) + "] (or -1: unset)");
    if (*n == -1) return {};  // the plugin's "unset": the default (0), as in the plugin
    value = static_cast<std::uint8_t>(*n);
    source = name;
    return {};
  }
  return {};
}

}  // namespace

const char* usage() {
  return "usage: ha-ping [options]             run the server on this host (one client by default)\n"
         "       ha-ping [options] HOST[:PORT] check every rail against the server on HOST\n"
         "       ha-ping --list [--plugin PATH] the nccl-ha plugin's view of this host, no traffic\n"
         "\n"
         "Long options also take --opt=value.\n"
         "  -p, --port=N          control TCP port (default 18600)\n"
         "      --bind=ADDR       server listen address (default 0.0.0.0)\n"
         "      --rails=LIST      ports to check: dev, dev:port or index, comma separated\n"
         "                        (default: every port, sorted by device; HA_NCCL_IB_HCA filters)\n"
         "  -d, --ib-dev=DEV      only the ports of device DEV\n"
         "  -i, --ib-port=N       only port N (of every device, or of -d DEV)\n"
         "  -x, --gid-index=N     GID index to use (default: the one nccl-ha discovers, RoCE v2 first)\n"
         "  -s, --size[s]=LIST    message sizes, K/M/G suffixes, at most 1G (default 8,4K,64K,1M)\n"
         "  -n, --iters=N         ping-pong round trips per size (default 200)\n"
         "      --bw-iters=N      streamed RDMA writes per size (default 64)\n"
         "  -D, --duration=SEC    bandwidth phase streams for SEC seconds per size instead of --bw-iters\n"
         "  -t, --tx-depth=N      RDMA writes in flight, 1..128 (default 8; --window is an alias)\n"
         "      --report_gbits    bandwidth in Gb/s instead of MiB/s\n"
         "      --min-bw=X        a rail below X at its largest size is DEGRADED: X in MiB/s, or\n"
         "                        X% of the port's link speed (e.g. 80%)\n"
         "      --timeout=SEC     bound for reaching the peer, for each control message and for a\n"
         "                        test phase without any completion (default 30); a server caps the\n"
         "                        client's at its own, and a server that waits for a given number of\n"
         "                        clients gives up after it without one\n"
         "  -T, --tclass=N        traffic class of the QPs (RoCE: DSCP << 2), 0..255\n"
         "                        (default HA_NCCL_IB_TC, else NCCL_IB_TC, else 0)\n"
         "  -S, --sl=N            service level, 0..15 (default HA_NCCL_IB_SL, else NCCL_IB_SL, else 0)\n"
         "      --count=N         server: serve N clients one after another, then exit (default 1)\n"
         "      --serve           server: serve clients one after another until killed\n"
         "      --max-size=SIZE   server: the largest message size a client may ask for (default 64M,\n"
         "                        at most 1G; the server pins twice that per rail); a client asking\n"
         "                        for more is refused\n"
         "      --token=SECRET    shared secret, default $HA_PING_TOKEN: the server serves only clients\n"
         "                        that prove they hold it (HMAC-SHA256 challenge-response; the secret\n"
         "                        never crosses the wire), the client talks only to such a server.\n"
         "                        Without a token ANYONE WHO CAN REACH THE SERVER'S PORT CAN USE IT.\n"
         "                        Prefer the variable: a command line is visible to every local user\n"
         "      --json            machine-readable report on stdout (server: one JSON line per client)\n"
         "      --json-file=F     also write the JSON report to F (server: one line per client)\n"
         "      --list            load the plugin, print its devices, standby ports, budgets and settings\n"
         "      --plugin=PATH     plugin for --list (default: libnccl-net-ha.so next to ha-ping)\n"
         "      --fuse=A,B[,..]   with --list: ask makeVDevice to fuse those devices (repeatable)\n"
         "      --version         print the version\n"
         "\n"
         "A server drops a connection that does not prove the token or says nothing within 5 s (it\n"
         "answers a wrong proof with \"authentication failed\" only), and ends a session whose client\n"
         "stays silent for the session's timeout; then it waits for the next client.\n"
         "\n"
         "Exit status: 0 every rail healthy; 1 a rail is down, degraded or unreachable;\n"
         "             2 usage error, the peer could not be reached at all, or it refused the\n"
         "               request (authentication failed, a size above the server's --max-size).\n";
}

nccl_ha::Expected<std::vector<std::uint64_t>> parse_sizes(const std::string& list) {
  std::vector<std::uint64_t> out;
  for (auto item : split(list, ',')) {
    const std::string written = item;
    std::uint64_t mult = 1;
    if (!item.empty() && (item.back() == 'K' || item.back() == 'k')) mult = 1024, item.pop_back();
    else if (!item.empty() && (item.back() == 'M' || item.back() == 'm')) mult = 1024 * 1024, item.pop_back();
    else if (!item.empty() && (item.back() == 'G' || item.back() == 'g')) mult = 1024 * 1024 * 1024, item.pop_back();
    auto n = parse_u64("--sizes", item, 1, 1ull << 30);
    if (!n) return std::move(n).error();
    if (*n * mult > (1ull << 30)) return make_error(Errc::invalid_argument, "--sizes: " + written + " is larger than 1 GiB");
    out.push_back(*n * mult);
  }
  if (out.empty()) return make_error(Errc::invalid_argument, "--sizes: empty list");
  return out;
}

nccl_ha::Expected<Options> parse_options(int argc, char** argv, const EnvLookup& env_in) {
  const EnvLookup env = env_in ? env_in : EnvLookup([](const char* n) -> const char* { return std::getenv(n); });
  Options o;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      if (!o.peer.empty())
        return make_error(Errc::invalid_argument, "more than one HOST given ('" + o.peer + "', '" + a + "')");
      o.peer = a;
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    const Spec* spec = nullptr;
    std::string written;  // the option as the user wrote it, for messages
    std::optional<std::string> value;
    if (a[1] == '-') {
      const auto eq = a.find('=');
      written = a.substr(0, eq);
      if (eq != std::string::npos) value = a.substr(eq + 1);
      spec = find_long(std::string_view(written).substr(2));
    } else {
      written = a.substr(0, 2);
      spec = find_short(a[1]);
      if (a.size() > 2) value = a.substr(2);  // -t16
    }
    if (!spec) return make_error(Errc::invalid_argument, "unknown option " + written);
    if (!spec->takes_value && value)
      return make_error(Errc::invalid_argument, written + " takes no value (got '" + *value + "')");
    if (spec->takes_value && !value) {
      if (i + 1 >= argc) return make_error(Errc::invalid_argument, written + " needs a value");
      value = argv[++i];
    }
    if (auto s = spec->apply(o, value.value_or("")); !s) {
      // Name the option as written when the handler used its long name.
      auto e = std::move(s).error();
      const std::string long_name = std::string("--") + spec->long_name;
      if (written != long_name && e.message.rfind(long_name, 0) == 0)
        e.message = written + "/" + e.message;
      return e;
    }
  }
  if (o.tclass_source == "default")
    if (auto s = env_qos(env, "HA_NCCL_IB_TC", "NCCL_IB_TC", 255, o.tclass, o.tclass_source); !s) return std::move(s).error();
  if (o.sl_source == "default")
    if (auto s = env_qos(env, "HA_NCCL_IB_SL", "NCCL_IB_SL", 15, o.sl, o.sl_source); !s) return std::move(s).error();
  if (o.duration_s == 0 && o.window > o.bw_iters) o.window = o.bw_iters;
  if (!o.fuse.empty() && !o.list) return make_error(Errc::invalid_argument, "--fuse is a --list option");
  if (o.list && !o.peer.empty())
    return make_error(Errc::invalid_argument, "--list takes no HOST ('" + o.peer + "')");
  if (o.count != 1 && !o.peer.empty())
    return make_error(Errc::invalid_argument, "--count / --serve are server options (a HOST was given)");
  if (o.max_size_given && !o.peer.empty())
    return make_error(Errc::invalid_argument, "--max-size is a server option (a HOST was given)");
  std::optional<std::string> token_option;
  if (o.token_source == "--token") token_option = o.token;
  ha_tools::Token token;
  if (auto bad = ha_tools::resolve_token(token_option, kTokenEnv, env(kTokenEnv), token))
    return make_error(Errc::invalid_argument, *bad);
  o.token = std::move(token.value);
  o.token_source = std::move(token.source);
  return o;
}

std::optional<double> min_bw_mib_s(const Options& o, int speed_mbps) {
  if (!o.min_bw_percent) return o.min_bw;
  if (speed_mbps <= 0) return std::nullopt;
  return o.min_bw / 100.0 * speed_mbps * 1e6 / 8.0 / (1024.0 * 1024.0);
}

}  // namespace ha_ping
