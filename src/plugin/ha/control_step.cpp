// The control plane's step: fault detection, then failover, re-protection, the flush paths and
// failback. The data path (test) only polls the active path and hands what goes wrong to the
// control plane (poll.cpp); control_step() runs on the progress thread at every tick of
// the comm's timer and at every completion-channel or port event (control.cpp), whether or not
// NCCL calls the plugin. Detection (docs/architecture.md, "Life of a failover"):
//   * an error completion on the active path (retry / RNR retries exceeded, remote access or
//     operation errors; a flush error there means the QP was moved to ERROR under us);
//   * a local port error / device fatal event on the active path's device (the async-event pump
//     bumps Device::fault_gen and wakes the comm: no waiting for the retries);
//   * the peer's failover notice (a SyncMsg written with immediate data over the standby: its
//     completion wakes us even when NCCL makes no call);
//   * the soft RTO (HA_NCCL_RTO_MS): send work outstanding and no completion for that long, plus
//     the time the largest outstanding write takes at a tenth of the port's rate (a silent black
//     hole, not a large write) - only while a healthy standby exists: the last path is left to
//     the hardware's retry window;
//   * the active path's pair of ports lost (liveness.hpp): its heartbeats, shared by every comm
//     between the two ports, unanswered for the soft RTO, and no completion on the path itself
//     for as long: a dead peer or link is found even with nothing in flight.
// The standby is marked down (reported at once, before it is needed) by an error completion, a
// port event on its device, or its pair gone silent; up again when the pair answers.
//
// A comm that is idle (NCCL polled nothing since the last step, nothing outstanding, no HA work
// under way) arms its CQs and runs no timer: an idle comm costs nothing per period, whatever
// their number. Completion-channel events, port events, its pairs, verbs jobs and the data path
// wake it.
#include <algorithm>
#include <cstdio>

#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "ha/liveness.hpp"

namespace nccl_ha::plugin {

// The writer of the detection's own state (ControlPlane): defined here only.
struct DetectWriter {
  static bool& rto_noted(CommBase& c) noexcept { return c.cp.rto_noted_; }
};
namespace {
bool& rto_noted(CommBase& c) noexcept { return DetectWriter::rto_noted(c); }
}  // namespace
namespace {

constexpr std::uint64_t kMinTickNs = 5'000'000;

// The active path cannot be trusted (the soft RTO, its pair silent): a failover with a healthy
// standby; the last path is left to the hardware's retries (said once), which an idle path gets
// a heartbeat of its own for: they end in an error completion if the path is dead.
void suspect_active_path(CommBase& c, Path& p, const std::string& silent) {
  const Path* sb = c.paths[c.standby_slot()].get();
  if (sb && c.cp.standby().state == StandbyHealth::up) {
    start_failover(c, "soft RTO: " + silent);
  } else if (!rto_noted(c)) {
    rto_noted(c) = true;
    const auto& t = p.dev->timeouts;
    HA_WARN("NET/HA: %s: %s and no healthy standby (%s): left to the hardware retry window "
            "(4.096 us x 2^%u x %u tries)", c.id.c_str(), silent.c_str(),
            sb ? standby_name(c.cp.standby().state) : "single path", t.timeout, t.retry_cnt + 1u);
    if (p.sends_out == 0 && post_heartbeat(c, p) != 0) start_failover(c, "probing the path failed on " + p.dev->port.id());
  }
}

// The comm's connected paths on their pairs of ports (once each: a path is replaced whole).
void join_pairs(CommBase& c) {
  for (const auto& p : c.paths)
    if (p && !p->pair && p->link.load(std::memory_order_acquire) == Path::up) join_pair(c, p);
}

std::uint64_t soonest(std::uint64_t a, std::uint64_t b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

}  // namespace

namespace {

// Watches the active path while no failover runs, whether or not NCCL calls: polls it when NCCL
// did not (`data_idle`), tends the standby, and starts a failover on the first of: a poll error,
// an error completion, the peer's notice of a newer failover, a port event, the soft RTO (with a
// healthy standby; without one the hardware's retries decide). An idle path is probed by a
// heartbeat.
void watch_active_path(CommBase& c, std::uint64_t now, bool data_idle) {
  Path& p = c.path();
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  const int n = data_idle ? poll_and_arm(c, p, c.max_poll, &err) : 0;
  if (c.error != ncclSuccess) return;
  if (p.completions != p.seen_completions) {
    p.seen_completions = p.completions;
    p.last_completion_ns = now;
    p.last_progress_ns = now;
    rto_noted(c) = false;
  }
  if (p.sends_out == 0 || p.last_progress_ns == 0) p.last_progress_ns = now;
  const std::uint64_t rto_at = p.last_progress_ns + c.rto_ns + p.rto_allowance_ns;
  tend_standby(c);  // first: it reaps what came over the standby (the peer's notice, heartbeats)
  if (n < 0) {
    start_failover(c, "ibv_poll_cq failed on " + p.dev->port.id());
  } else if (err.status != IBV_WC_SUCCESS) {
    start_failover(c, describe_error(p, err));
  } else if (peer_notice(c, c.cp.fo().epoch + 1)) {  // of a newer failover than ours
    const bool planned = c.cp.peer_sync().planned != 0;
    start_failover(c, planned ? "the peer fails back" : "the peer failed over", planned, c.cp.inbox().sync_path());
  } else if (p.dev->fault_gen.load(std::memory_order_relaxed) != p.fault_gen) {
    start_failover(c, describe_fault(*p.dev));
  } else if (p.sends_out > 0 && now > rto_at) {
    suspect_active_path(c, p, "no completion on " + p.dev->port.id() + " for " +
                                  std::to_string((now - p.last_progress_ns) / 1000000) + " ms with " +
                                  std::to_string(p.sends_out) + " work request(s) outstanding");
  } else if (p.pair && p.pair->lost() && now - p.last_completion_ns >= c.rto_ns) {
    suspect_active_path(c, p, p.pair->why());  // and nothing came over the path itself for as long
  }
}

// The peer closed the connection in order (say_goodbye): nothing to watch or protect any more.
// Only if the data path still meets an error there (NCCL used the comm after its peer closed it)
// does the comm end, with that error and no failover.
std::uint64_t after_peer_closed(CommBase& c) {
  const std::string fault = take_failover_request(c);
  if (fault.empty()) return 0;
  c.error = ncclRemoteError;
  HA_INFO("NET/HA: %s: %s after the peer closed the connection: no failover", c.id.c_str(), fault.c_str());
  return 0;
}

// When the comm wants its next step without being woken: in use (NCCL polled since the last
// step: its CQ is not armed), or a standby connecting in the background (it publishes its link
// without a wake), or work outstanding (the soft RTO). Idle: never (0), whatever the number of comms.
std::uint64_t watch_again(const CommBase& c, std::uint64_t now, bool data_idle) {
  std::uint64_t next = 0;
  if (!data_idle || c.cp.standby().state == StandbyHealth::connecting)
    next = now + std::max(kMinTickNs, std::min(c.heartbeat_ns, c.rto_ns / 4));
  const Path& p = *c.paths[c.active()];
  if (p.sends_out > 0) next = soonest(next, std::max(now + kMinTickNs, p.last_progress_ns + c.rto_ns + p.rto_allowance_ns));
  if (c.cp.inbox().has(CtlKind::sync)) next = soonest(next, now + 1'000'000);  // the peer's notice came in this step (re-protection's path)
  if (!c.cp.fo().requested.empty()) next = soonest(next, now + kMinTickNs);  // a failover waiting for its standby
  return next;
}

}  // namespace

std::uint64_t control_step(CommBase& c, std::uint64_t now) {
  if (c.closing.load(std::memory_order_relaxed) || c.error != ncclSuccess) return 0;
  if (c.cp.peer_closed()) return after_peer_closed(c);
  const bool data_idle = c.polls == c.seen_polls;  // NCCL polled nothing since the last step
  c.seen_polls = c.polls;

  // 1. Detect, and fail over: the fault the data path handed over, else (or while that one waits
  //    for its standby) what watching the active path finds - it tends the standby first, whose
  //    health the failover needs and over which the peer's notice comes.
  if (std::string handed = take_failover_request(c); !handed.empty()) start_failover(c, handed);
  if (c.error == ncclSuccess && c.cp.fo().phase == FailoverState::normal) watch_active_path(c, now, data_idle);
  if (c.error != ncclSuccess) return 0;
  if (c.cp.fo().phase != FailoverState::normal) return advance_failover(c, now);

  // 2. Tend the standby: its connected paths join their pairs' heartbeats.
  join_pairs(c);
  // 3. Re-protect: a new standby where there is none (or a move home of one that is away).
  std::uint64_t next = reprotect(c, now);
  if (c.error != ncclSuccess) return 0;
  // 4. Tend the flush paths.
  if (c.kind == CommKind::recv) next = soonest(next, tend_flush(static_cast<RecvComm&>(c), now));
  if (c.error != ncclSuccess) return 0;
  // 5. Go home: a failback once the standby runs on the connection's own ports again.
  next = soonest(next, go_home(c, now));
  if (c.cp.fo().phase != FailoverState::normal) return advance_failover(c, now);

  return soonest(next, watch_again(c, now, data_idle));
}

}  // namespace nccl_ha::plugin
