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
//   3. syncing   Each side waits for the other's SyncMsg of this epoch. Until the new path is
//                shown to work (our notice's write completed, or the peer's came over it) the wait
//                is bounded by HA_NCCL_FAILOVER_TIMEOUT_MS; after that only a fault of the new
//                path (an error completion, a port event, a failed heartbeat) ends it.
//                The sender then completes every in-flight send the report shows delivered (its
//                ACK was lost) and replays exactly the others on the new path.
// All of it runs on the progress thread (control_step), whether or not NCCL calls the plugin;
// isend / irecv return a NULL request and test() reports not-done meanwhile: NCCL sees a delay.
// The side that saw no fault joins when the peer's SyncMsg arrives (a write with immediate
// data: its completion wakes the control plane).
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
    if (int rc = post_recvs(p, slot, missing); rc != 0)
      return make_error(Errc::verbs, std::string("posting receives on the new path: ") + std::strerror(rc));
    if (int rc = post_cts(c, p, slot); rc != 0)
      return make_error(Errc::verbs, std::string("re-publishing a clear-to-send: ") + std::strerror(rc));
  }
  const SyncMsg report = receiver_report(c.reqs, c.seq);
  c.ctrl_out.sync.base = report.base;
  std::memcpy(c.ctrl_out.sync.done, report.done, sizeof report.done);
  return {};
}

std::string failed_over(const CommBase& c) {
  return c.devs[c.fo.from]->port.id() + " failed: " + c.fo.cause + "; the standby " + c.devs[c.active]->port.id();
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
      c.stats.bytes_sent += static_cast<std::uint64_t>(r.sizes[0]);
      continue;
    }
    if (int rc = post_data(c, r, p); rc != 0)
      return make_error(Errc::verbs, std::string("replaying on the new path: ") + std::strerror(rc));
    ++replayed;
  }
  return replayed;
}

void finish(CommBase& c, std::uint32_t replayed) {
  const std::uint64_t now = now_ns();
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
  if (c.inbox.sync && c.peer_sync.epoch <= c.fo.epoch) c.inbox.sync = false;  // this failover's notice
  c.standby.outstanding = false;
  c.standby.misses = 0;
  set_standby(c, StandbyHealth::down,
              std::string(c.fo.planned ? "left by the failback" : "failed") + ", " + "re-protection follows",
              /*said=*/true);
  HA_WARN("NET/HA: %s of %s %s -> %s: cause %s, replayed %u message(s), stall %.1f ms", what, c.id.c_str(),
          from_dev.c_str(), to_dev.c_str(), c.fo.cause.c_str(), replayed, stall);
  write_stats(c, what, [&](net::JsonWriter& j) {
    j.kv("from", from_dev);
    j.kv("to", to_dev);
    j.kv("stall_ms", stall);
    j.kv("replayed_now", replayed);
    j.kv("cause", c.fo.cause);
  });
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
  write_stats(c, "fatal", [&](net::JsonWriter& j) { j.kv("why", why); });
}

const SyncMsg* peer_notice(CommBase& c, std::uint32_t min_epoch) {
  SyncMsg m;
  if (!c.inbox.sync || !read_record(c.ctrl.sync, m)) return nullptr;
  c.peer_sync = m;  // only a whole one
  if (m.epoch >= min_epoch) return &c.peer_sync;
  c.inbox.sync = false;  // stale: an earlier failover's
  return nullptr;
}

std::size_t failovers_in_window(std::deque<std::uint64_t>& starts, std::uint64_t now, std::uint64_t window_ns) {
  while (!starts.empty() && now - starts.front() >= window_ns) starts.pop_front();
  return starts.size();
}

void start_failover(CommBase& c, const std::string& cause, bool planned, const Path* via) {
  if (c.error != ncclSuccess || c.fo.phase != FailoverState::normal) return;
  const std::uint64_t now = now_ns();
  const int from = c.active;
  const int to = 1 - from;
  const std::string failed = c.devs[from]->port.id() + " failed: " + cause;
  // Follow the peer: its notice came over `via`, which proves that path, whatever we think of it.
  if (via && c.paths[to].get() != via) adopt_job_path(c, via, now);
  const bool proved = via && c.paths[to].get() == via;
  Path* sb = c.paths[to].get();
  std::string unusable;
  if (!sb) {
    unusable = c.devs[to] ? "standby " + c.devs[to]->port.id() + " is " + standby_name(c.standby.state) +
                                (c.standby.why.empty() ? "" : " (" + c.standby.why + ")")
                          : "no standby (single path)";
  } else if (!proved) {
    if (c.standby.state != StandbyHealth::up)
      unusable = "standby " + sb->dev->port.id() + " is " + standby_name(c.standby.state) +
                 (c.standby.why.empty() ? "" : " (" + c.standby.why + ")");
    else if (!sb->dev->port_up.load(std::memory_order_relaxed) ||
             sb->dev->fault_gen.load(std::memory_order_relaxed) != sb->fault_gen)
      unusable = "standby " + sb->dev->port.id() + " is down (" + describe_fault(*sb->dev) + ")";  // fail fast
  }
  if (!unusable.empty()) {
    fail_comm(c, failed + "; " + unusable);
    return;
  }
  if (!planned) {
    if (failovers_in_window(c.fo.recent, now, c.retry_window_ns) >= c.max_retries) {
      fail_comm(c, failed + "; HA_NCCL_MAX_RETRIES (" + std::to_string(c.max_retries) + ") failovers within " +
                       "HA_NCCL_RETRY_WINDOW_MS (" + std::to_string(c.retry_window_ns / 1000000) + " ms) done already");
      return;
    }
    c.fo.recent.push_back(now);
  }
  const std::uint32_t peer_epoch = c.inbox.sync ? c.peer_sync.epoch : 0;
  c.fo.epoch = std::max(c.fo.epoch + 1, peer_epoch);
  c.fo.phase = FailoverState::draining;
  c.fo.from = from;
  c.fo.cause = cause;
  c.fo.planned = planned;
  c.fo.proven = false;
  c.fo.started_ns = now;
  c.fo.deadline_ns = now + kDrainBoundNs;
  HA_DEBUG("NET/HA: %s: %s; failing over to %s (epoch %u)", c.id.c_str(), failed.c_str(),
           c.devs[to]->port.id().c_str(), c.fo.epoch);
  if (auto s = net::qp_to_error(c.paths[from]->qp.get()); !s)
    HA_DEBUG("NET/HA: %s: %s", c.id.c_str(), s.error().message.c_str());
}

std::uint64_t advance_failover(CommBase& c, std::uint64_t now) {
  FailoverState& fo = c.fo;
  if (fo.phase == FailoverState::draining) {
    Path& old = *c.paths[fo.from];
    ibv_wc ignored{};
    for (int round = 0; round < 16 && (old.sends_out || old.recvs_out); ++round) {
      ignored.status = IBV_WC_SUCCESS;
      if (poll_path(c, old, 64, &ignored) <= 0) break;
    }
    if (c.error != ncclSuccess) return 0;
    if ((old.sends_out || old.recvs_out) && now < fo.deadline_ns) return now + 2'000'000;  // flushes still coming
    c.active = 1 - fo.from;
    Path& p = c.path();
    Status s;
    if (c.kind == CommKind::recv) s = announce_recv(static_cast<RecvComm&>(c), p);
    SyncMsg& m = c.ctrl_out.sync;
    m.slot = static_cast<std::uint32_t>(c.active);
    m.planned = fo.planned ? 1 : 0;
    m.epoch = fo.epoch;
    seal(m);
    if (s && post_control(c, p, WrKind::sync, offsetof(ControlBlock, sync), sizeof(SyncMsg), CtlKind::sync) != 0)
      s = make_error(Errc::verbs, "writing the failover notice failed");
    if (!s) {
      fail_comm(c, failed_over(c) + " failed during the failover: " + s.error().message);
      return 0;
    }
    fo.phase = FailoverState::syncing;
    fo.deadline_ns = now + c.failover_timeout_ns;
    fo.next_probe_ns = now + c.heartbeat_ns;
    if (c.inbox.sync && c.inbox.sync_path == &p) fo.proven = true;  // the peer's notice came over it
  }
  // syncing: the new path carries control writes (and, on the receiver, replayed data)
  Path& p = c.path();
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  poll_and_arm(c, p, c.max_poll, &err);
  if (c.error != ncclSuccess) return 0;
  if (err.status != IBV_WC_SUCCESS) {
    fail_comm(c, failed_over(c) + " failed during the failover: " + describe_error(p, err));
    return 0;
  }
  if (p.dev->fault_gen.load(std::memory_order_relaxed) != p.fault_gen) {  // fail fast: no deadline to wait out
    fail_comm(c, failed_over(c) + " failed during the failover: " + describe_fault(*p.dev));
    return 0;
  }
  const SyncMsg* notice = peer_notice(c, fo.epoch);
  if (!notice) {
    if (!fo.proven) {
      if (now > fo.deadline_ns) {
        fail_comm(c, c.devs[fo.from]->port.id() + " failed: " + fo.cause + "; the peer did not confirm the failover on " +
                         p.dev->port.id() + " within " + std::to_string(c.failover_timeout_ns / 1000000) + " ms");
        return 0;
      }
      return std::min(fo.deadline_ns + 1, now + std::max<std::uint64_t>(c.heartbeat_ns, 2'000'000));
    }
    // The new path works: wait for the peer as long as it takes, probing the path meanwhile.
    if (now >= fo.next_probe_ns) {
      fo.next_probe_ns = now + c.heartbeat_ns;
      if (p.sends_out == 0 && post_heartbeat(c, p) != 0) {
        fail_comm(c, failed_over(c) + " failed during the failover: probing it failed");
        return 0;
      }
    }
    return fo.next_probe_ns;
  }
  std::uint32_t replayed = 0;
  if (c.kind == CommKind::send) {
    auto r = apply_report(static_cast<SendComm&>(c), *notice, p);
    if (!r) {
      fail_comm(c, c.devs[fo.from]->port.id() + " failed: " + fo.cause + "; " + r.error().message);
      return 0;
    }
    replayed = *r;
  }
  finish(c, replayed);
  return now + 1;
}

}  // namespace nccl_ha::plugin
