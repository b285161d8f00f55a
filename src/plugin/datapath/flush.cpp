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
#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/path_ops.hpp"
#include "core/state.hpp"
#include "datapath/fused.hpp"
#include "datapath/one_comm.hpp"
#include "datapath/p2p.hpp"

namespace nccl_ha::plugin {
namespace {

// How long a flush waits for the loopback QP of a device that wrote its data, beyond the failover
// timeout (a failover in progress holds the control plane, so no rebuild, that long at most): a
// rebuild takes one worker job (milliseconds; Soft-RoCE about 100 ms) after the next control tick
// (<= 250 ms), and a failed one is tried again after 100 ms, 200 ms, 400 ms ...: 5 s is several
// attempts. Past it the flush fails, and with it the comm.
constexpr std::uint64_t kFlushWaitNs = 5'000'000'000;

FlushSlotView slot_view(const RecvComm& c, int s) {
  const Device* d = c.devs[s];
  if (!d) return {};
  // A QP left on the slot's previous device (until re-protection brings one) reads no key of now.
  return {d->index, d->port_up.load(std::memory_order_relaxed), flush_qp_usable(c, s) && c.flush_paths[s]->dev == d};
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
  const int rc = ibv_post_send(p.qp(), &wr, &bad);
  if (rc == 0) {
    r.flush.want = static_cast<std::uint8_t>(r.flush.want & ~slot_bit(slot));
    r.flush.out = static_cast<std::uint8_t>(r.flush.out | slot_bit(slot));
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
  const std::string active = c.devs[c.active()] ? c.devs[c.active()]->port.id() : "none";
  if (d && d->index == writer && slot == c.active())  // the comm is still on it: its failover follows
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
  FlushPlan plan = plan_flush(f, v, c.active());
  if (plan.lost >= 0) note_lost(c, r, plan.lost, writers[plan.lost]);
  if (plan.post && r.buffers_gone) return flush_failed(c, r, "its buffer was deregistered meanwhile");
  for (int s = 0; s < kSlots; ++s)
    if ((plan.post & slot_bit(s)) && post_flush_read(c, r, s) != 0) plan.wait = static_cast<std::uint8_t>(plan.wait | slot_bit(s));
  if (!plan.wait) {
    r.wait_until_ns = 0;
    if (!f.want && !f.out) r.completed = 1;
    return ncclSuccess;
  }
  c.flush_waiting = static_cast<std::uint8_t>(c.flush_waiting | plan.wait);  // tend_flush: rebuild them now
  const int s = (plan.wait & slot_bit(0)) ? 0 : 1;
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

}  // namespace

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
    if (r.type != ReqType::flush || flush_wr_value(r, slot) != value || !(r.flush.out & slot_bit(slot))) continue;
    r.flush.out = static_cast<std::uint8_t>(r.flush.out & ~slot_bit(slot));
    if (wcs[i].status == IBV_WC_SUCCESS) {
      r.flush.done = static_cast<std::uint8_t>(r.flush.done | slot_bit(slot));
      if (!r.flush.want && !r.flush.out) r.completed = 1;
      ++c.stats.flush_reads[slot];
      continue;
    }
    p.link.store(Path::failed, std::memory_order_relaxed);  // in ERROR now: the control plane replaces it
    r.flush.want = static_cast<std::uint8_t>(r.flush.want | slot_bit(slot));
    HA_INFO("NET/HA: %s: flush READ on %s failed (%s); read there again once its QP is rebuilt", c.id.c_str(),
            p.dev->port.id().c_str(), ibv_wc_status_str(wcs[i].status));
  }
  return ncclSuccess;
}

ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  if (n < 0 || n > kMaxRecvs) {
    HA_WARN("NET/HA: iflush of %d buffers (0..%d supported)", n, kMaxRecvs);
    return ncclInvalidArgument;
  }
  CommHead& h = from_nccl(recv_comm);
  if (h.fused) return fused_iflush(static_cast<FusedComm&>(h), n, data, sizes, mhandles, request);
  return flush_on(static_cast<RecvComm&>(h), n, data, sizes, mhandles, request);
}

ncclResult_t flush_on(RecvComm& c, int n, void** data, const int* sizes, void** mhandles, void** request) {
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
  r.flush.want = c.flush_last ? c.flush_last : slot_bit(c.active());
  for (int s = 0; s < kSlots; ++s)
    if (c.flush_last & slot_bit(s)) r.flush.dev[s] = c.flush_writer[s];
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
