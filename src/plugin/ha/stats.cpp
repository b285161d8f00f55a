// Observability: standby state changes and the per-comm counters, as NCCL INFO lines and as
// JSON lines in HA_NCCL_STATS_FILE (one object per event; appended by a reactor worker so that
// neither the caller nor the progress thread waits for the file system), and the Prometheus
// snapshot HA_NCCL_PROM_FILE (taken by a timer on the progress thread, formatted by monitor.cpp,
// written by a worker).
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <utility>

#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "ha/rescue.hpp"
#include "nccl_ha/version.hpp"
#include "runtime/output_file.hpp"

namespace nccl_ha::plugin {

namespace {

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Appends what is pending to the stats file until nothing is (a reactor worker).
void write_pending_stats(State& st) {
  StatsOutbox& out = st.stats_out;
  for (;;) {
    std::string chunk;
    {
      std::lock_guard<std::mutex> lock(out.mutex);
      if (out.pending.empty()) {
        out.writing = false;
        return;
      }
      chunk.swap(out.pending);
    }
    if (!out.file) out.file = std::make_unique<AppendFile>(st.stats_path);
    if (out.file->append(chunk, now_ns())) {
      out.warned = false;
    } else if (!out.warned) {  // one WARN until a chunk is written again
      out.warned = true;
      HA_WARN("NET/HA: cannot append to HA_NCCL_STATS_FILE %s: %s; its records are dropped until it can be written",
              st.stats_path.c_str(), out.file->error().c_str());
    }
  }
}

// Appends one line to the stats file: the file I/O runs on a reactor worker, never on the caller's
// thread nor the progress thread; lines keep their order (one writing job at a time).
void append_stats_line(State& st, std::string line) {
  line += '\n';
  {
    std::lock_guard<std::mutex> lock(st.stats_out.mutex);
    st.stats_out.pending += line;
    if (st.stats_out.writing) return;  // the job under way takes it
    st.stats_out.writing = true;
  }
  // The State outlives the job: finalize stops the reactor (which runs what is queued) first.
  st.reactor.offload([&st] { write_pending_stats(st); }, [&st](std::exception_ptr refused) {
    if (!refused) return;
    std::lock_guard<std::mutex> lock(st.stats_out.mutex);  // the reactor stops: nobody writes now
    st.stats_out.writing = false;
  });
}

std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

const char* standby_name(StandbyHealth::State s) noexcept {
  switch (s) {
    case StandbyHealth::connecting: return "connecting";
    case StandbyHealth::up: return "up";
    case StandbyHealth::down: return "down";
    case StandbyHealth::none: return "none";
  }
  return "?";
}

namespace {

// Events after which an operator wants to see where the node's connections are now: every port with
// its state and the connections whose traffic (active) or standby runs on it (Device counters).
bool with_ports(std::string_view event) {
  return event == "failover" || event == "failback" || event == "resync" || event == "standby" || event == "fatal";
}

void write_ports(net::JsonWriter& j, const State& st) {
  j.key("ports");
  j.open('[');
  for (const auto& d : st.devices) {
    j.open('{');
    j.kv("port", d->port.id());
    j.kv("up", d->port_up.load(std::memory_order_relaxed));
    j.kv("active", d->active_comms.load(std::memory_order_relaxed));
    j.kv("standby", d->standby_comms.load(std::memory_order_relaxed));
    j.close('}');
  }
  j.close(']');
}

}  // namespace

void write_stats(const CommBase& c, const char* event, const std::function<void(net::JsonWriter&)>& extra) {
  State* st = state();
  if (!st || st->stats_path.empty()) return;
  char comm[32];
  std::snprintf(comm, sizeof comm, "%p", static_cast<const void*>(&c));
  net::JsonWriter j;
  j.reserve(1024);
  j.open('{');
  j.kv("event", event);
  j.kv("time_unix_ms", unix_ms());
  j.kv("host", st->host);
  j.kv("pid", static_cast<int>(getpid()));
  j.kv("comm", comm);
  j.kv("comm_id", hex64(c.params.comm_id));
  j.kv("peer", c.peer);
  j.kv("kind", c.kind == CommKind::send ? "send" : "recv");
  if (!c.member.empty()) j.kv("member", c.member);  // a fused device's member: "rxe0+rxe1 2/2"
  j.kv("primary", c.home->port.id());  // the connection's own port
  const Device* sb = c.devs[c.standby_slot()];
  j.kv("standby_port", sb ? sb->port.id() : std::string());  // the standby's, whatever its state
  j.kv("active", c.devs[c.active()]->port.id());
  // The peer's NCCL device at the other end of the active and of the standby path (-1: not known)
  const Path* act = c.paths[c.active()].get();
  const Path* sbp = c.paths[c.standby_slot()].get();
  j.kv("active_peer_dev", act ? act->peer_dev : -1);
  j.kv("standby_peer_dev", sbp ? sbp->peer_dev : -1);
  j.kv("standby", standby_name(c.cp.standby().state));
  const std::pair<std::string_view, std::uint64_t> counters[] = {
      {"failovers", c.stats.failovers},           {"replayed", c.stats.replayed},
      {"duplicates_dropped", c.stats.duplicates_dropped}, {"heartbeats_sent", c.stats.heartbeats_sent},
      {"heartbeat_failures", c.cp.standby().failures}, {"messages", c.stats.messages},
      {"bytes_sent", c.stats.bytes_sent},         {"bytes_received", c.stats.bytes_received}};
  for (const auto& [key, n] : counters) j.kv(key, n);
  j.kv("last_stall_ms", c.stats.last_stall_ms);
  j.kv("failbacks", c.stats.failbacks);
  j.kv("reprotections", c.cp.rp().done);
  j.kv("reprotect_attempts", c.cp.rp().attempts);
  j.kv("reprotect_reminders", c.cp.rp().reminders);
  j.kv("reprotect_dropped", c.cp.rp().dropped);
  j.kv_list("flush_reads", c.stats.flush_reads);  // per device slot
  j.kv_list("flush_rebuilds", c.stats.flush_rebuilds);
  j.kv_list("flush_redirects", c.stats.flush_redirects);
  if (extra) extra(j);
  if (with_ports(event)) write_ports(j, *st);
  j.close('}');
  append_stats_line(*st, j.take());
}

// ---- the Prometheus snapshot

CommSample sample_comm(const CommBase& c) {
  CommSample s;
  s.valid = true;
  if (c.error != ncclSuccess)
    s.protection = Protection::failed;
  else if (c.cp.standby().state == StandbyHealth::up && c.cp.fo().phase == FailoverState::normal && c.cp.fo().requested.empty())
    s.protection = Protection::protected_;
  else
    s.protection = Protection::unprotected;
  s.active_port = c.devs[c.active()]->port.id();
  if (const Device* sb = c.devs[c.standby_slot()]; sb && c.cp.standby().state == StandbyHealth::up)
    s.standby_port = sb->port.id();
  s.counters.failovers = c.stats.failovers;
  s.counters.failbacks = c.stats.failbacks;
  s.counters.reprotections = c.cp.rp().done;
  s.counters.reprotect_dropped = c.cp.rp().dropped;
  s.counters.replayed = c.stats.replayed;
  s.counters.messages = c.stats.messages;
  s.counters.bytes_sent = c.stats.bytes_sent;
  s.counters.bytes_received = c.stats.bytes_received;
  s.member = c.member;
  s.home_port = c.home->port.id();
  return s;
}

void register_comm(const std::shared_ptr<CommBase>& c) {
  State* st = state();
  if (!st) return;
  std::lock_guard<std::mutex> lock(st->comms.mutex);
  st->comms.live.push_back({c.get(), c, CommSample{}});
}

void unregister_comm(const CommBase& c) {
  State* st = state();
  if (!st) return;
  const CommSample last = sample_comm(c);  // the caller holds the comm
  std::lock_guard<std::mutex> lock(st->comms.mutex);
  auto& live = st->comms.live;
  const auto it = std::find_if(live.begin(), live.end(), [&](const CommRegistry::Entry& e) { return e.key == &c; });
  if (it == live.end()) return;
  st->comms.closed += last.counters;
  live.erase(it);
}

PromSnapshot take_snapshot(State& st) {
  PromSnapshot s;
  s.host = st.host;
  s.pid = static_cast<long>(getpid());
  s.unproven_closed = st.admission.counters().refused;  // progress thread, as the snapshot loop
  s.rescue_dropped = st.rescue ? st.rescue->dropped() : 0;
  for (const auto& d : st.devices) s.ports.push_back({d->port.id(), d->port_up.load(std::memory_order_relaxed)});
  std::lock_guard<std::mutex> lock(st.comms.mutex);
  s.closed = st.comms.closed;
  for (auto& e : st.comms.live) {
    if (auto comm = e.comm.lock()) {
      if (Hold hold{*comm}) e.last = sample_comm(*comm);  // busy: its last values
    }
    if (e.last.valid) s.comms.push_back(e.last);
  }
  return s;
}

namespace {

namespace asio = boost::asio;

// File I/O: on a reactor worker (one write at a time: the snapshot loop awaits it).
void write_prom_file(const std::string& path, const std::string& text) {
  std::string why;
  if (replace_file(path, text, kPromFileMode, &why)) return;
  static std::atomic<bool> warned{false};  // one WARN, not one per interval
  if (!warned.exchange(true))
    HA_WARN("NET/HA: cannot write HA_NCCL_PROM_FILE %s: %s (no further WARN about it)", path.c_str(), why.c_str());
}

asio::awaitable<void> prom_loop(State& st) {
  const auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  const auto interval = std::chrono::milliseconds(st.config.prom_interval_ms);
  for (;;) {
    const PromSnapshot snap = take_snapshot(st);
    const std::string text = format_prom(snap);
    auto write = [&st, &text] { write_prom_file(st.prom_path, text); };
    co_await st.reactor.offload(write);
    timer.expires_after(interval);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
    const auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) co_return;  // the reactor stops
  }
}

}  // namespace

void start_monitoring(State& st) {
  if (!st.stats_path.empty()) {
    net::JsonWriter j;
    j.open('{');
    j.kv("event", "init");
    j.kv("time_unix_ms", unix_ms());
    j.kv("host", st.host);
    j.kv("pid", static_cast<int>(getpid()));
    j.kv("plugin_version", nccl_ha::kVersion);
    j.close('}');
    append_stats_line(st, j.take());
  }
  if (st.prom_path.empty()) return;
  HA_INFO("NET/HA: Prometheus snapshot every %d ms to %s (mode %04o; written to a temporary file beside it, then "
          "renamed)", st.config.prom_interval_ms, st.prom_path.c_str(), static_cast<unsigned>(kPromFileMode));
  st.reactor.spawn("Prometheus snapshot", prom_loop(st));
}

}  // namespace nccl_ha::plugin
