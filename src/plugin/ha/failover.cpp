// The switchover from the failed path to the standby, with exactly-once delivery.
//
//   1. draining  The failed path's QP goes to ERROR. Its completions are reaped until every
//                work request posted on it is accounted for (successes still count; a
//                receiver's QP in ERROR drops whatever the old path still carries, so nothing
//                stale can land in a buffer after this point).
//   2. announce  The receiver makes sure the new path has a receive WR for every buffer it has
//                not received, re-publishes its outstanding clear-to-send entries, and writes its
//                report {base, done masks} into the sender's ControlBlock. The sender writes its
//                notice. Both writes carry the failover's epoch (written last).
//   3. syncing   Each side waits for the other's SyncMsg of this epoch. Until the new path is
//                shown to work (our notice's write completed, or the peer's came over it) the wait
//                is bounded by HA_NCCL_FAILOVER_TIMEOUT_MS; after that only a fault of the new
//                path (an error completion, a port event, a failed heartbeat) ends it.
//                The sender then completes every in-flight send the report shows delivered (its
//                ACK was lost) and replays exactly the others on the new path (replay.cpp: the
//                report, announce_recv, apply_report).
// A failback (HA_NCCL_ENABLE_FAILBACK, decided by the sender) moves off a healthy path, so it is
// make-before-break: the sender first stops sending and waits until everything it posted on the
// old path completed (0. quiescing: every byte the receiver will ever get there has landed, so
// its report is exact without an ERROR), and neither side breaks the old path: it stays
// connected and becomes the standby. If the target fails during the switch, the comm returns to
// it: before the sender's notice was written by simply staying; after, by an ordinary failover
// back to it (the peer follows, or - when it never followed - re-synchronises in place on the
// path it never left). A failback can fail; it never ends a comm whose old path is healthy.
// All of it runs on the progress thread (control_step), whether or not NCCL calls the plugin;
// isend / irecv return a NULL request and test() reports not-done meanwhile: NCCL sees a delay.
// The side that saw no fault joins when the peer's SyncMsg arrives (a write with immediate
// data: its completion wakes the control plane).
#include <algorithm>
#include <optional>

#include "core/reaper.hpp"
#include "core/state.hpp"
#include "ha/attempt_gate.hpp"
#include "ha/control_ops.hpp"
#include "ha/liveness.hpp"
#include "ha/profiler.hpp"
#include "ha/rescue.hpp"

namespace nccl_ha::plugin {

// The writer of the failover state machine, of the peer's notice and of the inbox's sync mark
// (ControlPlane): defined here only.
struct FailoverWriter {
  static FailoverState& fo(CommBase& c) noexcept { return c.cp.fo_; }
  static SyncMsg& peer_sync(CommBase& c) noexcept { return c.cp.peer_sync_; }
  static Inbox& inbox(CommBase& c) noexcept { return c.cp.inbox_; }
};
namespace {
FailoverState& fo_of(CommBase& c) noexcept { return FailoverWriter::fo(c); }
SyncMsg& peer_sync_of(CommBase& c) noexcept { return FailoverWriter::peer_sync(c); }
Inbox& sync_inbox(CommBase& c) noexcept { return FailoverWriter::inbox(c); }
}  // namespace
namespace {

constexpr std::uint64_t kDrainBoundNs = 200'000'000;  // flushes of rxe / hardware arrive long before

double ms_since(std::uint64_t start, std::uint64_t now) { return static_cast<double>(now - start) / 1e6; }

// NCCL's device index of slot `slot`'s device (-1: none), for the profiler's events.
int dev_index(const CommBase& c, int slot) noexcept { return c.devs[slot] ? c.devs[slot]->index : -1; }

std::string failed_over(const CommBase& c) {
  return c.devs[c.cp.fo().from]->port.id() + " failed: " + c.cp.fo().cause + "; the standby " + c.devs[c.active()]->port.id();
}

void finish(CommBase& c, std::uint32_t replayed) {
  const std::uint64_t now = now_ns();
  FailoverState& fo = fo_of(c);
  const int from = fo.from;
  const std::string from_dev = c.devs[from]->port.id();
  const std::string to_dev = c.device().port.id();
  const double stall = ms_since(fo.started_ns, now);
  const char* what = fo.in_place ? "resync" : fo.planned ? "failback" : "failover";
  fo.phase = FailoverState::normal;
  c.stats.replayed += replayed;
  c.stats.last_stall_ms = stall;
  if (c.cp.inbox().has(CtlKind::sync) && peer_sync_of(c).epoch <= fo.epoch) sync_inbox(c).clear(CtlKind::sync);  // this failover's notice
  if (fo.in_place) {
    HA_WARN("NET/HA: %s stays on %s: the peer returned to it (%s), replayed %u message(s), stall %.1f ms",
            c.id.c_str(), to_dev.c_str(), fo.cause.c_str(), replayed, stall);
  } else {
    ++(fo.planned ? c.stats.failbacks : c.stats.failovers);
    if (fo.keep_from) {  // the failback's old path, still connected, is the standby now
      set_standby(c, StandbyHealth::up, "kept: the path the failback left", /*said=*/true);
    } else {
      retire(std::move(c.paths[from]));  // in ERROR; re-protection builds a new one
      set_standby(c, StandbyHealth::down,
                  std::string(fo.planned ? "left by the failback" : "failed") + ", " + "re-protection follows",
                  /*said=*/true);
    }
    HA_WARN("NET/HA: %s of %s %s -> %s: cause %s, replayed %u message(s), stall %.1f ms", what, c.id.c_str(),
            from_dev.c_str(), to_dev.c_str(), fo.cause.c_str(), replayed, stall);
  }
  write_stats(c, what, [&](net::JsonWriter& j) {
    j.kv("from", from_dev);
    j.kv("to", to_dev);
    j.kv("stall_ms", stall);
    j.kv("replayed_now", replayed);
    j.kv("cause", fo.cause);
  });
  fo.keep_from = false;
  fo.in_place = false;
  c.hooks.stall_until_ns = 0;
  if (State* st = state()) st->attempts->failover_activity(now);  // the storm goes on: re-protection waits
}

void begin(CommBase& c, const std::string& cause, bool planned, FailoverState::Phase phase, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  const std::uint32_t peer_epoch = c.cp.inbox().has(CtlKind::sync) ? peer_sync_of(c).epoch : 0;
  fo.prev_epoch = fo.epoch;
  fo.epoch = std::max(fo.epoch + 1, peer_epoch);
  fo.phase = phase;
  fo.from = c.active();
  fo.cause = cause;
  fo.planned = planned;
  fo.proven = false;
  fo.keep_from = false;
  fo.in_place = false;
  c.hooks.stall_until_ns = 0;
  fo.started_ns = now;
  fo.deadline_ns = now + kDrainBoundNs;
  fo.drain_seen = c.paths[c.active()] ? c.paths[c.active()]->completions : 0;
  fo.requested.clear();  // a request still waiting (for a standby being connected) is this one now
  fo.awaiting_standby = false;
  if (State* st = state()) st->attempts->failover_activity(now);  // re-protection waits (attempt_gate.hpp)
}

void record_failed_failback(CommBase& c, const std::string& why, const char* stage, const std::string& from,
                            const std::string& to) {
  write_stats(c, "failback_failed", [&](net::JsonWriter& j) {
    j.kv("from", from);
    j.kv("to", to);
    j.kv("why", why);
    j.kv("stage", stage);
  });
}

// The failback's target (the standby, during quiescing and before the sender's notice): still fit?
std::string target_trouble(CommBase& c) {
  Path* t = c.paths[1 - fo_of(c).from].get();
  if (!t) return "its path is gone";
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  poll_path(c, *t, 8, &err);  // heartbeats
  if (err.status != IBV_WC_SUCCESS) return describe_error(*t, err);
  if (!t->dev->port_up.load(std::memory_order_relaxed) ||
      t->dev->fault_gen.load(std::memory_order_relaxed) != t->fault_gen)
    return describe_fault(*t->dev);
  return {};
}

// Before the sender's notice was written on the target, the peer knows of no failback: stay.
void cancel_failback(CommBase& c, const std::string& why, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  const std::string here = c.devs[fo.from]->port.id();
  const std::string target = c.devs[1 - fo.from]->port.id();
  HA_WARN("NET/HA: failback of %s %s -> %s abandoned before the switch (%s): it stays on %s", c.id.c_str(),
          here.c_str(), target.c_str(), why.c_str(), here.c_str());
  record_failed_failback(c, why, "before the switch", here, target);
  fo.phase = FailoverState::normal;
  fo.epoch = fo.prev_epoch;
  fo.keep_from = false;
  c.hooks.stall_until_ns = 0;
  restart_failback_hold(c, now);  // the hold starts again
}

// After it: an ordinary failover back to the path the failback left, which is still connected.
void fall_back(CommBase& c, const std::string& why, const Path* via) {
  FailoverState& fo = fo_of(c);
  const std::string target = c.device().port.id();
  const std::string back = c.devs[fo.from]->port.id();
  HA_WARN("NET/HA: failback of %s %s -> %s failed during the switch (%s): back to %s", c.id.c_str(), back.c_str(),
          target.c_str(), why.c_str(), back.c_str());
  record_failed_failback(c, why, "during the switch", back, target);
  fo.phase = FailoverState::normal;
  fo.keep_from = false;
  c.hooks.stall_until_ns = 0;
  start_failover(c, "the failback to " + target + " failed: " + why, false, via);
}

// The new path failed during the switch (or never answered), and no path a failback left is
// there to go back to: both paths are lost. While a pair of ports may still be up at both ends,
// the switch is given up and a failover from the lost target starts over, onto a path a rescue
// builds (rescue.hpp); the peer's report on that path makes the replay exact. Else the end.
std::uint64_t switch_lost(CommBase& c, const std::string& why, std::uint64_t now) {
  const std::string what = failed_over(c) + " failed during the failover: " + why;
  if (!rescue_possible(c)) {
    fail_comm(c, what);
    return 0;
  }
  FailoverState& fo = fo_of(c);
  fo.phase = FailoverState::normal;
  Path& target = c.path();
  target.link.store(Path::failed, std::memory_order_relaxed);
  if (auto s = path_to_error(target); !s) HA_DEBUG("NET/HA: %s: %s", c.id.c_str(), s.error().message.c_str());
  if (Path* left = c.paths[fo.from].get()) left->link.store(Path::failed, std::memory_order_relaxed);  // in ERROR, drained
  set_standby(c, StandbyHealth::down, "lost with the active path", /*said=*/true);
  // The failover from the lost target (the active slot now) waits in fo.requested for the rescue.
  std::string gave_up;
  if (wait_for_rescue(c, what, now, gave_up)) {
    fo.requested = why;  // again at the next step, until the new standby is up
    return now + 1;
  }
  fail_comm(c, what + (gave_up.empty() ? "" : "; " + gave_up));
  return 0;
}

// A fault of the new path during the switch: back to the path a failback left, else both are lost.
std::uint64_t switch_failed(CommBase& c, const std::string& why, const Path* via, std::uint64_t now) {
  if (fo_of(c).keep_from) {
    fall_back(c, why, via);
    return c.error == ncclSuccess ? now + 1 : 0;
  }
  return switch_lost(c, why, now);
}

// The test hook HA_NCCL_TEST_FAILBACK_STALL_AT / _MS (test_hooks.hpp): never in a build without it.
bool stall_at(const CommBase& c, TestHooks::FailbackStall at) {
  return kTestHooks && c.hooks.failback_stall_ns && c.hooks.failback_stall_at == at && c.kind == CommKind::send &&
         c.cp.fo().keep_from;
}

}  // namespace

std::string take_failover_request(CommBase& c) { return std::exchange(fo_of(c).requested, {}); }

std::uint64_t go_home(CommBase& c, std::uint64_t now) {
  const Path* sb = c.paths[c.standby_slot()].get();
  if (!c.failback || c.kind != CommKind::send || !sb || !c.at_home(*sb) || c.at_home(c.path()) ||
      c.cp.standby().state != StandbyHealth::up)
    return 0;
  const std::size_t flaps = failovers_in_window(fo_of(c).recent, now, c.retry_window_ns);
  const std::uint64_t hold = dampened_hold_ns(c.failback_hold_ns, flaps);
  const std::uint64_t at = c.cp.standby().up_since_ns + hold;
  if (now < at) return at;
  start_failover(c, "failback: " + sb->dev->port.id() + " healthy for " + std::to_string(hold / 1000000) + " ms" +
                        (hold > c.failback_hold_ns ? " (hold doubled: " + std::to_string(flaps) +
                                                         " failovers in HA_NCCL_RETRY_WINDOW_MS)" : ""),
                 true);
  return 0;
}

void fail_comm(CommBase& c, const std::string& why) {
  if (c.error != ncclSuccess) return;
  c.error = ncclSystemError;
  profile_end_all(c, /*fatal=*/true);
  refuse_rescues(c, why);  // the peer's rescue requests are refused at once
  HA_WARN("NET/HA: %s: no usable path left (%s)", c.id.c_str(), why.c_str());
  write_stats(c, "fatal", [&](net::JsonWriter& j) { j.kv("why", why); });
}

const SyncMsg* peer_notice(CommBase& c, std::uint32_t min_epoch) {
  SyncMsg m;
  if (!c.cp.inbox().has(CtlKind::sync) || !read_record(c.ctrl.sync, m)) return nullptr;
  peer_sync_of(c) = m;  // only a whole one
  heard_from_peer(c, now_ns(), c.cp.inbox().sync_path());  // the pair it came over
  if (m.epoch >= min_epoch) return &peer_sync_of(c);
  sync_inbox(c).clear(CtlKind::sync);  // stale: an earlier failover's
  return nullptr;
}

std::size_t failovers_in_window(std::deque<std::uint64_t>& starts, std::uint64_t now, std::uint64_t window_ns) {
  while (!starts.empty() && now - starts.front() >= window_ns) starts.pop_front();
  return starts.size();
}

std::uint64_t dampened_hold_ns(std::uint64_t hold_ns, std::size_t failovers) noexcept {
  const std::size_t doublings = std::min<std::size_t>(failovers > 1 ? failovers - 1 : 0, kMaxHoldDoublings);
  return hold_ns << doublings;
}

namespace {

// Why the standby slot `to` cannot take the traffic now (empty: it can).
std::string why_standby_unusable(const CommBase& c, int to) {
  const StandbyHealth& h = c.cp.standby();
  const Path* sb = c.paths[to].get();
  const std::string state = standby_name(h.state) + (h.why.empty() ? std::string() : " (" + h.why + ")");
  if (!sb) return c.devs[to] ? "standby " + c.devs[to]->port.id() + " is " + state : "no standby (single path)";
  // A standby down only for unanswered heartbeats is still connected: tried, and the switch's
  // deadline (HA_NCCL_FAILOVER_TIMEOUT_MS) bounds the try.
  const bool silent = h.state == StandbyHealth::down && h.silent && sb->link.load(std::memory_order_relaxed) == Path::up;
  if (h.state != StandbyHealth::up && !silent) return "standby " + sb->dev->port.id() + " is " + state;
  if (!sb->dev->port_up.load(std::memory_order_relaxed) ||
      sb->dev->fault_gen.load(std::memory_order_relaxed) != sb->fault_gen)
    return "standby " + sb->dev->port.id() + " is down (" + describe_fault(*sb->dev) + ")";  // fail fast
  return {};
}

}  // namespace

void start_failover(CommBase& c, const std::string& cause, bool planned, const Path* via) {
  if (c.error != ncclSuccess || fo_of(c).phase != FailoverState::normal) return;
  const std::uint64_t now = now_ns();
  const int from = c.active();
  const int to = 1 - from;
  if (via && via == c.paths[from].get()) {
    // The peer came back to the path we are on (its failback failed before we followed it):
    // re-synchronise on it. A sender first lets what it has in flight there complete.
    begin(c, cause, false, c.kind == CommKind::send ? FailoverState::quiescing : FailoverState::draining, now);
    fo_of(c).in_place = true;
    fo_of(c).deadline_ns = now + c.failover_timeout_ns;
    profile_switch(c, ncclHaProfileResync, dev_index(c, from), dev_index(c, from), fo_of(c).epoch);
    HA_DEBUG("NET/HA: %s: %s over %s, the active path: re-synchronising in place (epoch %u)", c.id.c_str(),
             cause.c_str(), c.devs[from]->port.id().c_str(), fo_of(c).epoch);
    return;
  }
  if (!planned && failover_waits_for_move(c, cause, via, now)) {  // the standby's move ends first
    fo_of(c).requested = cause;  // again at the next step: the hello's outcome decides which path is the standby
    return;
  }
  const std::string failed = c.devs[from]->port.id() + " failed: " + cause;
  // Follow the peer: its notice came over `via`, which proves that path, whatever we think of it.
  if (via && c.paths[to].get() != via) adopt_job_path(c, via, now);
  const bool proved = via && c.paths[to].get() == via;
  Path* sb = c.paths[to].get();
  const std::string unusable = proved ? std::string() : why_standby_unusable(c, to);
  if (sb && !proved && c.cp.standby().state == StandbyHealth::connecting && !c.cp.rp().job) {
    // A new comm's standby is still being connected (run_standby, bounded by the handshake
    // timeout): the failover waits for it (NCCL sees a delay), then goes on - or fails - once
    // tend_standby() has seen it settle (Path::link) and said so.
    if (!fo_of(c).awaiting_standby)
      HA_WARN("NET/HA: %s: %s; its standby %s is still being connected: the failover waits for it", c.id.c_str(),
              failed.c_str(), sb->dev->port.id().c_str());
    fo_of(c).awaiting_standby = true;
    fo_of(c).requested = cause;  // again at the next step
    return;
  }
  fo_of(c).awaiting_standby = false;
  if (!unusable.empty()) {
    std::string gave_up;
    if (!planned && wait_for_rescue(c, failed + "; " + unusable, now, gave_up)) {
      fo_of(c).requested = cause;  // again at the next step, until the new standby is up
      return;
    }
    fail_comm(c, (c.cp.rescue().on ? c.cp.rescue().cause : failed + "; " + unusable) + (gave_up.empty() ? "" : "; " + gave_up));
    return;
  }
  const bool rescued = c.cp.rescue().on;  // the standby is a path the rescue service built
  end_rescue(c, now);
  if (!planned) {
    if (failovers_in_window(fo_of(c).recent, now, c.retry_window_ns) >= c.max_retries) {
      fail_comm(c, failed + "; HA_NCCL_MAX_RETRIES (" + std::to_string(c.max_retries) + ") failovers within " +
                       "HA_NCCL_RETRY_WINDOW_MS (" + std::to_string(c.retry_window_ns / 1000000) + " ms) done already");
      return;
    }
    fo_of(c).recent.push_back(now);
  }
  // A failback we decide starts by quiescing; one we follow (the sender quiesced) drains at once.
  begin(c, cause, planned, planned && !via ? FailoverState::quiescing : FailoverState::draining, now);
  fo_of(c).keep_from = planned;
  profile_switch(c, planned ? ncclHaProfileFailback : rescued ? ncclHaProfileRescue : ncclHaProfileFailover,
                 dev_index(c, from), dev_index(c, to), fo_of(c).epoch);
  // A failback leaves a healthy path: it may take the soft RTO (and its largest write in flight)
  // between two completions there, as any path may, before the failback is abandoned.
  if (planned) fo_of(c).deadline_ns = now + c.rto_ns + c.paths[from]->rto_allowance_ns;
  HA_DEBUG("NET/HA: %s: %s; %s to %s (epoch %u)", c.id.c_str(), failed.c_str(),
           planned ? "failing back" : "failing over", c.devs[to]->port.id().c_str(), fo_of(c).epoch);
  if (planned) return;  // the old path stays connected
  if (auto s = path_to_error(*c.paths[from]); !s)
    HA_DEBUG("NET/HA: %s: %s", c.id.c_str(), s.error().message.c_str());
}

namespace {

// Quiescing (a failback we decided; a sender re-synchronising in place): no new sends (isend
// waits); what is in flight on the old path completes there. Returns 0 to go on to draining.
std::uint64_t quiesce(CommBase& c, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  Path& old = *c.paths[fo.from];
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  poll_path(c, old, 64, &err);  // successes complete sends
  if (c.error != ncclSuccess) return 0;
  std::string fault;
  if (err.status != IBV_WC_SUCCESS)
    fault = describe_error(old, err);
  else if (old.dev->fault_gen.load(std::memory_order_relaxed) != old.fault_gen)
    fault = describe_fault(*old.dev);
  if (fo.in_place) {
    if (!fault.empty() || (old.sends_out > 0 && now >= fo.deadline_ns)) {
      fail_comm(c, "the peer returned to " + old.dev->port.id() + ", which " +
                       (fault.empty() ? "did not complete the sends in flight" : "failed: " + fault));
      return 0;
    }
    return old.sends_out > 0 ? now + 1'000'000 : 0;
  }
  if (!fault.empty()) {  // the path we leave failed after all: an ordinary failover to the target
    fo.phase = FailoverState::normal;
    fo.epoch = fo.prev_epoch;
    fo.keep_from = false;
    start_failover(c, fault);
    return c.error == ncclSuccess ? now + 1 : 0;
  }
  if (std::string why = target_trouble(c); !why.empty()) {
    cancel_failback(c, "the target " + c.devs[1 - fo.from]->port.id() + " failed: " + why, now);
    return now + 1;
  }
  if (old.sends_out > 0) {
    // A healthy path drains a deep queue of large writes at its own pace: the deadline follows
    // its progress (a completion since the last look, then the soft RTO again), so only a path
    // that stops completing ends the failback, not one that is merely busy.
    if (old.completions != fo.drain_seen) {
      fo.drain_seen = old.completions;
      fo.deadline_ns = std::max(fo.deadline_ns, now + c.rto_ns + old.rto_allowance_ns);
    }
    if (now < fo.deadline_ns) return now + 1'000'000;
    cancel_failback(c, std::to_string(old.sends_out) + " work request(s) on " + old.dev->port.id() +
                           " did not complete in time", now);
    return now + 1;
  }
  if (stall_at(c, TestHooks::stall_switch)) {
    c.hooks.stall_until_ns = now + c.hooks.failback_stall_ns;
    HA_WARN("NET/HA: %s: HA_NCCL_TEST_FAILBACK_STALL_AT=switch: the failback waits %llu ms before its notice",
            c.id.c_str(), static_cast<unsigned long long>(c.hooks.failback_stall_ns / 1000000));
  }
  return 0;
}

// The steps of a switch after quiescing (one function each); a value ends advance_failover's tick
// with it (the time of the next, or 0), none goes on to the next step.
using Step = std::optional<std::uint64_t>;

// Draining: what was in flight on the path we leave completes or is flushed there (bounded by
// the deadline). A failback keeps that path connected unless it fails or stalls meanwhile. The
// test stall (HA_NCCL_TEST_FAILBACK_STALL_AT=switch) holds a failback here, before its notice.
Step drain(CommBase& c, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  Path& old = *c.paths[fo.from];
  if (!fo.in_place) {
    ibv_wc err{};
    ibv_wc first_error{};
    first_error.status = IBV_WC_SUCCESS;
    for (int round = 0; round < 16 && (old.sends_out || old.recvs_out); ++round) {
      err.status = IBV_WC_SUCCESS;
      if (poll_path(c, old, 64, &err) <= 0) break;
      if (err.status != IBV_WC_SUCCESS && first_error.status == IBV_WC_SUCCESS) first_error = err;
    }
    if (c.error != ncclSuccess) return 0;
    const bool pending = old.sends_out || (!fo.keep_from && old.recvs_out);
    const bool old_failed = first_error.status != IBV_WC_SUCCESS ||
                            old.dev->fault_gen.load(std::memory_order_relaxed) != old.fault_gen;
    if (fo.keep_from && (old_failed || (pending && now >= fo.deadline_ns))) {
      // The path a failback leaves failed (or stalls) during it: it is not kept, but drained.
      fo.keep_from = false;
      fo.deadline_ns = now + kDrainBoundNs;
      if (auto s = path_to_error(old); !s) HA_DEBUG("NET/HA: %s: %s", c.id.c_str(), s.error().message.c_str());
      return now + 2'000'000;
    }
    if (pending && now < fo.deadline_ns) return now + 2'000'000;  // flushes still coming
  }
  if (c.hooks.stall_until_ns > now) {  // test: the sender holds the failback before its notice
    if (std::string why = target_trouble(c); !why.empty()) {
      cancel_failback(c, "the target " + c.devs[1 - fo.from]->port.id() + " failed: " + why, now);
      return now + 1;
    }
    return std::min(c.hooks.stall_until_ns, now + 10'000'000);
  }
  return std::nullopt;
}

// The switch: the comm's active path changes, and our notice (SyncMsg; on a receiver after the
// announcement of what it completed) goes over it. Then syncing.
Step send_notice(CommBase& c, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  set_active_slot(c, fo.in_place ? fo.from : 1 - fo.from);
  Path& p = c.path();
  Status s;
  if (c.kind == CommKind::recv) s = announce_recv(static_cast<RecvComm&>(c), p);
  SyncMsg& m = c.ctrl_out.sync;
  m.slot = static_cast<std::uint32_t>(c.active());
  m.planned = fo.planned ? 1 : 0;
  m.epoch = fo.epoch;
  seal(m);
  if (s && post_control(c, p, WrKind::sync, offsetof(ControlBlock, sync), sizeof(SyncMsg), CtlKind::sync) != 0)
    s = make_error(Errc::verbs, "writing the failover notice failed");
  if (!s) return switch_failed(c, s.error().message, nullptr, now);
  fo.phase = FailoverState::syncing;
  fo.deadline_ns = now + c.failover_timeout_ns;
  fo.next_probe_ns = now + c.heartbeat_ns;
  if (c.cp.inbox().has(CtlKind::sync) && c.cp.inbox().sync_path() == &p) fo.proven = true;  // the peer's notice came over it
  return std::nullopt;
}

// Syncing: the new path carries control writes (and, on the receiver, replayed data); a failback
// also polls the path it leaves, where the peer's notice comes if the peer goes back. A failure
// of the new path ends the switch; one of the kept path only ends the way back.
Step poll_switch_paths(CommBase& c, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  Path& p = c.path();
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  poll_and_arm(c, p, c.max_poll, &err);
  if (c.error != ncclSuccess) return 0;
  if (fo.keep_from) {
    Path& kept = *c.paths[fo.from];
    ibv_wc kept_err{};
    kept_err.status = IBV_WC_SUCCESS;
    poll_and_arm(c, kept, 8, &kept_err);
    if (c.error != ncclSuccess) return 0;
    if (kept_err.status != IBV_WC_SUCCESS || kept.dev->fault_gen.load(std::memory_order_relaxed) != kept.fault_gen) {
      fo.keep_from = false;  // no way back any more: retired when the switch is done
      if (auto s = path_to_error(kept); !s) HA_DEBUG("NET/HA: %s: %s", c.id.c_str(), s.error().message.c_str());
    }
  }
  if (err.status != IBV_WC_SUCCESS) return switch_failed(c, describe_error(p, err), nullptr, now);
  if (p.dev->fault_gen.load(std::memory_order_relaxed) != p.fault_gen)  // fail fast: no deadline to wait out
    return switch_failed(c, describe_fault(*p.dev), nullptr, now);
  return std::nullopt;
}

// Until the peer's notice (`notice`, NULL while none): bounded by the deadline while the new path
// is not proven; once it is, as long as it takes, probing the path meanwhile. A notice that went
// back over the kept path of a failback ends the failback.
Step wait_for_peer(CommBase& c, const SyncMsg* notice, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  Path& p = c.path();
  if (notice && notice->epoch > fo.epoch && fo.keep_from && c.cp.inbox().sync_path() == c.paths[fo.from].get())
    return switch_failed(c, "the peer went back to " + c.devs[fo.from]->port.id(), c.cp.inbox().sync_path(), now);
  if (notice) return std::nullopt;
  if (!fo.proven) {
    if (now > fo.deadline_ns) {
      if (fo.keep_from)
        return switch_failed(c, "the peer did not confirm it within " + std::to_string(c.failover_timeout_ns / 1000000) + " ms",
                             nullptr, now);
      return switch_lost(c, "the peer did not confirm it on " + p.dev->port.id() + " within " +
                                std::to_string(c.failover_timeout_ns / 1000000) + " ms", now);
    }
    return std::min(fo.deadline_ns + 1, now + std::max<std::uint64_t>(c.heartbeat_ns, 2'000'000));
  }
  if (now >= fo.next_probe_ns) {
    fo.next_probe_ns = now + c.heartbeat_ns;
    if (p.sends_out == 0 && post_heartbeat(c, p) != 0) return switch_failed(c, "probing it failed", nullptr, now);
  }
  return fo.next_probe_ns;
}

// The peer's notice came: a sender replays what the receiver's report says it did not complete
// (apply_report), then the switch is done (finish). The test stall
// (HA_NCCL_TEST_FAILBACK_STALL_AT=finish) holds a failback here, after the report came.
std::uint64_t complete(CommBase& c, const SyncMsg& notice, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  if (stall_at(c, TestHooks::stall_finish)) {
    if (c.hooks.stall_until_ns == 0) {
      c.hooks.stall_until_ns = now + c.hooks.failback_stall_ns;
      HA_WARN("NET/HA: %s: HA_NCCL_TEST_FAILBACK_STALL_AT=finish: the failback waits %llu ms before it finishes",
              c.id.c_str(), static_cast<unsigned long long>(c.hooks.failback_stall_ns / 1000000));
    }
    if (now < c.hooks.stall_until_ns) return std::min(c.hooks.stall_until_ns, now + 10'000'000);
  }
  std::uint32_t replayed = 0;
  if (c.kind == CommKind::send) {
    auto r = apply_report(static_cast<SendComm&>(c), notice, c.path());
    if (!r) {
      fail_comm(c, c.devs[fo.from]->port.id() + " failed: " + fo.cause + "; " + r.error().message);
      return 0;
    }
    replayed = *r;
    // The clear-to-send entry being consumed is read again: re-published, with the keys of the
    // receiver's slot as they are now.
    static_cast<SendComm&>(c).cur_seq = ~0ull;
  }
  finish(c, replayed);
  return now + 1;
}

}  // namespace

// quiescing (a failback we decide) -> draining -> the switch (notice) -> syncing -> done.
std::uint64_t advance_failover(CommBase& c, std::uint64_t now) {
  FailoverState& fo = fo_of(c);
  if (fo.phase == FailoverState::quiescing) {
    if (const std::uint64_t next = quiesce(c, now); next != 0 || c.error != ncclSuccess) return next;
    if (fo.phase != FailoverState::quiescing) return now + 1;  // it became something else
    fo.phase = FailoverState::draining;
  }
  if (fo.phase == FailoverState::draining) {
    if (const Step s = drain(c, now)) return *s;
    if (const Step s = send_notice(c, now)) return *s;
  }
  if (const Step s = poll_switch_paths(c, now)) return *s;
  const SyncMsg* notice = peer_notice(c, fo.epoch);
  if (const Step s = wait_for_peer(c, notice, now)) return *s;
  return complete(c, *notice, now);
}

}  // namespace nccl_ha::plugin
