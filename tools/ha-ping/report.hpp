// ha-ping results: one line per rail and size, a verdict per rail, optional JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ha_ping {

enum class Health { healthy, down, degraded, unreachable, error };
const char* to_string(Health h) noexcept;

struct LatencyStats {
  double min_us = 0, median_us = 0, p99_us = 0;
  std::uint32_t samples = 0;
};
// Summarises round-trip samples (microseconds); one-way latency is reported as RTT / 2.
LatencyStats summarize_rtt(std::vector<double> rtt_us);

struct SizeResult {
  std::uint64_t size = 0;
  bool has_latency = false;
  LatencyStats latency;
  bool has_bandwidth = false;
  double bw_mib_s = 0;
};

struct RailReport {
  std::size_t index = 0;
  std::string local;        // "rxe0:1"
  std::string local_netdev;
  std::string peer;         // the peer's rail name
  Health health = Health::healthy;
  std::string reason;
  std::vector<SizeResult> sizes;
  double post_send_max_us = 0;     // bare ibv_post_send wall time on this rail
  double post_send_median_us = 0;
  std::size_t post_send_calls = 0;
};

struct Report {
  std::string role;  // "client" / "server"
  std::string peer;  // the peer's control address
  std::string fatal; // set when nothing could be tested (peer unreachable, ...)
  std::vector<RailReport> rails;
};

void print_text(const Report& r, std::FILE* out);
void print_json(const Report& r, std::FILE* out);
// 0 all rails healthy; 1 a rail is not; 2 fatal.
int exit_code(const Report& r);

}  // namespace ha_ping
