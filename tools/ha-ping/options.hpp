// ha-ping command line (perftest-like option names where perftest has one).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nccl_ha/reactor/expected.hpp"

namespace ha_ping {

struct Options {
  std::string peer;                 // empty: server mode; else the server's management host[:port]
  std::uint16_t port = 18600;       // control TCP port
  std::string bind = "0.0.0.0";     // server: listen address
  std::vector<std::string> rails;   // empty: every port; entries are dev, dev:port or an index
  std::string ib_dev;               // -d: only this device's ports
  std::uint32_t ib_port = 0;        // -i: only this port number (0: every port)
  std::optional<std::uint32_t> gid_index;  // -x: GID index instead of the discovered one
  std::vector<std::uint64_t> sizes{8, 4096, 65536, 1048576};
  std::uint32_t iters = 200;        // ping-pong round trips per size
  std::uint32_t bw_iters = 64;      // streamed writes per size
  std::uint32_t duration_s = 0;     // -D: bandwidth phase runs this long per size (0: bw_iters writes)
  std::uint32_t window = 8;         // -t/--tx-depth (alias --window): writes in flight
  bool report_gbits = false;        // bandwidth in Gb/s (10^9 bit/s) instead of MiB/s
  double min_bw = 0;                // MiB/s, or percent of the link speed when min_bw_percent
  bool min_bw_percent = false;
  std::uint32_t timeout_ms = 30000; // --timeout: peer wait and per-phase bound
  std::uint8_t tclass = 0;          // -T: GRH traffic class (RoCE: DSCP << 2)
  std::string tclass_source = "default";  // "default", "HA_NCCL_IB_TC", "NCCL_IB_TC" or "--tclass"
  std::uint8_t sl = 0;              // -S: service level
  std::string sl_source = "default";
  std::uint32_t count = 1;          // server: clients to serve before exiting (0: --serve, forever)
  std::uint64_t max_size = 64ull << 20;  // server: --max-size, the largest size a client may ask for
  bool max_size_given = false;
  std::string token;                 // --token or $HA_PING_TOKEN (empty: none, anyone is served)
  std::string token_source;          // "--token", "HA_PING_TOKEN" or "" (none)
  bool json = false;
  std::string json_file;             // also write the JSON report here
  bool list = false;                 // --list: the plugin's view, no traffic
  std::string plugin;                // --plugin PATH for --list ("" : the default search)
  std::vector<std::vector<int>> fuse;  // --fuse A,B[,...] (repeatable) for --list: makeVDevice of those devices
  bool help = false;
  bool version = false;
};

// The environment variable that holds the token when --token is not given.
inline constexpr const char* kTokenEnv = "HA_PING_TOKEN";

// Environment lookup (getenv by default; tests inject their own).
using EnvLookup = std::function<const char*(const char*)>;

nccl_ha::Expected<Options> parse_options(int argc, char** argv, const EnvLookup& env = {});
const char* usage();

// "8,4K,1M" -> {8, 4096, 1048576}
nccl_ha::Expected<std::vector<std::uint64_t>> parse_sizes(const std::string& list);

// --min-bw as MiB/s for a link of `speed_mbps` (percent form); nullopt when the speed is unknown.
std::optional<double> min_bw_mib_s(const Options& o, int speed_mbps);

}  // namespace ha_ping
