#include "options.hpp"

#include <cstdlib>
#include <string_view>

#include "nccl_ha/net/env.hpp"

namespace ha_ping {
namespace {

using nccl_ha::Errc;
using nccl_ha::make_error;

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

}  // namespace

const char* usage() {
  return "usage: ha-ping [options]            run the server on this host\n"
         "       ha-ping [options] HOST[:PORT] check every rail against the server on HOST\n"
         "\n"
         "  -p, --port N        control TCP port (default 18600)\n"
         "      --bind ADDR     server listen address (default 0.0.0.0)\n"
         "      --rails LIST    ports to check: dev, dev:port or index, comma separated\n"
         "                      (default: every port, sorted by device; HA_NCCL_IB_HCA filters)\n"
         "      --sizes LIST    message sizes, K/M suffixes (default 8,4K,64K,1M)\n"
         "  -n, --iters N       ping-pong round trips per size (default 200)\n"
         "      --bw-iters N    streamed RDMA writes per size (default 64)\n"
         "      --window N      writes in flight (default 8)\n"
         "      --min-bw MIBS   a rail below MIBS MiB/s at its largest size is DEGRADED\n"
         "  -t, --timeout SEC   bound for reaching the peer, for each control message and for a\n"
         "                      test phase without any completion (default 30)\n"
         "      --token HEX     session token both sides must share\n"
         "      --json          machine-readable report on stdout\n"
         "      --json-file F   also write the JSON report to F\n"
         "\n"
         "Exit status: 0 every rail healthy; 1 a rail is down, degraded or unreachable;\n"
         "             2 usage error, or the peer could not be reached at all.\n";
}

nccl_ha::Expected<std::vector<std::uint64_t>> parse_sizes(const std::string& list) {
  std::vector<std::uint64_t> out;
  for (auto item : split(list, ',')) {
    std::uint64_t mult = 1;
    if (!item.empty() && (item.back() == 'K' || item.back() == 'k')) mult = 1024, item.pop_back();
    else if (!item.empty() && (item.back() == 'M' || item.back() == 'm')) mult = 1024 * 1024, item.pop_back();
    auto n = parse_u64("--sizes", item, 1, 1ull << 30);
    if (!n) return std::move(n).error();
    if (*n * mult > (1ull << 30)) return make_error(Errc::invalid_argument, "--sizes: " + item + " is larger than 1 GiB");
    out.push_back(*n * mult);
  }
  if (out.empty()) return make_error(Errc::invalid_argument, "--sizes: empty list");
  return out;
}

nccl_ha::Expected<Options> parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> nccl_ha::Expected<std::string> {
      if (i + 1 >= argc) return make_error(Errc::invalid_argument, std::string(flag) + " needs a value");
      return std::string(argv[++i]);
    };
#define HA_PING_VALUE(flag)        \
  auto v = value(flag);            \
  if (!v) return std::move(v).error();
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--json-file") {
      HA_PING_VALUE("--json-file");
      o.json_file = *v;
    } else if (a == "-p" || a == "--port") {
      HA_PING_VALUE("--port");
      auto n = parse_u64("--port", *v, 1, 65535);
      if (!n) return std::move(n).error();
      o.port = static_cast<std::uint16_t>(*n);
    } else if (a == "--bind") {
      HA_PING_VALUE("--bind");
      o.bind = *v;
    } else if (a == "--rails") {
      HA_PING_VALUE("--rails");
      o.rails = split(*v, ',');
      for (auto& r : o.rails)
        if (r.empty()) return make_error(Errc::invalid_argument, "--rails: empty entry in '" + *v + "'");
    } else if (a == "--sizes") {
      HA_PING_VALUE("--sizes");
      auto s = parse_sizes(*v);
      if (!s) return std::move(s).error();
      o.sizes = *s;
    } else if (a == "-n" || a == "--iters") {
      HA_PING_VALUE("--iters");
      auto n = parse_u64("--iters", *v, 1, 1000000);
      if (!n) return std::move(n).error();
      o.iters = static_cast<std::uint32_t>(*n);
    } else if (a == "--bw-iters") {
      HA_PING_VALUE("--bw-iters");
      auto n = parse_u64("--bw-iters", *v, 1, 1000000);
      if (!n) return std::move(n).error();
      o.bw_iters = static_cast<std::uint32_t>(*n);
    } else if (a == "--window") {
      HA_PING_VALUE("--window");
      auto n = parse_u64("--window", *v, 1, 64);
      if (!n) return std::move(n).error();
      o.window = static_cast<std::uint32_t>(*n);
    } else if (a == "--min-bw") {
      HA_PING_VALUE("--min-bw");
      char* end = nullptr;
      o.min_bw = std::strtod(v->c_str(), &end);
      if (v->empty() || *end != '\0' || o.min_bw < 0)
        return make_error(Errc::invalid_argument, "--min-bw: '" + *v + "' is not a non-negative number");
    } else if (a == "-t" || a == "--timeout") {
      HA_PING_VALUE("--timeout");
      auto n = parse_u64("--timeout", *v, 1, 3600);
      if (!n) return std::move(n).error();
      o.timeout_ms = static_cast<std::uint32_t>(*n * 1000);
    } else if (a == "--token") {
      HA_PING_VALUE("--token");
      char* end = nullptr;
      o.token = std::strtoull(v->c_str(), &end, 16);
      if (v->empty() || *end != '\0' || o.token == 0)
        return make_error(Errc::invalid_argument, "--token: '" + *v + "' is not a non-zero hex number");
    } else if (!a.empty() && a[0] == '-') {
      return make_error(Errc::invalid_argument, "unknown option " + a);
    } else if (o.peer.empty()) {
      o.peer = a;
    } else {
      return make_error(Errc::invalid_argument, "more than one HOST given ('" + o.peer + "', '" + a + "')");
    }
#undef HA_PING_VALUE
  }
  if (o.window > o.bw_iters) o.window = o.bw_iters;
  return o;
}

}  // namespace ha_ping
