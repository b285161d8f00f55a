// ha-ping command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nccl_ha/reactor/expected.hpp"

namespace ha_ping {

struct Options {
  std::string peer;                 // empty: server mode; else the server's management host[:port]
  std::uint16_t port = 18600;       // control TCP port
  std::string bind = "0.0.0.0";     // server: listen address
  std::vector<std::string> rails;   // empty: every port; entries are dev, dev:port or an index
  std::vector<std::uint64_t> sizes{8, 4096, 65536, 1048576};
  std::uint32_t iters = 200;        // ping-pong round trips per size
  std::uint32_t bw_iters = 64;      // streamed writes per size
  std::uint32_t window = 8;         // writes in flight
  double min_bw = 0;                // MiB/s; below it a rail is DEGRADED (0: no threshold)
  std::uint32_t timeout_ms = 30000; // peer wait and per-phase bound
  std::uint64_t token = 0x68612d70696e6721ull;  // both sides must agree ("ha-ping!")
  bool json = false;
  std::string json_file;             // also write the JSON report here
  bool help = false;
};

nccl_ha::Expected<Options> parse_options(int argc, char** argv);
const char* usage();

// "8,4K,1M" -> {8, 4096, 1048576}
nccl_ha::Expected<std::vector<std::uint64_t>> parse_sizes(const std::string& list);

}  // namespace ha_ping
