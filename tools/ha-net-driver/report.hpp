// ha-net-driver: everything a run measured, the human summary (stderr) and the JSON report.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "plugin.hpp"
#include "profiler_standin.hpp"
#include "sysinfo.hpp"

namespace hnd {

struct Check {
  std::string name;
  bool ok = false;
  std::string detail;
};

// Counters of one data phase (both directions as seen from this rank).
struct Integrity {
  bool ran = false;
  std::uint64_t messages_sent = 0, bytes_sent = 0;
  std::uint64_t messages_received = 0, bytes_received = 0;
  std::uint64_t mismatches = 0;        // received messages with at least one wrong byte
  std::uint64_t mismatched_bytes = 0;
  std::uint64_t size_errors = 0;       // test() size of a receive != size sent
  std::uint64_t overruns = 0;          // bytes written past the message into the receive buffer
  std::uint64_t send_size_mismatches = 0;      // test() of an isend wrote a size != sent (warning)
  std::uint64_t optional_size_mismatches = 0;  // size differs on an optional-completion receive (warning)
  std::uint64_t isend_retries = 0, irecv_retries = 0;  // NULL requests ("try again")
  std::string flush = "not run";       // iflush result: "null request" | "completed" | "not run"
  std::uint64_t flushes = 0;           // --flush-each: iflush requests completed (NULL ones not counted)
  double seconds = 0;
  bool failed() const { return mismatches || size_errors || overruns; }
  void add(const Integrity& o);
};

// Completions of the integrity phase over time, in bins of kBinMs (preallocated at the start of
// the phase for the whole --timeout bound: no allocation per message). Each completion's
// steady-clock time also feeds the longest gap between consecutive completions.
struct Timeline {
  static constexpr int kBinMs = 10;
  static constexpr std::size_t kMaxBins = 360000;  // 1 hour; later completions only count in totals
  struct Dir {
    std::vector<std::uint64_t> bytes;
    std::vector<std::uint32_t> msgs;
    std::uint64_t total_msgs = 0, total_bytes = 0;
    std::int64_t first_ns = 0, last_ns = 0;          // steady clock; 0: none yet
    std::int64_t max_gap_ns = 0, max_gap_at_ns = 0;  // the gap's start, from the phase start
  };
  bool ran = false;
  bool truncated = false;  // the phase outlasted kMaxBins
  std::int64_t start_ns = 0, end_ns = 0;  // steady clock
  std::int64_t start_unix_ms = 0;         // wall clock of start_ns
  Dir recv, send;

  void start(double bound_s);    // allocates (or clears) the bins for a phase of at most bound_s
  void reserve(double bound_s);  // allocates them ahead (--check-resources: before the first snapshot)
  void add(Dir& d, std::int64_t t_ns, std::uint64_t msgs, std::uint64_t bytes);
  void finish(std::int64_t t_ns) {
    if (ran && end_ns == 0) end_ns = t_ns;
  }
};

// A peer abort (or lost management connection) seen during a data phase with --outlive-peer.
struct PeerAbort {
  std::int64_t ns = 0;       // steady clock; 0: none
  std::int64_t unix_ms = 0;  // wall clock
  std::string reason;
};

// An --idle window the integrity phase actually took (wall clock; end_unix_ms is updated while it
// lasts, so a window cut short by an error ends where the error was seen).
struct IdleTaken {
  std::int64_t at_ms = 0, duration_ms = 0;  // as asked (AT_MS:DURATION_MS)
  std::int64_t start_unix_ms = 0, end_unix_ms = 0;
  std::int64_t start_ms = 0;                // from the phase start, as taken
};

// The plugin call whose error ended the run (from check()).
struct PluginCallError {
  std::string call;  // e.g. "test(irecv)"
  int code = 0;      // ncclResult_t
  std::int64_t unix_ms = 0;
  std::string phase;
};

// Clock offset to the peer, measured over the management connection at start-up (the best of
// several round trips): peer wall clock = ours + offset_ms, within +- rtt_ms / 2.
struct ClockSync {
  double offset_ms = 0;
  double rtt_ms = 0;
};

struct BwResult {
  std::size_t size = 0;
  std::uint64_t messages = 0, bytes = 0;
  double seconds = 0, mib_s = 0, msgs_per_s = 0;
  Integrity counters;
};

struct LatResult {
  std::size_t size = 0;
  int iters = 0;
  double min_us = 0, median_us = 0, p99_us = 0;  // RTT/2
  Integrity counters;
};

struct CommsResult {
  bool ran = false;
  int n = 0;
  Snapshot before, after_open, after_close;
  double connect_ms = 0;
  double rss_per_comm_kib = 0;   // (after_open - before) / n, one comm = one send + one recv comm
  bool fds_returned = false;
  double fds_wait_ms = 0;         // how long after the last close the fd count took to return (bound 10 s:
                                  // the plugin reaps closed comms' QPs, CQs and channels in the background)
  std::uint64_t messages_ok = 0;  // one small message per pair and direction, verified
  double held_s = 0;              // --comms-hold: seconds the pairs were kept open after their messages
};

// --churn N: extra comm pairs opened and closed during the integrity phase (churn.hpp).
struct ChurnStats {
  bool ran = false;
  int target = 0;                // --churn N
  int dev = 0;                   // the device the pairs use (--churn-dev, else --dev)
  double spacing_ms = 0;         // the pace: --min-seconds / N (0: back to back)
  std::uint64_t opened = 0;      // pairs whose connect and accept both returned a comm
  std::uint64_t closed = 0;      // pairs done: message both ways, deregMr, closeSend, closeRecv
  std::uint64_t messages_ok = 0;  // received churn messages with the right size and bytes
  std::uint64_t bad_messages = 0;
  std::uint64_t connect_calls = 0, accept_calls = 0, isend_retries = 0, irecv_retries = 0;
  double connect_ms_max = 0, connect_ms_total = 0;  // from listen to both comms
  double pair_ms_max = 0;                            // from listen to closeRecv
  double late_ms_max = 0;  // the longest a pair started after it was due (the previous one lasted)
  std::uint64_t connect_failures = 0;      // --churn-retry: attempts abandoned (here or at the peer)
  std::uint64_t drained_connects = 0;      // abandoned connects still in progress, driven to their end
  std::vector<std::string> failure_lines;  // the first 5 reasons
};

struct ConnectStats {
  double ms = 0;
  std::uint64_t connect_calls = 0, accept_calls = 0;
};

// One step of a --fault scenario: a plugin call (or a loop of calls) and what it returned.
struct FaultStep {
  std::string name;               // what was done, e.g. "connect with a flipped token"
  std::string call;               // the entry point whose result is recorded
  std::string expect;             // "error" (any result != ncclSuccess) or "success"
  int code = 0;                   // the ncclResult_t returned
  std::string result;             // its name
  double ms = 0;                  // from the step's first call to its outcome
  std::uint64_t calls = 0;        // calls of `call` in the step
  std::optional<bool> comm_null;  // connect/listen/accept/isend: the returned comm or request stayed NULL
  std::optional<double> since_peer_gone_ms;  // peer-death: from the peer's management EOF to the error
                                             // (negative: the error was seen first)
  bool ok = false;
  std::string detail;
};

struct FaultReport {
  std::string name;  // --fault NAME; empty: no fault scenario
  std::vector<FaultStep> steps;
  std::vector<std::pair<std::string, std::uint64_t>> counts;  // flood: connectors made, by kind
};

struct Report {
  int rank = -1;
  std::string peer;
  std::string plugin_path;
  int api = 0;
  std::string table_name;
  std::vector<std::string> exported;
  std::string params;
  int ndev = -1;
  int dev = 0;
  std::optional<Properties> props;    // of --dev
  std::vector<Properties> all_props;  // every device, index = device
  std::vector<Check> checks;  // property sanity, resource checks
  ConnectStats connect;
  std::array<CallStat, kEntries> calls{};
  Integrity integrity;
  Timeline timeline;                          // of the integrity phase
  std::optional<std::int64_t> phase_start_unix_ms;  // wall clock at the integrity phase's start
  std::optional<PluginCallError> plugin_error;
  PeerAbort peer_abort;
  std::vector<IdleTaken> idle_windows;        // --idle windows taken in the integrity phase
  std::optional<ClockSync> clock;
  std::vector<LatResult> latency;
  std::vector<BwResult> bandwidth;
  CommsResult comms;
  ChurnStats churn;
  std::optional<Snapshot> before_init, after_close, after_dlclose;
  std::optional<double> linger_ms;  // --linger: how long after dlclose the thread count took to return
  double finalize_settle_ms = 0;     // after finalize returned, until the fds were back (or the bound)
  // --check-resources: after the ring is connected (settled), and after the integrity phase,
  // before closing: at once (stream_end_first) and once it matched after_connect or the settle
  // bound passed (stream_end, stream_settle_ms after the phase ended).
  std::optional<Snapshot> after_connect, stream_end_first, stream_end;
  double stream_settle_ms = 0;
  std::string ring_send_comm, ring_recv_comm;  // the ring's comm pointers ("0x..."), as the plugin's stats name them
  FaultReport fault;
  std::uint64_t plugin_warnings = 0;
  prof::Summary profiler;  // what the plugin told NCCL's profiler (profiler_standin.hpp)
  std::vector<std::string> plugin_warning_lines;
  bool peer_gone = false;  // the peer is known dead (--fault peer-death): no result exchange
  std::optional<bool> peer_ok;
  std::string peer_detail;
  std::vector<std::string> errors;
  Fail result = Fail::ok;
  std::string phase = "start";  // last phase entered (for errors and the watchdog)

  // Records an error; the exit status is the first non-verify failure, else verify.
  void add_failure(Fail kind, const std::string& msg);
  void check(const std::string& name, bool ok, const std::string& detail = "");
};

void print_summary(const Report& r);
// Returns false (and warns) if the file cannot be written.
bool write_json(const Report& r, const std::string& path);

}  // namespace hnd
