// iflush: making a completed receive visible to whoever reads the buffer next.
//
// A receive completion says the NIC has written the data, not that the writes have reached the
// buffer's memory: for GPU memory written through GPUDirect RDMA the PCIe writes may still be in
// flight when the GPU reads. An RDMA READ of the buffer by the same NIC, issued after the
// completion, is ordered behind those writes; its completion is the flush. The READ goes over a
// QP connected to itself (loopback) on the device of the active path, into an 8-byte sink.
//
// Host memory needs none of this, so iflush returns an already complete request, unless
// HA_NCCL_FORCE_FLUSH=1 (reported as forceFlush), which reads back every flushed receive. The
// loopback QPs exist when a GPU peer-memory client is loaded (gdr.hpp) or the flush is forced.
// After a failover the reads go to the new active device: a READ still outstanding on the old one, or
// one that fails, is posted once more on the other device's loopback QP (a late completion of the
// first attempt is recognised by its wr_id and ignored) before the comm fails.
#include <cstring>

#include "core.hpp"
#include "datapath.hpp"
#include "reaper.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {
namespace {

constexpr int kFlushDepth = 2 * kMaxRequests;  // each flush may have two attempts outstanding

// A flush request: seq = its number, index = the slot read on, done_mask = the attempt (0, 1).
std::uint64_t flush_wr_value(const Request& r) { return (r.seq << 1) | r.done_mask; }

int post_flush_read(RecvComm& c, Request& r, int slot) {
  Path& p = *c.flush_paths[slot];
  ibv_sge sge{reinterpret_cast<std::uint64_t>(&c.flush_sink[slot]), sizeof c.flush_sink[slot],
              c.flush_sink_mr[slot]->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(WrKind::flush, flush_wr_value(r));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = r.raddr;
  wr.wr.rdma.rkey = r.rkey[slot];
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(p.qp.get(), &wr, &bad);
  if (rc == 0) {
    r.index = static_cast<std::uint8_t>(slot);
    ++p.sends_out;
  }
  return rc;
}

// The slot whose loopback QP reads for the active path (the other one if it has none).
int flush_slot(const RecvComm& c) {
  if (c.flush_paths[c.active]) return c.active;
  const int other = 1 - c.active;
  return c.flush_paths[other] ? other : -1;
}

ncclResult_t flush_failed(RecvComm& c, Request& r, const std::string& why) {
  HA_WARN("NET/HA: %s: flush (RDMA READ of %p) failed: %s", c.id.c_str(), reinterpret_cast<void*>(r.raddr),
          why.c_str());
  r.type = ReqType::free;
  c.error = ncclSystemError;
  return c.error;
}

// The second attempt of r, on `slot`; the comm fails if there is none to make.
ncclResult_t read_again(RecvComm& c, Request& r, int slot, const std::string& why) {
  if (r.done_mask || slot < 0 || !c.flush_paths[slot]) return flush_failed(c, r, why);
  r.done_mask = 1;
  if (int rc = post_flush_read(c, r, slot); rc != 0)
    return flush_failed(c, r, why + "; ibv_post_send on " + c.flush_paths[slot]->dev->port.id() + ": " + std::strerror(rc));
  HA_INFO("NET/HA: %s: flush read %s, read again on %s", c.id.c_str(), why.c_str(),
          c.flush_paths[slot]->dev->port.id().c_str());
  return ncclSuccess;
}

// Reaps the completions of one loopback QP: flush requests done, or read again on the other slot.
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
    if (r.type != ReqType::flush || r.completed || flush_wr_value(r) != value) continue;  // a stale attempt
    if (wcs[i].status == IBV_WC_SUCCESS) {
      r.completed = 1;
      ++c.stats.flush_reads[slot];
      continue;
    }
    const std::string why = std::string("failed (") + ibv_wc_status_str(wcs[i].status) + " on " + p.dev->port.id() + ")";
    if (auto rc = read_again(c, r, 1 - slot, why); rc != ncclSuccess) return rc;
  }
  return ncclSuccess;
}

}  // namespace

Status setup_flush(RecvComm& c) {
  const State* st = state();
  if (!st || !st->flush_qps()) return {};
  c.force_flush = st->config.force_flush;
  for (int s = 0; s < kSlots; ++s) {
    Device* dev = c.devs[s];
    if (!dev) continue;
    auto p = make_path(*dev, s, kFlushDepth, 1);
    Status ok = p ? Status{} : Status(std::move(p).error());
    if (ok) ok = net::connect_rc_qp((*p)->qp.get(), (*p)->local, (*p)->local, dev->timeouts);
    if (ok) {
      auto mr = net::register_mr(dev->pd.get(), &c.flush_sink[s], sizeof c.flush_sink[s], IBV_ACCESS_LOCAL_WRITE);
      if (mr) c.flush_sink_mr[s] = std::move(mr).value();
      else ok = std::move(mr).error();
    }
    if (!ok) {
      if (s == 0) return ok;  // the primary's flush QP is required
      HA_WARN("NET/HA: %s: no flush QP on %s (%s); after a failover flushes read through %s", c.id.c_str(),
              dev->port.id().c_str(), ok.error().message.c_str(), c.devs[0]->port.id().c_str());
      continue;
    }
    c.flush_paths[s] = std::move(p).value();
  }
  for (auto& r : c.flushes) r.comm = &c;
  return {};
}

void close_flush(RecvComm& c) {
  for (auto& p : c.flush_paths) retire(std::move(p));
}

ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request) {
  auto& c = *static_cast<RecvComm*>(recv_comm);
  *request = nullptr;
  int last = -1;  // NCCL's rule: one read, of the last receive that carried data
  for (int i = 0; i < n; ++i)
    if (sizes[i] > 0) last = i;
  const auto* mh = last < 0 ? nullptr : static_cast<const RegHandle*>(mhandles[last]);
  if (!mh || !(mh->gpu || c.force_flush)) {  // nothing to read back: host memory (without HA_NCCL_FORCE_FLUSH)
    *request = &c.flushed;
    return ncclSuccess;
  }
  hold_blocking(c);  // iflush may not answer "not yet" (a NULL request means "nothing to flush")
  struct Release {
    CommBase& c;
    ~Release() { c.owned.store(false, std::memory_order_release); }
  } release{c};
  if (c.error != ncclSuccess) return c.error;
  const int slot = flush_slot(c);
  if (slot < 0) {
    HA_WARN("NET/HA: %s: iflush needs an RDMA READ but the comm has no flush QP", c.id.c_str());
    return ncclInternalError;
  }
  Request& r = c.flushes[c.flush_seq % c.flushes.size()];
  if (r.type != ReqType::free) {  // a NULL request would tell NCCL "nothing to flush": never that
    HA_WARN("NET/HA: %s: more than %zu flushes in flight", c.id.c_str(), c.flushes.size());
    return ncclInternalError;
  }
  r.type = ReqType::flush;
  r.nreqs = 1;
  r.completed = 0;
  r.done_mask = 0;
  r.seq = c.flush_seq;
  r.raddr = reinterpret_cast<std::uint64_t>(data[last]);
  for (int s = 0; s < kSlots; ++s) r.rkey[s] = mh->rkey(s);
  if (int rc = post_flush_read(c, r, slot); rc != 0)
    return flush_failed(c, r, std::string("ibv_post_send: ") + std::strerror(rc));
  ++c.flush_seq;
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
    // Still outstanding on a device that is no longer the active one (a failover since): the
    // writes to order came through the new one.
    if (!r.completed && !r.done_mask && c.error == ncclSuccess && r.index != flush_slot(c)) {
      const std::string why = "outstanding on " + c.flush_paths[r.index]->dev->port.id() + " after the failover";
      if (auto rc = read_again(c, r, flush_slot(c), why); rc != ncclSuccess) return rc;
    }
    if (!r.completed) return c.error;
  }
  r.type = ReqType::free;
  *done = 1;
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
