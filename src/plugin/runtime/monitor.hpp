// Operators' observability, the pure parts: the %h / %p expansion of HA_NCCL_STATS_FILE and
// HA_NCCL_PROM_FILE, and the Prometheus text exposition of a snapshot (HA_NCCL_PROM_FILE, for
// node_exporter's textfile collector). The sampling of live comms is stats.cpp's; how the files
// are written, output_file.hpp's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nccl_ha::plugin {

// `pattern` with %h -> host, %p -> pid, %% -> %. Any other %x (and a trailing lone %) is kept as
// is and appended to *unknown (when given) for the caller to WARN about. Pure; unit-tested.
std::string expand_path(std::string_view pattern, std::string_view host, long pid,
                        std::vector<std::string>* unknown = nullptr);

// A comm's monotonic counters (process totals: live comms plus the closed ones folded in).
struct CommCounters {
  std::uint64_t failovers = 0;
  std::uint64_t failbacks = 0;
  std::uint64_t reprotections = 0;  // standbys re-established after a failover
  std::uint64_t reprotect_dropped = 0;  // the peer's re-protection requests not acted on (control_ops.hpp: RequestAction::drop)
  std::uint64_t replayed = 0;       // messages replayed on the new path
  std::uint64_t messages = 0;       // messages completed
  std::uint64_t bytes_sent = 0;     // send comms: bytes of completed sends
  std::uint64_t bytes_received = 0; // receive comms: bytes of completed receives
  CommCounters& operator+=(const CommCounters& o) noexcept;
};

// One live comm as the exporter sees it.
enum class Protection : std::uint8_t {
  protected_,   // standby up, no failover under way or asked for
  unprotected,  // no usable standby (none, down, connecting), or a switch under way or asked for
  failed        // no usable path left: the comm's sticky error is set
};
const char* protection_name(Protection p) noexcept;
struct CommSample {
  bool valid = false;            // false: never sampled yet (the comm was always busy)
  Protection protection = Protection::unprotected;
  std::string active_port;       // "rxe0:1"
  std::string standby_port;      // empty unless the standby is up
  CommCounters counters;
  // A fused device's member (CommBase::member: "rxe0+rxe1 2/2", else empty) and its own port
  // ("rxe1:1"): its bytes go to nccl_ha_member_bytes as well.
  std::string member;
  std::string home_port;
};

struct PortSample {
  std::string id;  // "rxe0:1"
  bool up = false;
};

struct PromSnapshot {
  std::string host;
  long pid = 0;
  std::vector<PortSample> ports;
  std::vector<CommSample> comms;  // live comms (invalid ones are left out)
  CommCounters closed;            // counters of the comms closed so far
  std::uint64_t unproven_closed = 0;  // sockets closed without a word: no proof of the secret (admission.hpp)
  std::uint64_t rescue_dropped = 0;   // proven rescue requests the comm's state did not call for (rescue.hpp)
};

// A Prometheus label value, escaped (\ " and newline).
std::string prom_escape(std::string_view v);
// The snapshot in the Prometheus text exposition format (# HELP / # TYPE, nccl_ha_* metrics,
// labels host and pid on every sample). Pure; unit-tested.
std::string format_prom(const PromSnapshot& s);

}  // namespace nccl_ha::plugin
