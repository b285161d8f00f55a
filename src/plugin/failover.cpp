// The switchover from the failed path to the standby, with exactly-once delivery.
//
//   1. draining  The failed path's QP goes to ERROR. Its completions are reaped until every
//                work request posted on it is accounted for (successes still count; a
//                receiver's QP in ERROR drops whatever the old path still carries, so nothing
//                stale can land in a buffer after this point).
//   2. announce  The receiver posts receive WRs on the new path for every buffer it has not
//                received, re-publishes its outstanding clear-to-send entries, and writes its
//                report {base, done masks} into the sender's ControlBlock. The sender writes its
//                notice. Both writes carry the failover's epoch (written last).
//   3. syncing   Each side waits for the other's SyncMsg of this epoch (HA_NCCL_FAILOVER_TIMEOUT_MS).
//                The sender then completes every in-flight send the report shows delivered (its
//                ACK was lost) and replays exactly the others on the new path.
// isend / irecv return a NULL request and test() reports not-done while this runs; NCCL sees a
// delay. The side that saw no fault joins when it finds the peer's SyncMsg (progress.cpp).
#include <bit>
#include <cstdio>
#include <cstring>

#include "datapath.hpp"
#include "reaper.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {
namespace {

constexpr std::uint64_t kDrainBoundNs = 200'000'000;  // flushes of rxe / hardware arrive long before

double ms_since(std::uint64_t start, std::uint64_t now) { return static_cast<double>(now - start) / 1e6; }

// Receiver: what it has, re-armed on the new path; then the report.
Status announce_recv(RecvComm& c, Path& p) {
  for (std::uint64_t slot = 0; slot < kMaxRequests; ++slot) {
    const Request& r = c.reqs[slot];
    if (r.type != ReqType::recv) continue;
    const int missing = r.nreqs - std::popcount(r.done_mask);
    if (int rc = post_recv_wrs(c, p, slot, missing); rc != 0)
      return make_error(Errc::verbs, std::string("posting receives on the new path: ") + std::strerror(rc));
    if (int rc = post_cts(c, p, slot); rc != 0)
      return make_error(Errc::verbs, std::string("re-publishing a clear-to-send: ") + std::strerror(rc));
  }
  const SyncMsg report = receiver_report(c.reqs, c.seq);
  c.ctrl_out.sync.base = report.base;
  std::memcpy(c.ctrl_out.sync.done, report.done, sizeof report.done);
  return {};
}

// Sender: complete what the receiver has, replay the rest. Returns the number replayed.
Expected<std::uint32_t> apply_report(SendComm& c, const SyncMsg& m, Path& p) {
  std::uint32_t replayed = 0;
  for (Request& r : c.reqs) {
    if (r.type != ReqType::send || r.done_mask) continue;
    if (delivered(m, r.seq, r.index)) {
      r.done_mask = 1;
      r.completed = 1;
      ++c.stats.messages;
      continue;
    }
    if (int rc = post_data(c, r, p); rc != 0)
      return make_error(Errc::verbs, std::string("replaying on the new path: ") + std::strerror(rc));
    ++replayed;
  }
  return replayed;
}

void finish(CommBase& c, std::uint32_t replayed, std::uint64_t now) {
  const int from = c.fo.from;
  const std::string from_dev = c.devs[from]->port.id();
  const std::string to_dev = c.device().port.id();
  const double stall = ms_since(c.fo.started_ns, now);
  const char* what = c.fo.planned ? "failback" : "failover";
  c.fo.phase = FailoverState::normal;
  ++(c.fo.planned ? c.stats.failbacks : c.stats.failovers);
  c.stats.replayed += replayed;
  c.stats.last_stall_ms = stall;
  retire(std::move(c.paths[from]));  // in ERROR; re-protection builds a new one
  c.standby.outstanding = false;
  c.standby.misses = 0;
  set_standby(c, StandbyHealth::down, std::string(c.fo.planned ? "left by the failback" : "failed") + ", " +
                                          "re-protection follows");
  HA_INFO("NET/HA: %s of %s %s -> %s: cause %s, replayed %u message(s), stall %.1f ms", what, c.id.c_str(),
          from_dev.c_str(), to_dev.c_str(), c.fo.cause.c_str(), replayed, stall);
  char extra[160];
  std::snprintf(extra, sizeof extra, "\"from\":\"%s\",\"to\":\"%s\",\"stall_ms\":%.3f,\"replayed_now\":%u,\"cause\":",
                from_dev.c_str(), to_dev.c_str(), stall, replayed);
  write_stats(c, what, extra + json_string(c.fo.cause));
}

}  // namespace

SyncMsg receiver_report(const std::array<Request, kMaxRequests>& reqs, std::uint64_t next_seq) {
  SyncMsg m;
  m.base = next_seq;
  for (const Request& r : reqs)
    if (r.type == ReqType::recv && r.seq < m.base) m.base = r.seq;
  for (std::uint64_t i = 0; i < kMaxRequests; ++i) {
    const std::uint64_t seq = m.base + i;
    const Request& r = reqs[seq % kMaxRequests];
    if (seq >= next_seq)
      m.done[i] = 0;  // not posted yet
    else
      m.done[i] = (r.type == ReqType::recv && r.seq == seq) ? r.done_mask : 0xff;  // slot free: all received
  }
  return m;
}

bool delivered(const SyncMsg& m, std::uint64_t seq, unsigned index) {
  if (seq < m.base) return true;
  return seq - m.base < kMaxRequests && ((m.done[seq - m.base] >> index) & 1u);
}

void fail_comm(CommBase& c, const std::string& why) {
  if (c.error != ncclSuccess) return;
  c.error = ncclSystemError;
  HA_WARN("NET/HA: %s: no usable path left (%s)", c.id.c_str(), why.c_str());
  write_stats(c, "fatal", "\"why\":" + json_string(why));
}

void start_failover(CommBase& c, const std::string& cause, bool planned) {
  if (c.error != ncclSuccess || c.fo.phase != FailoverState::normal) return;
  const int from = c.active;
  const int to = 1 - from;
  const std::string failed = c.devs[from]->port.id() + " failed: " + cause;
  if (!c.paths[to] || c.standby.state != StandbyHealth::up) {
    const std::string standby = c.devs[to] ? "standby " + c.devs[to]->port.id() + " is " +
                                                 standby_name(c.standby.state) +
                                                 (c.standby.why.empty() ? "" : " (" + c.standby.why + ")")
                                           : "no standby (single path)";
    fail_comm(c, failed + "; " + standby);
    return;
  }
  if (c.stats.failovers >= c.max_retries) {
    fail_comm(c, failed + "; HA_NCCL_MAX_RETRIES (" + std::to_string(c.max_retries) + ") failovers done already");
    return;
  }
  const std::uint32_t peer_epoch = __atomic_load_n(&c.ctrl.sync.epoch, __ATOMIC_ACQUIRE);
  c.fo.epoch = std::max(c.fo.epoch + 1, peer_epoch);
  c.fo.phase = FailoverState::draining;
  c.fo.from = from;
  c.fo.cause = cause;
  c.fo.planned = planned;
  c.fo.started_ns = now_ns();
  c.fo.deadline_ns = c.fo.started_ns + kDrainBoundNs;
  HA_DEBUG("NET/HA: %s: %s; failing over to %s (epoch %u)", c.id.c_str(), failed.c_str(),
           c.devs[to]->port.id().c_str(), c.fo.epoch);
  if (auto s = net::qp_to_error(c.paths[from]->qp.get()); !s)
    HA_DEBUG("NET/HA: %s: %s", c.id.c_str(), s.error().message.c_str());
  advance_failover(c);
}

void advance_failover(CommBase& c) {
  FailoverState& fo = c.fo;
  const std::uint64_t now = now_ns();
  if (fo.phase == FailoverState::draining) {
    Path& old = *c.paths[fo.from];
    ibv_wc ignored{};
    for (int round = 0; round < 16 && (old.sends_out || old.recvs_out); ++round) {
      ignored.status = IBV_WC_SUCCESS;
      if (poll_path(c, old, 64, &ignored) <= 0) break;
    }
    if (c.error != ncclSuccess) return;
    if ((old.sends_out || old.recvs_out) && now < fo.deadline_ns) return;
    c.active = 1 - fo.from;
    Path& p = c.path();
    Status s;
    if (c.kind == CommKind::recv) s = announce_recv(static_cast<RecvComm&>(c), p);
    SyncMsg& m = c.ctrl_out.sync;
    m.slot = static_cast<std::uint32_t>(c.active);
    m.planned = fo.planned ? 1 : 0;
    m.epoch = fo.epoch;
    if (s && post_control(c, p, WrKind::sync, offsetof(ControlBlock, sync), sizeof(SyncMsg)) != 0)
      s = make_error(Errc::verbs, "writing the failover notice failed");
    if (!s) {
      fail_comm(c, c.devs[fo.from]->port.id() + " failed: " + fo.cause + "; the standby " + p.dev->port.id() +
                       " failed during the failover: " + s.error().message);
      return;
    }
    fo.phase = FailoverState::syncing;
    fo.deadline_ns = now + c.failover_timeout_ns;
  }
  // syncing: the new path carries control writes (and, on the receiver, replayed data)
  Path& p = c.path();
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  poll_path(c, p, c.max_poll, &err);
  if (c.error != ncclSuccess) return;
  if (err.status != IBV_WC_SUCCESS) {
    fail_comm(c, c.devs[fo.from]->port.id() + " failed: " + fo.cause + "; the standby " + p.dev->port.id() +
                     " failed during the failover: " + ibv_wc_status_str(err.status));
    return;
  }
  const std::uint32_t e1 = __atomic_load_n(&c.ctrl.sync.epoch, __ATOMIC_ACQUIRE);
  if (e1 < fo.epoch) {
    if (now > fo.deadline_ns)
      fail_comm(c, c.devs[fo.from]->port.id() + " failed: " + fo.cause + "; the peer did not confirm the failover on " +
                       p.dev->port.id() + " within " + std::to_string(c.failover_timeout_ns / 1000000) + " ms");
    return;
  }
  std::uint32_t replayed = 0;
  if (c.kind == CommKind::send) {
    SyncMsg m;
    std::memcpy(&m, const_cast<const SyncMsg*>(&c.ctrl.sync), sizeof m);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&c.ctrl.sync.epoch, __ATOMIC_ACQUIRE) != e1) return;  // rewritten meanwhile: look again
    auto r = apply_report(static_cast<SendComm&>(c), m, p);
    if (!r) {
      fail_comm(c, c.devs[fo.from]->port.id() + " failed: " + fo.cause + "; " + r.error().message);
      return;
    }
    replayed = *r;
  }
  finish(c, replayed, now);
}

}  // namespace nccl_ha::plugin
