// iflush: making a completed receive visible to whoever reads the buffer next.
//
// A receive completion says the NIC has written the data, not that the writes have reached the
// buffer's memory: for GPU memory written through GPUDirect RDMA the PCIe writes may still be in
// flight when the GPU reads. An RDMA READ of the buffer by the same NIC, issued after the
// completion, is ordered behind those writes; its completion is the flush. The READ goes over a
// QP connected to itself (loopback) into an 8-byte sink. It orders the writes of its own NIC only.
//
// Host memory needs none of this, so iflush returns an already complete request, unless
// HA_NCCL_FORCE_FLUSH=1 (reported as forceFlush), which reads back every flushed receive. The
// loopback QPs exist where GPU memory can be registered - a GPU peer-memory client is loaded
// (gdr.hpp), or a device of the comm offers dma-buf (mr_ops.hpp), net_ib's rule - unless
// NCCL_IB_GDR_FLUSH_DISABLE=1; or when the flush is forced. Without them iflush completes at once.
//
// Which devices a flush reads through (flush_plan.hpp): each data completion marks its slot, and
// the device that wrote, in the comm (p2p.cpp complete_recv); iflush takes the marks (a READ
// issued now orders every earlier write of that device) and posts a READ on each marked slot, and
// the flush is done when each one completed. Nothing marked since the previous flush (it took the
// marks of this one's data too): the same slots again, so that this flush completes behind that
// one's READs on the same QPs; nothing marked ever: the active slot. A marked slot
// whose loopback QP failed or is being rebuilt (its device the one that wrote, its port up) is
// waited for: test() posts the READ once the control plane installed the new QP, and past
// HA_NCCL_FAILOVER_TIMEOUT_MS + 5 s the flush fails (WARN, the comm's ncclSystemError). A READ
// that fails leaves its QP failed and the slot wanted again, on the same device. Only when no
// READ can reach the device that wrote any more (its port down, or the slot moved to another
// device) does the flush read through the active slot instead (one INFO per flush,
// CommStats::flush_redirects). A failover changes nothing of this: the writes to order are where
// they were made.
//
// The loopback QPs follow the comm. A READ posted while its port's link is down (its GID gone)
// fails and leaves that QP in ERROR for good, and a port that came back may have a new GID: so
// the control plane (tend_flush, on the progress thread) replaces them. With re-protection: the
// verbs job that builds a standby on a device builds that device's loopback QP too (path_job.hpp,
// reprotect.cpp). On its own: a QP that failed (an error completion, a failed post), and one whose
// port came back or changed its GID since it was built (Device::recover_gen), are rebuilt on a
// worker thread when the port is up (backoff 100 ms .. 5 s after a failed attempt). A new QP
// waits in flush_next until no READ is outstanding on the one it replaces, then the control plane
// swaps it in while it holds the comm (CommBase::owned): iflush / test just use flush_paths, with
// no lock and no allocation of their own. A slot a flush waits for is rebuilt at once, even the
// standby's (whose QP re-protection would otherwise bring with the standby).
#include <algorithm>
#include <cstring>
#include <iterator>

#include "core.hpp"
#include "control_ops.hpp"
#include "datapath.hpp"
#include "path_job.hpp"
#include "reaper.hpp"
#include "nccl_ha/net/discovery.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {

// The writer of a receive comm's flush-QP rebuilds (ControlPlane): defined here only.
struct FlushWriter {
  static FlushRebuild& of(CommBase& c) noexcept { return c.cp.flush_; }
};
namespace {
FlushRebuild& rebuild_of(CommBase& c) noexcept { return FlushWriter::of(c); }
}  // namespace
namespace {

constexpr int kFlushDepth = 2 * kMaxRequests;  // a READ of each flush outstanding, and abandoned ones
constexpr std::uint64_t kFirstRebuildBackoffNs = 100'000'000;
constexpr std::uint64_t kMaxRebuildBackoffNs = 5'000'000'000;
constexpr std::uint64_t kDrainPollNs = 2'000'000;  // a new QP waits for the old one's reads
// How long a flush waits for the loopback QP of a device that wrote its data, beyond the failover
// timeout (a failover in progress holds the control plane, so no rebuild, that long at most): a
// rebuild takes one worker job (milliseconds; Soft-RoCE about 100 ms) after the next control tick
// (<= 250 ms), and a failed one is tried again after 100 ms, 200 ms, 400 ms ...: 5 s is several
// attempts. Past it the flush fails, and with it the comm.
constexpr std::uint64_t kFlushWaitNs = 5'000'000'000;

std::uint8_t bit(int s) { return static_cast<std::uint8_t>(1u << s); }

bool usable(const RecvComm& c, int slot) {
  const Path* p = c.flush_paths[slot].get();
  return p && p->link.load(std::memory_order_relaxed) != Path::failed;
}

FlushSlotView slot_view(const RecvComm& c, int s) {
  const Device* d = c.devs[s];
  if (!d) return {};
  // A QP left on the slot's previous device (until re-protection brings one) reads no key of now.
  return {d->index, d->port_up.load(std::memory_order_relaxed), usable(c, s) && c.flush_paths[s]->dev == d};
}

// A flush READ: the request's seq, and the slot it reads through.
std::uint64_t flush_wr_value(const Request& r, int slot) { return (r.seq << 1) | static_cast<unsigned>(slot); }

// Posts r's READ on `slot`; on failure the slot's QP has failed (it stays wanted: rebuilt).
int post_flush_read(RecvComm& c, Request& r, int slot) {
  Path& p = *c.flush_paths[slot];
  ibv_sge sge{reinterpret_cast<std::uint64_t>(&c.flush_sink[slot]), sizeof c.flush_sink[slot],
              c.keys[slot].flush_sink->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(WrKind::flush, flush_wr_value(r, slot));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = r.raddr;
  wr.wr.rdma.rkey = r.mh[0] ? r.mh[0]->rkey(slot) : r.rkey[slot];  // as the slot's device is now (rebind.hpp)
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(p.qp.get(), &wr, &bad);
  if (rc == 0) {
    r.flush.want = static_cast<std::uint8_t>(r.flush.want & ~bit(slot));
    r.flush.out = static_cast<std::uint8_t>(r.flush.out | bit(slot));
    ++p.sends_out;
  } else {
    p.link.store(Path::failed, std::memory_order_relaxed);  // the control plane replaces it
    HA_INFO("NET/HA: %s: flush READ on %s not posted (%s); read there once its QP is rebuilt", c.id.c_str(),
            p.dev->port.id().c_str(), std::strerror(rc));
  }
  return rc;
}

ncclResult_t flush_failed(RecvComm& c, Request& r, const std::string& why) {
  HA_WARN("NET/HA: %s: flush (RDMA READ of %p) failed: %s", c.id.c_str(), reinterpret_cast<void*>(r.raddr),
          why.c_str());
  r.type = ReqType::free;
  c.error = ncclSystemError;
  return c.error;
}

// Said once per flush: a device that wrote its data can no longer be read through.
void note_lost(RecvComm& c, Request& r, int slot, std::int16_t writer) {
  if (r.flush.redirected) return;
  r.flush.redirected = true;
  ++c.stats.flush_redirects[slot];
  const Device* d = c.devs[slot];
  const std::string active = c.devs[c.active] ? c.devs[c.active]->port.id() : "none";
  if (d && d->index == writer && slot == c.active)  // the comm is still on it: its failover follows
    HA_INFO("NET/HA: %s: flush: %s, which wrote the data, is down: read through the device the comm fails over to",
            c.id.c_str(), d->port.id().c_str());
  else if (d && d->index == writer)
    HA_INFO("NET/HA: %s: flush: %s, which wrote the data, is down: read through %s", c.id.c_str(),
            d->port.id().c_str(), active.c_str());
  else
    HA_INFO("NET/HA: %s: flush: slot %d moved from device %d, which wrote the data, to %s: read through %s",
            c.id.c_str(), slot, writer, d ? d->port.id().c_str() : "none", active.c_str());
}

// Posts what r can read now (flush_plan.hpp); r completes once every wanted slot was read. A slot
// waiting for its rebuilt loopback QP makes r fail past its deadline.
ncclResult_t advance_flush(RecvComm& c, Request& r) {
  FlushState& f = r.flush;
  const std::int16_t writers[kSlots] = {f.dev[0], f.dev[1]};
  const FlushSlotView v[kSlots] = {slot_view(c, 0), slot_view(c, 1)};
  FlushPlan plan = plan_flush(f, v, c.active);
  if (plan.lost >= 0) note_lost(c, r, plan.lost, writers[plan.lost]);
  if (plan.post && r.buffers_gone) return flush_failed(c, r, "its buffer was deregistered meanwhile");
  for (int s = 0; s < kSlots; ++s)
    if ((plan.post & bit(s)) && post_flush_read(c, r, s) != 0) plan.wait = static_cast<std::uint8_t>(plan.wait | bit(s));
  if (!plan.wait) {
    r.wait_until_ns = 0;
    if (!f.want && !f.out) r.completed = 1;
    return ncclSuccess;
  }
  c.flush_waiting = static_cast<std::uint8_t>(c.flush_waiting | plan.wait);  // tend_flush: rebuild them now
  const int s = (plan.wait & bit(0)) ? 0 : 1;
  const std::string dev = c.devs[s] ? c.devs[s]->port.id() : "slot " + std::to_string(s);
  const std::uint64_t now = now_ns();
  if (r.wait_until_ns == 0) {
    r.wait_until_ns = now + c.failover_timeout_ns + kFlushWaitNs;
    HA_INFO("NET/HA: %s: flush waits for the flush QP on %s to be rebuilt", c.id.c_str(), dev.c_str());
  } else if (now >= r.wait_until_ns) {
    return flush_failed(c, r, "the flush QP on " + dev + " was not usable again within " +
                                  std::to_string((c.failover_timeout_ns + kFlushWaitNs) / 1000000) + " ms");
  }
  return ncclSuccess;
}

// Reaps the completions of one loopback QP: a READ read its slot, or failed (its slot is wanted
// again: read through the same device once the QP is rebuilt). Control plane or data path.
ncclResult_t poll_flush(RecvComm& c, int slot) {
  Path& p = *c.flush_paths[slot];
  ibv_wc wcs[8];
  const int n = ibv_poll_cq(p.cq.get(), 8, wcs);
  if (n < 0) {
    HA_WARN("NET/HA: %s: ibv_poll_cq failed on the flush QP of %s", c.id.c_str(), p.dev->port.id().c_str());
    return c.error = ncclSystemError;
  }
  for (int i = 0; i < n; ++i) {
    --p.sends_out;
    const std::uint64_t value = wr_value(wcs[i].wr_id);
    Request& r = c.flushes[(value >> 1) % c.flushes.size()];
    // A READ given up (its device went down), or of a flush that failed, is stale.
    if (r.type != ReqType::flush || flush_wr_value(r, slot) != value || !(r.flush.out & bit(slot))) continue;
    r.flush.out = static_cast<std::uint8_t>(r.flush.out & ~bit(slot));
    if (wcs[i].status == IBV_WC_SUCCESS) {
      r.flush.done = static_cast<std::uint8_t>(r.flush.done | bit(slot));
      if (!r.flush.want && !r.flush.out) r.completed = 1;
      ++c.stats.flush_reads[slot];
      continue;
    }
    p.link.store(Path::failed, std::memory_order_relaxed);  // in ERROR now: the control plane replaces it
    r.flush.want = static_cast<std::uint8_t>(r.flush.want | bit(slot));
    HA_INFO("NET/HA: %s: flush READ on %s failed (%s); read there again once its QP is rebuilt", c.id.c_str(),
            p.dev->port.id().c_str(), ibv_wc_status_str(wcs[i].status));
  }
  return ncclSuccess;
}

// Replaces the slot's QP by the waiting one once no READ is outstanding on it (reaping what it can).
// Returns false while it has to wait.
bool install_next(RecvComm& c, int s) {
  Path* cur = c.flush_paths[s].get();
  if (cur && cur->sends_out > 0 && poll_flush(c, s) != ncclSuccess) return true;  // the comm failed
  if (cur && cur->sends_out > 0) return false;
  const bool replaced = cur != nullptr;
  retire(std::move(c.flush_paths[s]));
  c.flush_paths[s] = std::move(rebuild_of(c).next[s]);
  if (replaced) ++c.stats.flush_rebuilds[s];
  c.flush_waiting = static_cast<std::uint8_t>(c.flush_waiting & ~bit(s));
  HA_INFO("NET/HA: %s: flush QP %u on %s %s", c.id.c_str(), c.flush_paths[s]->local.qpn,
          c.devs[s]->port.id().c_str(), replaced ? "replaces the old one" : "installed");
  return true;
}

// A rebuild of the slot's loopback QP on its own (no re-protection brings one).
void start_rebuild(RecvComm& c, int s) {
  Device* d = c.devs[s];
  const std::uint32_t gen = d->recover_gen.load(std::memory_order_relaxed);
  rebuild_of(c).want[s] = false;
  HA_INFO("NET/HA: %s: rebuilding the flush QP on %s (%s)", c.id.c_str(), d->port.id().c_str(),
          usable(c, s) ? "its port came back or changed its GID" : "it failed");
  rebuild_of(c).job[s] = start_job(c, nullptr, [reaper = c.reaper, d, s, gen](PathJob& job) -> Status {
    auto p = build_flush_path(reaper, *d, s);
    if (!p) return std::move(p).error();
    job.flush = std::move(p).value();
    job.flush_gen = gen;
    return {};
  });
}

// HA_NCCL_TEST_FLUSH_QP_ERROR_MS: the active slot's loopback QP moved to ERROR, as a fault would
// leave it (the next READ on it fails), at each of the given times. Returns the next one (0: none).
std::uint64_t inject_flush_errors(RecvComm& c, std::uint64_t now) {
  if (!kTestHooks) return 0;  // a build without test hooks (test_hooks.hpp)
  CommHooks& h = c.hooks;
  const auto& at = h.flush_error_ns;
  for (; h.flush_errors_done < at.size() && now >= at[h.flush_errors_done]; ++h.flush_errors_done) {
    Path* p = c.flush_paths[c.active].get();
    if (!p) continue;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    const int rc = ibv_modify_qp(p->qp.get(), &attr, IBV_QP_STATE);
    HA_INFO("NET/HA: %s: test: flush QP %u on %s moved to ERROR (HA_NCCL_TEST_FLUSH_QP_ERROR_MS)%s", c.id.c_str(),
            p->local.qpn, p->dev->port.id().c_str(), rc ? (std::string(": ") + std::strerror(rc)).c_str() : "");
  }
  return h.flush_errors_done < at.size() ? at[h.flush_errors_done] : 0;
}

}  // namespace

Expected<std::shared_ptr<Path>> build_flush_path(Reaper* reaper, Device& d, int slot) {
  net::PortInfo port = d.port;  // the state and GID as they are now
  if (auto s = net::refresh_address(d.ctx.get(), port); !s) return std::move(s).error();
  if (!port.active()) return make_error(Errc::unsupported, d.port.id() + " is " + net::port_state_name(port.state));
  auto p = make_path(reaper, d, slot, kFlushDepth, 1);
  if (!p) return std::move(p).error();
  Path& path = **p;
  path.local = net::local_endpoint(path.qp.get(), port, path.local.psn);
  if (auto s = net::connect_rc_qp(path.qp.get(), path.local, path.local, d.timeouts); !s) return std::move(s).error();
  path.link.store(Path::up, std::memory_order_relaxed);
  return std::move(p).value();
}

Status setup_flush(RecvComm& c) {
  const State* st = state();
  if (!st || std::none_of(std::begin(c.devs), std::end(c.devs), [st](const Device* d) { return d && st->flush_qps(*d); }))
    return {};  // no memory that needs reading back can be registered on the comm's devices
  c.force_flush = st->config.force_flush;
  c.flush_on = true;
  for (int s = 0; s < kSlots; ++s) {
    Device* dev = c.devs[s];
    if (!dev) continue;
    rebuild_of(c).gen[s] = dev->recover_gen.load(std::memory_order_relaxed);
    Status ok;
    if (auto mr = net::register_mr(dev->pd.get(), &c.flush_sink[s], sizeof c.flush_sink[s], IBV_ACCESS_LOCAL_WRITE))
      c.keys[s].flush_sink = std::move(mr).value();
    else
      ok = std::move(mr).error();
    if (ok) {
      if (auto p = build_flush_path(c.reaper, *dev, s))
        c.flush_paths[s] = std::move(p).value();
      else
        ok = std::move(p).error();
    }
    if (!ok) {
      if (s == c.active) return ok;  // the flush QP of the path the comm starts on is required
      HA_WARN("NET/HA: %s: no flush QP on %s (%s); flushes read through %s until one is built", c.id.c_str(),
              dev->port.id().c_str(), ok.error().message.c_str(), c.devs[c.active]->port.id().c_str());
      rebuild_of(c).want[s] = c.keys[s].flush_sink != nullptr;  // the control plane builds it when it can
    }
  }
  const std::uint64_t start = now_ns();
  for (const int ms : st->hooks.flush_qp_error_ms())
    c.hooks.flush_error_ns.push_back(start + static_cast<std::uint64_t>(ms) * 1000000ull);
  return {};
}

void close_flush(RecvComm& c) {
  FlushRebuild& fr = rebuild_of(c);
  for (int s = 0; s < kSlots; ++s) {
    retire(std::move(c.flush_paths[s]));
    retire(std::move(fr.next[s]));
    if (fr.job[s]) fr.job[s]->cancelled.store(true, std::memory_order_relaxed);
    fr.job[s].reset();
  }
}

void drop_flush_path(RecvComm& c, int slot) {
  retire(std::move(c.flush_paths[slot]));
  rebuild_of(c).want[slot] = false;
}

void offer_flush_path(RecvComm& c, int slot, PathJob& job) {
  FlushRebuild& fr = rebuild_of(c);
  if (!c.flush_on) return;
  if (!job.flush) {
    if (!job.flush_why.empty()) {
      HA_INFO("NET/HA: %s: the flush QP on %s was not rebuilt with the standby: %s", c.id.c_str(),
              c.devs[slot]->port.id().c_str(), job.flush_why.c_str());
      fr.want[slot] = true;
    }
    return;
  }
  retire(std::move(fr.next[slot]));
  fr.next[slot] = std::move(job.flush);
  fr.gen[slot] = job.flush_gen;
  fr.want[slot] = false;
  if (fr.job[slot]) fr.job[slot]->cancelled.store(true, std::memory_order_relaxed);  // not needed now
  fr.job[slot].reset();
  install_next(c, slot);
}

std::uint64_t tend_flush(RecvComm& c, std::uint64_t now) {
  FlushRebuild& fr = rebuild_of(c);
  if (!c.flush_on || c.error != ncclSuccess) return 0;
  std::uint64_t next = 0;
  const auto soonest = [&next](std::uint64_t t) { next = next == 0 ? t : std::min(next, t); };
  if (const std::uint64_t at = inject_flush_errors(c, now)) soonest(at);
  for (int s = 0; s < kSlots; ++s) {
    Device* d = c.devs[s];
    if (!d || !c.keys[s].flush_sink) continue;
    if (const auto& job = fr.job[s]) {  // a rebuild of its own
      const int o = job_outcome(*job);
      if (o == 0) continue;  // it wakes us
      if (o > 0) {
        auto done = job;
        offer_flush_path(c, s, *done);
        if (c.error != ncclSuccess) return 0;
      } else {
        fr.want[s] = true;
        fr.backoff_ns[s] =
            fr.backoff_ns[s] ? std::min(fr.backoff_ns[s] * 2, kMaxRebuildBackoffNs) : kFirstRebuildBackoffNs;
        fr.retry_ns[s] = now + fr.backoff_ns[s];
        HA_INFO("NET/HA: %s: rebuilding the flush QP on %s failed (%s); next attempt in %llu ms", c.id.c_str(),
                d->port.id().c_str(), job->why.c_str(),
                static_cast<unsigned long long>(fr.backoff_ns[s] / 1000000));
        fr.job[s].reset();
      }
    }
    if (fr.next[s]) {
      if (!install_next(c, s)) soonest(now + kDrainPollNs);
      if (c.error != ncclSuccess) return 0;
      continue;
    }
    if (fr.job[s]) continue;
    if (const auto gen = d->recover_gen.load(std::memory_order_relaxed); gen != fr.gen[s]) {
      fr.gen[s] = gen;  // the port came back, or its GID changed, since the QP was built
      fr.want[s] = true;
    }
    if (!usable(c, s)) fr.want[s] = true;
    if (!fr.want[s]) {
      fr.backoff_ns[s] = 0;
      continue;
    }
    // The standby's device without a standby up: re-protection builds it, with the flush QP;
    // unless a flush waits for it (its device wrote the data): then now.
    if (s == c.standby_slot() && (c.cp.rp().job || c.cp.standby().state != StandbyHealth::up) && !(c.flush_waiting & bit(s)))
      continue;
    if (!d->port_up.load(std::memory_order_relaxed)) continue;  // PORT_ACTIVE brings us back
    if (now < fr.retry_ns[s]) {
      soonest(fr.retry_ns[s]);
      continue;
    }
    start_rebuild(c, s);
  }
  return next;
}

ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request) {
  auto& c = *static_cast<RecvComm*>(recv_comm);
  *request = nullptr;
  int last = -1;  // NCCL's rule: one read, of the last receive that carried data
  for (int i = 0; i < n; ++i)
    if (sizes[i] > 0) last = i;
  const auto* mh = last < 0 ? nullptr : static_cast<const RegHandle*>(mhandles[last]);
  // Nothing to read back: host memory (without HA_NCCL_FORCE_FLUSH), or no flush QPs
  // (NCCL_IB_GDR_FLUSH_DISABLE): complete at once, as net_ib's NULL request.
  if (!mh || !(mh->gpu || c.force_flush) || !c.flush_on) {
    *request = &c.flushed;
    return ncclSuccess;
  }
  const HoldWait held(c);  // iflush may not answer "not yet" (a NULL request means "nothing to flush")
  if (c.error != ncclSuccess) return c.error;
  Request& r = c.flushes[c.flush_seq % c.flushes.size()];
  if (r.type != ReqType::free) {  // a NULL request would tell NCCL "nothing to flush": never that
    HA_WARN("NET/HA: %s: more than %zu flushes in flight", c.id.c_str(), c.flushes.size());
    return ncclInternalError;
  }
  r.type = ReqType::flush;
  r.nreqs = 1;
  r.completed = 0;
  r.buffers_gone = false;
  r.seq = c.flush_seq;
  r.raddr = reinterpret_cast<std::uint64_t>(data[last]);
  r.mh[0] = mh;
  r.wait_until_ns = 0;
  // Through every device that wrote since the last flush. Nothing new (an earlier flush, posted
  // after these completions, took their marks): through the devices that flush read, behind its
  // READs on the same QPs. No data at all yet: through the active device.
  if (c.flush_wrote) c.flush_last = c.flush_wrote;
  c.flush_wrote = 0;  // a READ issued after those completions orders every earlier write
  r.flush = FlushState{};
  r.flush.want = c.flush_last ? c.flush_last : bit(c.active);
  for (int s = 0; s < kSlots; ++s)
    if (c.flush_last & bit(s)) r.flush.dev[s] = c.flush_writer[s];
  ++c.flush_seq;
  if (auto rc = advance_flush(c, r); rc != ncclSuccess) return rc;
  *request = &r;
  return ncclSuccess;
}

ncclResult_t test_flush(Request& r, int* done) {
  auto& c = static_cast<RecvComm&>(*r.comm);
  *done = 0;
  if (r.nreqs == 0) {  // c.flushed: nothing was read
    *done = 1;
    return ncclSuccess;
  }
  if (!r.completed) {
    for (int s = 0; s < kSlots; ++s)
      if (c.flush_paths[s] && c.flush_paths[s]->sends_out > 0)
        if (auto rc = poll_flush(c, s); rc != ncclSuccess) return rc;
    if (c.error != ncclSuccess) return c.error;
    // Reads still to post (a QP rebuilt meanwhile, a device gone), or outstanding on one gone.
    if (!r.completed && (r.flush.want || r.flush.out))
      if (auto rc = advance_flush(c, r); rc != ncclSuccess) return rc;
    if (!r.completed) return c.error;
  }
  r.type = ReqType::free;
  *done = 1;
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
