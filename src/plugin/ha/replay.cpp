// Exactly-once across a switchover (failover.cpp's announce and syncing steps): the receiver
// re-arms what it has not received on the new path and reports what it has (receiver_report); the
// sender completes every send the report shows delivered and replays exactly the others
// (apply_report). A slot may have moved to another device since a request was first posted
// (rebind.hpp): keys are taken afresh from the registrations.
#include <algorithm>
#include <bit>
#include <cstring>

#include "core/path_ops.hpp"
#include "ha/control_ops.hpp"

namespace nccl_ha::plugin {

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

namespace {

// The keys of receive `r`'s buffers in its clear-to-send entry, taken afresh from their
// registrations: a slot may have moved to another device since the entry was first written
// (rebind.hpp). Only while no write of the entry is in flight (the old path is drained).
void refresh_entry(FifoEntry& e, const Request& r) {
  for (int i = 0; i < r.nreqs; ++i)
    if (const RegHandle* mh = r.mh[i])
      for (int s = 0; s < kSlots; ++s) e.rkey[s][i] = mh->rkey(s);
  seal(e);
}

// A send about to be replayed on `slot`: its local key from its registration, the receiver's key
// from the clear-to-send entry the receiver re-published for it before its report (the report's
// write completing means those writes have landed). Either side's slot may have moved since the
// send was first posted.
void refresh_send(SendComm& c, Request& r, int slot) {
  if (r.mh[0]) r.lkey[slot] = r.mh[0]->lkey(slot);
  cts_rkey(c.fifo[r.seq % kMaxRequests], r.seq, r.index, slot, r.rkey[slot]);
}

}  // namespace

// Receiver: what it has, re-armed on the new path; then the report.
// A path that carried traffic before (kept by a failback, or re-synchronised in place) still has
// receive WRs posted: on each QP only the difference is posted, any excess is that QP's
// spare_recvs. The parts of a buffer that landed on the old path count for nothing: the sender
// sends the whole buffer again, in the new path's parts.
Status announce_recv(RecvComm& c, Path& p) {
  std::array<std::uint32_t, net::kMaxEndpointQps> needed{};
  needed[0] = kCtlRecvs;
  for (Request& r : c.reqs) {
    if (r.type != ReqType::recv || r.buffers_gone) continue;
    const auto missing = static_cast<std::uint32_t>(r.nreqs - std::popcount(r.done_mask));
    for (int q = 0; q < p.nqps; ++q)
      if (p.split || q == p.qp_of(r.seq)) needed[static_cast<std::size_t>(q)] += missing;
    for (int i = 0; i < r.nreqs; ++i)
      if (!(r.done_mask & (1u << i))) {
        r.parts[i] = 0;
        r.sizes[i] = 0;
      }
  }
  for (int q = 0; q < p.nqps; ++q) {
    const auto i = static_cast<std::size_t>(q);
    const std::uint32_t have = p.qp_recvs_out[i];
    p.spare_recvs[i] = have > needed[i] ? have - needed[i] : 0;
    for (std::uint32_t deficit = needed[i] > have ? needed[i] - have : 0; deficit > 0;) {
      const std::uint32_t n = std::min<std::uint32_t>(deficit, kMaxRecvs);
      if (int rc = post_recvs(p, q, static_cast<int>(n)); rc != 0)
        return make_error(Errc::verbs, std::string("posting receives on the new path: ") + std::strerror(rc));
      deficit -= n;
    }
  }
  for (std::uint64_t slot = 0; slot < kMaxRequests; ++slot) {
    const Request& r = c.reqs[slot];
    if (r.type != ReqType::recv || r.buffers_gone) continue;  // NCCL freed its buffer: never published again
    refresh_entry(c.outbox[slot], r);
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
      c.stats.bytes_sent += static_cast<std::uint64_t>(r.sizes[0]);
      continue;
    }
    if (r.buffers_gone) continue;  // NCCL freed its buffer (abort path): nothing to replay from
    refresh_send(c, r, p.slot);
    if (int rc = post_data(c, r, p); rc != 0)
      return make_error(Errc::verbs, std::string("replaying on the new path: ") + std::strerror(rc));
    ++replayed;
  }
  return replayed;
}

}  // namespace nccl_ha::plugin
