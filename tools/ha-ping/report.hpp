// ha-ping results: one line per rail and size, a verdict per rail, optional JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
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
  int speed_mbps = 0;       // the port's active link speed
  // QoS read back from the connected QP (ibv_query_qp); has_qos false when never connected.
  bool has_qos = false;
  int qos_sl = -1, qos_tclass = -1, qos_gid_index = -1;
  unsigned qos_requested_tclass = 0, qos_requested_sl = 0;  // what went into the RTR transition
  std::string qos_error;    // ibv_query_qp failed
  std::optional<double> min_bw_mib_s;  // the threshold applied to this rail (MiB/s)
};

// The effective settings of one session (the server reports what the client asked for).
struct Settings {
  std::vector<std::uint64_t> sizes;
  std::uint32_t iters = 0, bw_iters = 0, duration_s = 0, tx_depth = 0, timeout_s = 0;
  double min_bw = 0;
  bool min_bw_percent = false;
  unsigned tclass = 0, sl = 0;
  std::string tclass_source, sl_source;
  std::optional<std::uint32_t> gid_index;
  std::string ib_dev;
  std::uint32_t ib_port = 0;
  bool report_gbits = false;
};

struct Report {
  std::string role;  // "client" / "server"
  std::string peer;  // the peer's control address
  std::string fatal; // set when nothing could be tested (peer unreachable, ...)
  std::string host;  // gethostname()
  std::string time_iso;         // start of the session, ISO 8601 UTC
  std::int64_t time_unix_ms = 0;
  std::uint64_t client = 0;     // server: 1-based sequence number of this client (0: not a server)
  Settings settings;
  std::vector<RailReport> rails;
};

// Fills host and time (now).
void stamp(Report& r);
// Bandwidth in the report's unit, and the unit's name ("MiB/s" / "Gb/s").
double bw_in_unit(double mib_s, bool gbits) noexcept;
const char* bw_unit(bool gbits) noexcept;
// The whole report as one JSON line (no newline).
std::string to_json(const Report& r);

void print_text(const Report& r, std::FILE* out);
void print_json(const Report& r, std::FILE* out);
// 0 all rails healthy; 1 a rail is not; 2 fatal.
int exit_code(const Report& r);

}  // namespace ha_ping
