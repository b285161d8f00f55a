// ha-net-driver command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hnd {

// --idle AT_MS:DURATION_MS: an idle window of the integrity phase (per rank).
struct IdleWindow {
  std::int64_t at_ms = 0;        // from the phase start
  std::int64_t duration_ms = 0;
};

struct Options {
  std::string plugin;                 // --plugin PATH (required)
  int api = 0;                        // --api N: force ncclNetPlugin_vN (0 = newest exported)
  int rank = -1;                      // --rank 0|1
  std::uint16_t listen_port = 0;      // rank 0: --listen-port P (0 = any, see --port-file)
  std::string bind = "0.0.0.0";       // rank 0: --bind ADDR
  std::string token;                  // --token or $HA_NET_DRIVER_TOKEN: the management connection's
  std::string token_source;           // shared secret ("": none); "--token", the variable or ""
  std::string port_file;              // rank 0: --port-file F receives the bound port
  std::string peer_host;              // rank 1: --peer HOST:PORT
  std::uint16_t peer_port = 0;
  int dev = 0;                        // --dev N
  std::vector<int> fuse;              // --fuse A,B[,...]: makeVDevice of those devices; the run uses it
  std::vector<std::size_t> sizes{0, 1, 8, 4096, 65536, 1 << 20, 4 << 20};  // --sizes
  std::uint64_t messages = 1000;      // --messages N per direction (0: no integrity phase)
  int inflight = 8;                   // --inflight W: isend requests in flight per direction
  int group = 1;                      // --group G: buffers per grouped irecv (W/G irecvs in flight)
  bool optional_recv = false;         // --optional-recv (v9+, n == 1 receives)
  bool test_all = false;              // --test-order all (default oldest: NCCL tests in order)
  bool pingpong = false;              // --pingpong
  int iters = 100;                    // --iters N round trips per size
  int lat_ahead = 2;                  // --lat-ahead N receives kept posted in the ping-pong
  bool bw = false;                    // --bw
  std::uint64_t bw_messages = 64;     // --bw-messages N per size
  std::uint64_t bw_bytes = 0;         // --bw-bytes B: per size, B / size messages instead (0: off)
  int comms = 0;                      // --comms N (0: skip)
  double comms_hold_s = 0;            // --comms-hold S: keep the N pairs open (no plugin call) S seconds
  int comms_rounds = 1;               // --comms-rounds R: verified messages per pair and direction
  int churn = 0;                      // --churn N: open/close N extra comm pairs during the integrity phase
  int churn_dev = -1;                 // --churn-dev N: their device (-1: --dev)
  bool churn_retry = false;           // --churn-retry: a failed connect/accept of a pair is retried
  bool check_resources = false;       // --check-resources: fds/threads/QPs/MRs after the stream == after connect
  int traffic_class = -1;             // --traffic-class N (v10+ config)
  double timeout_s = 60;              // --timeout S: per phase, per peer wait, per plugin call
  std::string json;                   // --json FILE
  bool dlclose = true;                // --no-dlclose
  bool release_checks = true;         // --no-release-checks: what the plugin releases is reported, not checked
  std::string fault;                  // --fault NAME: an error-path scenario instead of the ring (fault.hpp)
  bool sampled_verify = false;        // --verify sampled: integrity phase checks 3 windows per message
  bool one_way = false;               // --one-way: integrity phase only rank 1 -> rank 0
  bool flush_each = false;            // --flush-each: iflush every received group with data
  bool dmabuf = false;                // --dmabuf: the ring's buffers from memfds, registered with regMrDmaBuf
  double min_seconds = 0;             // --min-seconds S: integrity phase streams at least S seconds
  std::string phase_file;             // --phase-file F: "<phase> <unix_ms>" at each phase change
  double close_late_s = 0;            // --close-late S: this rank closes its ring S s after the peer's close
  double linger_s = 0;                // --linger S: after dlclose, wait up to S s for the thread count to return
  std::string stop_file;              // --stop-file F: with min_seconds, send on until F exists
  std::string wait_file;              // --wait-file F: --fault dead-rail waits for F before closing
  double outlive_peer_s = 0;          // --outlive-peer S: on a peer abort in a data phase, keep
                                      // driving our plugin up to S seconds for its own error
  std::vector<IdleWindow> idle;       // --idle AT_MS:DURATION_MS[,...] (repeatable): integrity phase
                                      // windows without any plugin call, sorted, not overlapping
  bool help = false;
  bool version = false;                // --version: print "ha-net-driver <version>", exit 0
};

// The environment variable that holds the token when --token is not given.
inline constexpr const char* kTokenEnv = "HA_NET_DRIVER_TOKEN";
// Environment lookup (getenv by default; tests inject their own).
using EnvLookup = std::function<const char*(const char*)>;

// Throws DriverError(usage).
Options parse_options(int argc, char** argv, const EnvLookup& env = {});
// --help: the options, with the --fault lines (fault_usage(), fault.hpp) in their place.
std::string usage(const std::string& fault_lines);
// "0,1,8,4K,1M" -> {0, 1, 8, 4096, 1048576}; K/M/G are powers of 1024. Throws DriverError(usage).
std::vector<std::size_t> parse_sizes(const std::string& list);
// "3000:6000,12000:500" -> {{3000, 6000}, {12000, 500}}, appended to out. Throws DriverError(usage).
void parse_idle(const std::string& list, std::vector<IdleWindow>& out);
// Canonical text of the parameters both ranks must agree on (exchanged in the hello).
std::string shared_params(const Options& o);

}  // namespace hnd
