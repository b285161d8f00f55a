// Polling and fault detection, driven by the calls NCCL makes on a comm (test, and isend /
// irecv when they cannot post). Detection, in the order ARCHITECTURE §4 gives it:
//   * an error completion on the active path (retry / RNR retries exceeded, remote access or
//     operation errors; a flush error there means the QP was moved to ERROR under us);
//   * a local port error / device fatal event on the active path's device (the progress
//     thread's async-event pump bumps Device::fault_gen; no waiting for the retries);
//   * the peer's failover notice (it RDMA-writes a SyncMsg into our ControlBlock over the
//     standby, so the side without a local event does not wait for its retries);
//   * the soft RTO (HA_NCCL_RTO_MS): send work outstanding and no completion for that long, plus
//     the time the largest outstanding write takes at a tenth of the port's rate (a silent black
//     hole, not a large write). An idle path is probed with a heartbeat write every
//     HA_NCCL_HEARTBEAT_MS so that a dead peer is found even with nothing in flight.
// The standby gets a heartbeat write every HA_NCCL_HEARTBEAT_MS; three intervals without a
// completed one, an error completion or a port event on its device mark it down (reported
// at once, before it is needed).
#include <cstdio>
#include <cstring>

#include "datapath.hpp"
#include "nccl_ha/reactor/async_events.hpp"

namespace nccl_ha::plugin {
namespace {

constexpr int kMissesForDown = 3;

std::string describe_error(const Path& p, const ibv_wc& wc) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s on %s (status %d, vendor error 0x%x)", ibv_wc_status_str(wc.status),
                p.dev->port.id().c_str(), static_cast<int>(wc.status), wc.vendor_err);
  return buf;
}

std::string describe_fault(const Device& d) {
  const auto kind = static_cast<reactor::DeviceEventKind>(d.last_fault.load(std::memory_order_relaxed));
  return std::string(reactor::to_string(kind)) + " on " + d.port.id();
}

// One heartbeat write (the standby's health probe, or the idle active path's liveness probe):
// the peer's NIC acknowledging it is the answer.
int post_heartbeat(CommBase& c, Path& p) {
  c.ctrl_out.heartbeat = ++c.standby.heartbeats;
  return post_control(c, p, WrKind::heartbeat, offsetof(ControlBlock, heartbeat), sizeof(std::uint64_t));
}

// Heartbeats and health of the standby path.
void tend_standby(CommBase& c, std::uint64_t now) {
  StandbyHealth& h = c.standby;
  if (h.state == StandbyHealth::none) return;
  Path* sb = c.paths[c.standby_slot()].get();
  if (!sb) return;
  if (h.state == StandbyHealth::connecting) {
    if (c.rp.job) return;  // being re-protected (reprotect.cpp): no heartbeats on the path it replaces
    const int link = sb->link.load(std::memory_order_acquire);  // the initial background connection
    if (link == Path::connecting) return;
    if (link == Path::failed) {
      set_standby(c, StandbyHealth::down, "setup failed: " + sb->why);
      return;
    }
    sb->fault_gen = sb->dev->fault_gen.load(std::memory_order_relaxed);
    h.next_ns = now;
    set_standby(c, StandbyHealth::up, "connected on " + sb->dev->port.id());
  }
  if (sb->link.load(std::memory_order_relaxed) != Path::up) return;  // dead until re-protected
  if (const auto gen = sb->dev->fault_gen.load(std::memory_order_relaxed); gen != sb->fault_gen) {
    sb->fault_gen = gen;
    ++h.failures;
    if (h.state == StandbyHealth::up) set_standby(c, StandbyHealth::down, describe_fault(*sb->dev));
  }
  if (h.outstanding) {
    ibv_wc err{};
    err.status = IBV_WC_SUCCESS;
    poll_path(c, *sb, 4, &err);
    if (err.status != IBV_WC_SUCCESS) {  // the QP is in ERROR now: down until re-protected
      h.outstanding = false;
      ++h.failures;
      sb->link.store(Path::failed, std::memory_order_relaxed);
      set_standby(c, StandbyHealth::down, "heartbeat failed: " + describe_error(*sb, err));
      return;
    }
  }
  if (now < h.next_ns) return;
  h.next_ns = now + c.heartbeat_ns;
  if (h.outstanding) {
    ++h.failures;
    if (++h.misses >= kMissesForDown && h.state == StandbyHealth::up)
      set_standby(c, StandbyHealth::down, std::to_string(h.misses) + " heartbeats unanswered");
    return;
  }
  if (post_heartbeat(c, *sb) == 0)
    h.outstanding = true;
}

}  // namespace

int poll_path(CommBase& c, Path& p, int max, ibv_wc* error) {
  ibv_wc wcs[64];
  const int n = ibv_poll_cq(p.cq.get(), std::min(max, 64), wcs);
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wr_kind(wc.wr_id) == WrKind::recv)
      --p.recvs_out;
    else if (--p.sends_out == 0)
      p.rto_allowance_ns = 0;
    if (wc.status == IBV_WC_SUCCESS)
      on_success(c, p, wc);
    else if (error->status == IBV_WC_SUCCESS)
      *error = wc;
  }
  return n;
}

ncclResult_t progress(CommBase& c) {
  if (c.error != ncclSuccess) return c.error;
  if (c.fo.phase != FailoverState::normal) {
    advance_failover(c);
    return c.error;
  }
  Path& p = c.path();
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  const int n = poll_path(c, p, c.max_poll, &err);
  if (c.error != ncclSuccess) return c.error;
  if (n < 0) {
    start_failover(c, "ibv_poll_cq failed on " + p.dev->port.id());
    return c.error;
  }
  if (err.status != IBV_WC_SUCCESS) {
    start_failover(c, describe_error(p, err));
    return c.error;
  }
  const std::uint64_t now = now_ns();
  if (n > 0) p.last_completion_ns = now;
  if (n > 0 || p.sends_out == 0 || p.last_progress_ns == 0) p.last_progress_ns = now;
  if (__atomic_load_n(&c.ctrl.sync.epoch, __ATOMIC_ACQUIRE) > c.fo.epoch) {
    const bool planned = __atomic_load_n(&c.ctrl.sync.planned, __ATOMIC_RELAXED) != 0;
    start_failover(c, planned ? "the peer fails back" : "the peer failed over", planned);
  } else if (p.dev->fault_gen.load(std::memory_order_relaxed) != p.fault_gen) {
    start_failover(c, describe_fault(*p.dev));
  } else if (p.sends_out > 0 && now - p.last_progress_ns > c.rto_ns + p.rto_allowance_ns) {
    start_failover(c, "soft RTO: no completion on " + p.dev->port.id() + " for " +
                          std::to_string((now - p.last_progress_ns) / 1000000) + " ms with " +
                          std::to_string(p.sends_out) + " work request(s) outstanding");
  } else {
    if (p.sends_out == 0 && now - p.last_completion_ns > c.heartbeat_ns) {  // idle: probe the peer
      if (post_heartbeat(c, p) != 0)
        start_failover(c, "probing the idle path failed on " + p.dev->port.id());
      p.last_completion_ns = now;
    }
    tend_standby(c, now);
    reprotect(c, now);
    if (c.failback && c.kind == CommKind::send && c.active != 0 && c.paths[0] &&
        c.standby.state == StandbyHealth::up && now >= c.standby.up_since_ns + c.failback_hold_ns)
      start_failover(c, "failback: " + c.devs[0]->port.id() + " healthy for " +
                            std::to_string(c.failback_hold_ns / 1000000) + " ms", true);
  }
  return c.error;
}

}  // namespace nccl_ha::plugin
