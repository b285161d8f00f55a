#include "options.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common.hpp"
#include "token_option.hpp"

namespace hnd {
namespace {

std::int64_t parse_num(const std::string& opt, const std::string& s, std::int64_t lo, std::int64_t hi) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0' || v < lo || v > hi)
    fail(Fail::usage, strf("%s: '%s' is not an integer in [%lld, %lld]", opt.c_str(), s.c_str(),
                           static_cast<long long>(lo), static_cast<long long>(hi)));
  return v;
}

// Seconds in (0, 86400], or [0, 86400] when zero_ok.
double parse_seconds(const std::string& opt, const std::string& v, bool zero_ok) {
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(zero_ok ? s >= 0 : s > 0) || s > 86400)
    fail(Fail::usage, strf("%s: expected seconds in %s0, 86400], got '%s'", opt.c_str(), zero_ok ? "[" : "(", v.c_str()));
  return s;
}

}  // namespace

namespace {
// The options (the --fault lines between the two parts: usage()).
constexpr const char* kUsageHead = R"(usage: ha-net-driver --plugin PATH --rank 0 --listen-port P [options]
       ha-net-driver --plugin PATH --rank 1 --peer HOST:PORT [options]

Drives an NCCL net plugin the way NCCL's proxy does, between two ranks.
  --plugin PATH        plugin .so (dlopen RTLD_NOW|RTLD_LOCAL; a bare NAME also tries libnccl-net-NAME.so)
  --api N              use ncclNetPlugin_vN (6..12); default: newest exported (v12 first)
  --rank 0|1           rank 0 listens for the management connection, rank 1 connects
  --listen-port P      rank 0: management TCP port (0: any free port, see --port-file)
  --bind ADDR          rank 0: management listen address (default 0.0.0.0)
  --port-file F        rank 0: write the bound management port to F once listening
  --peer HOST:PORT     rank 1: rank 0's management address
  --token SECRET       shared secret of the two ranks (default $HA_NET_DRIVER_TOKEN): rank 0 takes as
                       rank 1 only a connection that proves it holds it (HMAC-SHA256 challenge-response,
                       the secret never crosses the wire) and drops any other; rank 1 checks rank 0's
                       proof. Without a token ANY PROCESS THAT REACHES RANK 0'S PORT CAN BE RANK 1.
                       Prefer the variable: a command line is visible to every local user
  --dev N              plugin device index (default 0)
  --fuse A,B[,...]     fuse those devices into one (makeVDevice, as NCCL does for the ports it merges)
                       and run on the virtual device instead of --dev; refused: exit 3
  --sizes LIST         message sizes, e.g. 0,1,8,4K,64K,1M,4M (default); message k has size sizes[k % n]
  --messages N         integrity phase: messages per direction (default 1000, 0: skip)
  --one-way            integrity phase: only rank 1 sends and only rank 0 receives
  --verify full|sampled  integrity phase: check every byte (default), or only three 64-byte windows
                       per message (start, middle, end; for throughput measurements)
  --flush-each         integrity phase: iflush every received group that carried data and wait
                       for it before checking the data (NCCL's order for GPU buffers)
  --dmabuf             the ring's buffers are memfds, registered with regMrDmaBuf(fd, NCCL_PTR_CUDA) as
                       NCCL registers GPU memory on dma-buf nodes (the plugin must offer NCCL_PTR_DMABUF;
                       a memfd is no dma-buf: on Soft-RoCE only with the test bed's verbs shim)
  --min-seconds S      integrity phase: keep streaming (sizes cycling) until --messages were sent
                       AND S seconds passed; the sender tells the receiver the final count
  --stop-file F        with --min-seconds, this rank as a sender: keep streaming past S seconds until
                       F exists (a script ends the stream when its faults have played out)
  --inflight W         isend requests in flight per direction (default 8); the receiver keeps W/G
                       grouped irecvs in flight
  --group G            buffers per grouped irecv (default 1, at most the plugin's maxRecvs and W)
  --optional-recv      v9+: preset *request = NCCL_NET_OPTIONAL_RECV_COMPLETION before n == 1 irecvs
  --test-order O       oldest (default, like NCCL: test only the oldest request per direction) | all
  --pingpong           latency per size (RTT/2 min/median/p99), 1 request in flight
  --iters N            round trips per size (default 100; capped at 256 MiB per size, at least 5)
  --lat-ahead N        ping-pong: receives each rank keeps posted (default 2; the next one is posted
                       right after the rank's own send, like NCCL's proxy posting steps ahead);
                       1 = each posted just in time (rank 0 before its ping, rank 1 before its reply)
  --bw                 bandwidth per size, both directions at once, W requests in flight, MiB/s received
  --bw-messages N      messages per size and direction (default 64; capped at 1 GiB, at least W)
  --bw-bytes B         instead: B / size messages per size and direction (e.g. 64M; same caps)
  --comms N            open N send/recv comm pairs at once, measure RSS and fds, close them
  --comms-rounds R     the comms test moves R verified messages over each pair and direction, each
                       pair its next as soon as its last completed (phase 'comms rounds' with R > 1;
                       a copy delivered twice or lost fails: each round's bytes are its own)
  --comms-hold S       after their messages, keep the N pairs open S seconds without any plugin
                       call (phase 'comms hold'), e.g. to fault the rails under many live comms
  --churn N            integrity phase: open and close N extra comm pairs one after another while the
                       stream flows (spread over --min-seconds), one verified message each way per pair
  --churn-dev N        device of the churn pairs (default: --dev)
  --churn-retry        a churn pair whose connect or accept fails is abandoned on both ranks and opened
                       again 1 s later (counted in the report) instead of ending the run
  --check-resources    snapshot fds, threads, RSS, QPs and MRs after the ring is connected and after the
                       integrity phase; fds, threads, QPs and MRs must be back (re-sampled up to 60 s)
  --traffic-class N    ncclNetCommConfig.trafficClass (v10+; default -1 = undefined)
  --timeout S          bound for every phase, every wait for the peer and every plugin call (default 60)
  --json FILE          write the JSON report to FILE
  --phase-file F       write "<phase> <unix_ms>" to F (atomically) whenever a phase starts
  --wait-file F        --fault dead-rail: after the traffic, wait until F exists (a script faults the
                       rail meanwhile), then close every comm; with --comms-hold: the hold ends
                       early once F exists (each rank's own F; both then close at a barrier)
  --outlive-peer S     if the peer aborts during a data phase, keep driving this rank's plugin for up
                       to S s, so that its own error is reported (exit 3) rather than the abort (5)
  --idle AT:DUR        integrity phase, this rank only: AT ms after the phase start, make no plugin
                       call at all for DUR ms (an NCCL proxy busy elsewhere), then resume; a comma
                       list or repeated for several windows (bounded by --timeout)
  --close-late S       at the end, this rank closes its ring comms S s after the peer closed its own
                       (no plugin call meanwhile), as ranks do at a job's end
  --no-dlclose         keep the plugin loaded at exit (default: dlclose like NCCL, then check threads)
  --no-release-checks  another plugin driven as a reference (a benchmark's): the fds, QPs and threads it
                       keeps after finalize / dlclose are reported, not checked, and not waited for
  --linger S           after dlclose, wait up to S s until the thread count is back to its value before
                       init (a plugin's background threads), before the last snapshot and the exit;
                       the fd, QP and thread checks then apply after the linger (at finalize they
                       are informational: QPs on a dead port may still be destroyed then)
)";
constexpr const char* kUsageTail = R"(  -h, --help           this text
  --version            print "ha-net-driver <version>" and exit
Environment: NCCL_DEBUG=WARN|INFO|TRACE (default WARN), NCCL_DEBUG_SUBSYS, HA_NET_DRIVER_QUIET=1,
HA_NET_DRIVER_TOKEN (see --token).
Exit status: 0 all verified, 1 verification failed, 2 usage (also: the ranks' tokens differ), 3 plugin
error, 4 timeout (also: no connection proved the token in time), 5 peer error.
)";
}  // namespace

std::string usage(const std::string& fault_lines) { return std::string(kUsageHead) + fault_lines + kUsageTail; }

std::vector<std::size_t> parse_sizes(const std::string& list) {
  std::vector<std::size_t> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.empty()) fail(Fail::usage, "--sizes: empty entry in '" + list + "'");
    std::uint64_t mult = 1;
    char last = tok.back();
    if (last == 'K' || last == 'k') mult = 1ull << 10;
    if (last == 'M' || last == 'm') mult = 1ull << 20;
    if (last == 'G' || last == 'g') mult = 1ull << 30;
    if (mult != 1) tok.pop_back();
    auto v = static_cast<std::uint64_t>(parse_num("--sizes", tok, 0, std::int64_t{1} << 40));
    if (v * mult > (1ull << 40)) fail(Fail::usage, "--sizes: entry too large: " + tok);
    out.push_back(static_cast<std::size_t>(v * mult));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void parse_idle(const std::string& list, std::vector<IdleWindow>& out) {
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::size_t colon = tok.find(':');
    if (colon == std::string::npos)
      fail(Fail::usage, "--idle: expected AT_MS:DURATION_MS[,...], got '" + list + "'");
    IdleWindow w;
    w.at_ms = parse_num("--idle AT_MS", tok.substr(0, colon), 0, 86400000);
    w.duration_ms = parse_num("--idle DURATION_MS", tok.substr(colon + 1), 1, 86400000);
    out.push_back(w);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

namespace {

// The options without a value: the field each sets, and to what.
struct Flag {
  const char* name;
  bool Options::*field;
  bool value;
};
constexpr Flag kFlags[] = {
    {"-h", &Options::help, true},
    {"--help", &Options::help, true},
    {"--version", &Options::version, true},
    {"--optional-recv", &Options::optional_recv, true},
    {"--pingpong", &Options::pingpong, true},
    {"--flush-each", &Options::flush_each, true},
    {"--dmabuf", &Options::dmabuf, true},
    {"--bw", &Options::bw, true},
    {"--churn-retry", &Options::churn_retry, true},
    {"--check-resources", &Options::check_resources, true},
    {"--no-dlclose", &Options::dlclose, false},
    {"--no-release-checks", &Options::release_checks, false},
    {"--one-way", &Options::one_way, true},
};

bool parse_flag(const std::string& a, Options& o) {
  for (const Flag& f : kFlags)
    if (a == f.name) {
      o.*f.field = f.value;
      return true;
    }
  return false;
}

// One of two words: `on` -> true, `off` -> false.
bool parse_choice(const std::string& opt, const std::string& v, const char* off, const char* on) {
  if (v == on) return true;
  if (v != off) fail(Fail::usage, opt + ": expected " + off + " or " + on + ", got '" + v + "'");
  return false;
}

void parse_peer(const std::string& v, Options& o) {
  auto colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0) fail(Fail::usage, "--peer: expected HOST:PORT, got '" + v + "'");
  o.peer_host = v.substr(0, colon);
  if (o.peer_host.size() > 2 && o.peer_host.front() == '[' && o.peer_host.back() == ']')
    o.peer_host = o.peer_host.substr(1, o.peer_host.size() - 2);
  o.peer_port = static_cast<std::uint16_t>(parse_num("--peer port", v.substr(colon + 1), 1, 65535));
}

// An option with a value (val() takes it, or fails: none left); false: no such option.
template <class Value>
bool parse_valued(const std::string& a, Value&& val, Options& o) {
  constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;
  if (a == "--plugin") o.plugin = val();
  else if (a == "--api") o.api = static_cast<int>(parse_num(a, val(), 6, 12));
  else if (a == "--rank") o.rank = static_cast<int>(parse_num(a, val(), 0, 1));
  else if (a == "--listen-port") o.listen_port = static_cast<std::uint16_t>(parse_num(a, val(), 0, 65535));
  else if (a == "--bind") o.bind = val();
  else if (a == "--token") {
    o.token = val();
    o.token_source = "--token";
  }
  else if (a == "--port-file") o.port_file = val();
  else if (a == "--peer") parse_peer(val(), o);
  else if (a == "--dev") o.dev = static_cast<int>(parse_num(a, val(), 0, 1 << 20));
  else if (a == "--fuse") {
    o.fuse.clear();
    std::string list = val();
    for (std::size_t pos = 0;;) {
      const auto comma = list.find(',', pos);
      o.fuse.push_back(static_cast<int>(parse_num(a, list.substr(pos, comma - pos), 0, 1 << 20)));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  else if (a == "--sizes") o.sizes = parse_sizes(val());
  else if (a == "--messages") o.messages = static_cast<std::uint64_t>(parse_num(a, val(), 0, kMaxCount));
  else if (a == "--inflight") o.inflight = static_cast<int>(parse_num(a, val(), 1, 4096));
  else if (a == "--group") o.group = static_cast<int>(parse_num(a, val(), 1, 64));
  else if (a == "--test-order") o.test_all = parse_choice(a, val(), "oldest", "all");
  else if (a == "--iters") o.iters = static_cast<int>(parse_num(a, val(), 1, 100000000));
  else if (a == "--lat-ahead") o.lat_ahead = static_cast<int>(parse_num(a, val(), 1, 16));
  else if (a == "--bw-messages") o.bw_messages = static_cast<std::uint64_t>(parse_num(a, val(), 1, kMaxCount));
  else if (a == "--bw-bytes") {
    std::vector<std::size_t> v = parse_sizes(val());
    if (v.size() != 1 || v[0] == 0) fail(Fail::usage, "--bw-bytes: expected one size > 0, e.g. 64M");
    o.bw_bytes = v[0];
  }
  else if (a == "--comms") o.comms = static_cast<int>(parse_num(a, val(), 0, 1 << 20));
  else if (a == "--comms-hold") o.comms_hold_s = parse_seconds(a, val(), true);
  else if (a == "--comms-rounds") o.comms_rounds = static_cast<int>(parse_num(a, val(), 1, 1 << 20));
  else if (a == "--churn") o.churn = static_cast<int>(parse_num(a, val(), 0, 1 << 20));
  else if (a == "--churn-dev") o.churn_dev = static_cast<int>(parse_num(a, val(), 0, 1 << 20));
  else if (a == "--traffic-class") o.traffic_class = static_cast<int>(parse_num(a, val(), -1, 255));
  else if (a == "--timeout") o.timeout_s = parse_seconds(a, val(), false);
  else if (a == "--json") o.json = val();
  else if (a == "--verify") o.sampled_verify = parse_choice(a, val(), "full", "sampled");
  else if (a == "--min-seconds") o.min_seconds = parse_seconds(a, val(), true);
  else if (a == "--phase-file") o.phase_file = val();
  else if (a == "--wait-file") o.wait_file = val();
  else if (a == "--stop-file") o.stop_file = val();
  else if (a == "--linger") o.linger_s = parse_seconds(a, val(), true);
  else if (a == "--close-late") o.close_late_s = parse_seconds(a, val(), true);
  else if (a == "--outlive-peer") o.outlive_peer_s = parse_seconds(a, val(), true);
  else if (a == "--idle") parse_idle(val(), o.idle);
  else if (a == "--fault") o.fault = val();  // its name and options: check_fault_options (fault.hpp)
  else return false;
  return true;
}

// --idle windows: sorted, not overlapping, each ending within --timeout.
void check_idle(Options& o) {
  if (o.messages == 0 || !o.fault.empty())
    fail(Fail::usage, "--idle is for the integrity phase (--messages >= 1, no --fault)");
  std::sort(o.idle.begin(), o.idle.end(), [](const IdleWindow& x, const IdleWindow& y) { return x.at_ms < y.at_ms; });
  for (std::size_t i = 0; i < o.idle.size(); ++i) {
    const IdleWindow& w = o.idle[i];
    if (i > 0 && w.at_ms < o.idle[i - 1].at_ms + o.idle[i - 1].duration_ms) {
      const IdleWindow& p = o.idle[i - 1];
      fail(Fail::usage, strf("--idle: windows %lld:%lld and %lld:%lld overlap", static_cast<long long>(p.at_ms),
                             static_cast<long long>(p.duration_ms), static_cast<long long>(w.at_ms),
                             static_cast<long long>(w.duration_ms)));
    }
    if (static_cast<double>(w.at_ms + w.duration_ms) >= o.timeout_s * 1000)
      fail(Fail::usage, strf("--idle %lld:%lld ends after --timeout %g s (the bound of the whole phase)",
                             static_cast<long long>(w.at_ms), static_cast<long long>(w.duration_ms), o.timeout_s));
  }
}

// The options together: what is required, and what goes (or does not go) with what.
void check_options(Options& o) {
  if (o.plugin.empty()) fail(Fail::usage, "--plugin PATH is required");
  if (o.rank < 0) fail(Fail::usage, "--rank 0|1 is required");
  if (o.rank == 1 && o.peer_host.empty()) fail(Fail::usage, "rank 1 needs --peer HOST:PORT");
  if (o.rank == 0 && !o.peer_host.empty()) fail(Fail::usage, "--peer is for rank 1; rank 0 uses --listen-port");
  if (o.sizes.empty()) fail(Fail::usage, "--sizes: empty list");
  if (o.min_seconds > 0 && o.messages == 0) fail(Fail::usage, "--min-seconds needs an integrity phase (--messages >= 1)");
  if (!o.stop_file.empty() && o.min_seconds <= 0) fail(Fail::usage, "--stop-file needs --min-seconds (an open-ended stream)");
  if (o.comms_hold_s > 0 && (o.comms == 0 || !o.fault.empty())) fail(Fail::usage, "--comms-hold needs --comms N (and no --fault)");
  if (o.comms_rounds > 1 && o.comms == 0) fail(Fail::usage, "--comms-rounds needs --comms N");
  if (o.linger_s > 0 && !o.dlclose) fail(Fail::usage, "--linger waits after dlclose: not with --no-dlclose");
  if (o.min_seconds >= o.timeout_s)
    fail(Fail::usage, strf("--min-seconds %g must be below --timeout %g (the bound of the whole phase)", o.min_seconds,
                           o.timeout_s));
  if ((o.one_way || o.min_seconds > 0) && !o.fault.empty())
    fail(Fail::usage, "--one-way and --min-seconds are for the integrity phase, not for --fault scenarios");
  if (o.churn > 0 && (o.messages == 0 || !o.fault.empty()))
    fail(Fail::usage, "--churn is for the integrity phase (--messages >= 1, no --fault)");
  if ((o.churn_dev >= 0 || o.churn_retry) && o.churn == 0) fail(Fail::usage, "--churn-dev and --churn-retry need --churn N");
  if (o.check_resources && (o.messages == 0 || !o.fault.empty()))
    fail(Fail::usage, "--check-resources is for the integrity phase (--messages >= 1, no --fault)");
  if (!o.idle.empty()) check_idle(o);
  if (o.group > o.inflight)
    fail(Fail::usage, strf("--group %d exceeds --inflight %d (a grouped receive completes only when all %d "
                           "sends of the group were posted)", o.group, o.inflight, o.group));
}

}  // namespace

Options parse_options(int argc, char** argv, const EnvLookup& env_in) {
  const EnvLookup env = env_in ? env_in : EnvLookup([](const char* n) -> const char* { return std::getenv(n); });
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) fail(Fail::usage, a + " needs a value");
      return argv[++i];
    };
    if (!parse_flag(a, o) && !parse_valued(a, val, o)) fail(Fail::usage, "unknown option '" + a + "' (see --help)");
  }
  if (o.help || o.version) return o;
  check_options(o);
  std::optional<std::string> option;
  if (o.token_source == "--token") option = o.token;
  ha_tools::Token token;
  if (auto bad = ha_tools::resolve_token(option, kTokenEnv, env(kTokenEnv), token)) fail(Fail::usage, *bad);
  o.token = std::move(token.value);
  o.token_source = std::move(token.source);
  return o;
}

std::string shared_params(const Options& o) {
  std::string s = "sizes=";
  for (std::size_t i = 0; i < o.sizes.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(o.sizes[i]);
  }
  s += strf(" messages=%llu inflight=%d group=%d pingpong=%d iters=%d bw=%d bw_messages=%llu comms=%d",
            static_cast<unsigned long long>(o.messages), o.inflight, o.group, o.pingpong ? 1 : 0, o.iters,
            o.bw ? 1 : 0, static_cast<unsigned long long>(o.bw_messages), o.comms);
  if (!o.fault.empty()) s += " fault=" + o.fault;
  if (o.bw_bytes) s += strf(" bw_bytes=%llu", static_cast<unsigned long long>(o.bw_bytes));
  if (o.one_way) s += " one_way=1";
  if (o.sampled_verify) s += " verify=sampled";
  if (o.min_seconds > 0) s += strf(" min_seconds=%g", o.min_seconds);
  if (o.pingpong) s += strf(" lat_ahead=%d", o.lat_ahead);
  if (o.comms_hold_s > 0) s += strf(" comms_hold=%g", o.comms_hold_s);
  if (o.comms_rounds > 1) s += strf(" comms_rounds=%d", o.comms_rounds);
  if (o.churn) s += strf(" churn=%d%s", o.churn, o.churn_retry ? " churn_retry=1" : "");
  return s;
}

}  // namespace hnd
