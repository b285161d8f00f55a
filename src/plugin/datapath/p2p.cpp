// The data path: isend / irecv / test and closing (see comm.hpp; iflush is flush.cpp).
// No waiting, allocations or thread hops between isend/irecv and test: every comm is used by one
// NCCL proxy thread at a time, requests live in fixed arrays inside the comm, and the hand-off
// with the progress thread is one try-lock (Hold): while the control plane works on the comm,
// a call answers "not yet" (NULL request, not done). A failure of the active path never fails a
// call here: the request is kept, the control plane fails over and replays it (failover.cpp).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/path_ops.hpp"
#include "core/reaper.hpp"
#include "core/state.hpp"
#include "datapath/fused.hpp"
#include "datapath/one_comm.hpp"
#include "datapath/p2p.hpp"
#include "ha/face.hpp"

namespace nccl_ha::plugin {
namespace {

// One part of send `id` completed on p; the send, when it was the last (Path::parts).
void complete_send(SendComm& c, const Path& p, std::uint64_t id) {
  if (id >= c.reqs.size()) return;
  Request& r = c.reqs[id];
  if (r.type != ReqType::send || r.done_mask) return;
  if (++r.parts_done < p.parts()) return;
  r.done_mask = 1;
  r.completed = 1;
  ++c.stats.messages;
  c.stats.bytes_sent += static_cast<std::uint64_t>(r.sizes[0]);
}

// The size of a message that came as a plain write: its notice wrote it into our ControlBlock
// before its completion (kArImm; path_ops.cpp post_data).
std::uint32_t ar_size(const RecvComm& c, std::uint32_t slot, std::uint32_t index) {
  const volatile std::uint32_t* at = &c.ctrl.ar_size[slot][index];
  return *at;
}

// A data write of the peer arrived on p's QP `qp` (its imm names the receive and buffer): the
// buffer, or on a split path its part (the QP names it), the buffer when every part has landed.
// A part's bytes add up; a notice (kArImm) carries the whole message's size.
void complete_recv(RecvComm& c, const Path& p, int qp, std::uint32_t imm, const ibv_wc& wc) {
  const std::uint32_t index = imm & (kMaxRecvs - 1);
  const std::uint32_t seq_low = (imm & ~kArImm) >> kImmIndexBits;
  const std::uint32_t slot = seq_low % kMaxRequests;
  Request& r = c.reqs[slot];
  if (r.type != ReqType::recv || (r.seq & kImmSeqMask) != seq_low || index >= r.nreqs) {
    HA_WARN("NET/HA: %s on %s: completion for an unknown receive (seq %u, index %u)", c.id.c_str(),
            c.device().port.id().c_str(), seq_low, index);
    c.error = ncclInternalError;
    return;
  }
  if (r.done_mask & (1u << index)) {  // never expected: replay is exactly-once by construction
    ++c.stats.duplicates_dropped;
    HA_WARN("NET/HA: %s: duplicate completion of receive seq %llu index %u dropped", c.id.c_str(),
            static_cast<unsigned long long>(r.seq), index);
    return;
  }
  const auto part = static_cast<std::uint8_t>(1u << qp);
  if (p.split && (r.parts[index] & part)) {
    ++c.stats.duplicates_dropped;
    HA_WARN("NET/HA: %s: duplicate part %d of receive seq %llu index %u dropped", c.id.c_str(), qp,
            static_cast<unsigned long long>(r.seq), index);
    return;
  }
  const std::uint64_t landed = static_cast<std::uint64_t>(r.sizes[index]);
  const std::uint64_t bytes = (imm & kArImm) ? ar_size(c, slot, index) : (p.split ? landed : 0) + wc.byte_len;
  if (bytes > c.outbox[slot].size[index]) {  // never from a peer that keeps to the protocol
    HA_WARN("NET/HA: %s on %s: receive seq %llu index %u: %u bytes announced for a buffer of %llu", c.id.c_str(),
            c.device().port.id().c_str(), static_cast<unsigned long long>(r.seq), index,
            static_cast<unsigned>(bytes), static_cast<unsigned long long>(c.outbox[slot].size[index]));
    c.error = ncclInternalError;
    return;
  }
  r.sizes[index] = static_cast<int>(bytes);
  if (p.split) {
    r.parts[index] = static_cast<std::uint8_t>(r.parts[index] | part);
    if (r.parts[index] != (1u << p.nqps) - 1) return;  // more parts to come
  }
  r.done_mask = static_cast<std::uint8_t>(r.done_mask | (1u << index));
  ++r.completed;
  ++c.stats.messages;
  c.stats.bytes_received += bytes;
  if (c.flush_on) {  // the next flush reads through the device that wrote this (flush.cpp)
    c.flush_wrote = static_cast<std::uint8_t>(c.flush_wrote | (1u << p.slot));
    c.flush_writer[p.slot] = static_cast<std::int16_t>(p.dev->index);
  }
}

// A control write of the peer arrived on p (its data is in our ControlBlock: the completion
// comes after the placement). The receive WR it used is replaced; the control plane reads it.
void on_control(CommBase& c, Path& p, std::uint32_t kind) {
  if (int rc = post_control_recvs(p, 1); rc != 0)
    HA_WARN("NET/HA: %s on %s: re-posting a control receive failed: %s", c.id.c_str(), p.dev->port.id().c_str(),
            std::strerror(rc));
  const bool closed = c.cp.peer_closed();
  if (!c.cp.reaped_control(static_cast<CtlKind>(kind), p)) {
    HA_WARN("NET/HA: %s on %s: unknown control write %u", c.id.c_str(), p.dev->port.id().c_str(), kind);
    return;
  }
  if (!closed && c.cp.peer_closed())
    HA_INFO("NET/HA: %s on %s: the peer closed the connection", c.id.c_str(), p.dev->port.id().c_str());
  // Reaped by the data path: the control plane must hear of it now, not at its next tick.
  if (const State* st = state(); st && !st->reactor.in_progress_thread()) wake(c);
}

// A heartbeat's completion: its pair hears of the answer (a failover's probe, seq 0, needs nothing).
void heartbeat_done(Path& p, std::uint64_t seq) {
  if (!p.pair || seq == 0) return;
  heartbeat_acked(p, seq);
  if (p.pair_heartbeat == seq) p.pair_heartbeat = 0;
}

// Quiet endings: an orderly close (the comm healthy, no failover under way, no request in flight,
// so the peer holds no clear-to-send entry of ours and we none of its) tells the peer, so that
// its control plane does not take the silence that follows (our QPs gone) for a fault: a
// write with immediate data CtlKind::bye on the active path (into ControlBlock::bye). The close waits for its
// completion (the peer's ACK: one round trip), bounded, because the ERROR transition that
// follows would flush a write not yet sent. A peer that did not answer in time is probably gone:
// for a while after that, closes say no goodbye and wait for nothing (a dead peer's comms,
// hundreds of them, close without a bound each). A peer that closed first gets none: neither
// one whose goodbye came (peer_closed) nor one whose goodbye the close finds on the path now
// (both ranks closing at once: it may have gone already, and would never answer ours).
constexpr std::uint64_t kByeWaitNs = 50'000'000;
constexpr std::uint64_t kByeQuietNs = 1'000'000'000;
std::atomic<std::uint64_t> bye_unanswered_until{0};

template <std::size_t N>
bool all_free(const std::array<Request, N>& reqs) {
  return std::all_of(reqs.begin(), reqs.end(), [](const Request& r) { return r.type == ReqType::free; });
}

bool orderly(const CommBase& c) {
  if (c.error != ncclSuccess || c.cp.peer_closed() || !c.cp.may_post())
    return false;
  return c.kind == CommKind::send ? all_free(static_cast<const SendComm&>(c).reqs)
                                  : all_free(static_cast<const RecvComm&>(c).reqs);
}

// What the close's own polling of the active path found: our goodbye's completion, the peer's.
struct Goodbyes {
  int polled = 0;  // ibv_poll_cq's result
  bool ours = false;
  bool peers = false;
};

Goodbyes reap_goodbyes(CommBase& c, Path& p) {
  constexpr std::uint32_t kPeerBye = kCtlImm | static_cast<std::uint32_t>(CtlKind::bye);
  Goodbyes seen;
  ibv_wc wcs[16];
  seen.polled = ibv_poll_cq(p.cq.get(), 16, wcs);
  for (int i = 0; i < seen.polled; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wr_kind(wc.wr_id) == WrKind::bye) {
      seen.ours = true;
      if (wc.status != IBV_WC_SUCCESS)
        HA_INFO("NET/HA: %s: goodbye to the peer failed: %s", c.id.c_str(), describe_error(p, wc).c_str());
    } else if (wc.status == IBV_WC_SUCCESS && wr_kind(wc.wr_id) == WrKind::recv && (wc.wc_flags & IBV_WC_WITH_IMM) &&
               ntohl(wc.imm_data) == kPeerBye) {
      seen.peers = true;  // both closed at once: its goodbye was waiting here
    }
  }
  return seen;
}

void say_goodbye(CommBase& c) {
  Path* p = c.paths[c.active()].get();
  if (!p || p->link.load(std::memory_order_acquire) != Path::up || !orderly(c)) return;
  for (int round = 0; round < 8; ++round) {  // what is already there: maybe the peer's goodbye
    const Goodbyes seen = reap_goodbyes(c, *p);
    if (seen.peers) return;
    if (seen.polled < 16) break;
  }
  const std::uint64_t start = now_ns();
  if (start < bye_unanswered_until.load(std::memory_order_relaxed)) return;
  if (post_control(c, *p, WrKind::bye, offsetof(ControlBlock, bye), sizeof(std::uint64_t), CtlKind::bye) != 0) return;
  for (;;) {
    const Goodbyes seen = reap_goodbyes(c, *p);
    if (seen.polled < 0 || seen.ours || seen.peers) return;
    const std::uint64_t now = now_ns();
    if (now - start > kByeWaitNs) {
      bye_unanswered_until.store(now + kByeQuietNs, std::memory_order_relaxed);
      HA_INFO("NET/HA: %s: the peer did not acknowledge the goodbye within %llu ms", c.id.c_str(),
              static_cast<unsigned long long>(kByeWaitNs / 1000000));
      return;
    }
    if (seen.polled == 0) std::this_thread::yield();
  }
}

// The paths are retired: their QPs go to ERROR at once (nothing the peer still sends lands in a
// buffer NCCL reuses), then to the reaper (destroying one on a dead port can block); the comm
// itself goes when its control task has let go of it.
void close_comm(CommBase& c) {
  {
    const HoldWait held(c);
    c.closing.store(true, std::memory_order_relaxed);
    say_goodbye(c);
    comm_closing(c);
    for (auto& p : c.paths) retire(std::move(p));
  }
  wake(c);
}

}  // namespace

void on_success(CommBase& c, Path& p, const ibv_wc& wc) {
  switch (wr_kind(wc.wr_id)) {
    case WrKind::data:
      complete_send(static_cast<SendComm&>(c), p, wr_value(wc.wr_id));
      break;
    case WrKind::recv: {
      const std::uint32_t imm = ntohl(wc.imm_data);
      if (!(wc.wc_flags & IBV_WC_WITH_IMM) || (imm & kCtlImm) || c.kind == CommKind::send)
        on_control(c, p, imm & ~kCtlImm);
      else
        complete_recv(static_cast<RecvComm&>(c), p, static_cast<int>(wr_value(wc.wr_id)), imm, wc);
      break;
    }
    case WrKind::heartbeat:
      heartbeat_done(p, wr_value(wc.wr_id));
      break;
    case WrKind::sync:
      c.cp.reaped_notice_write(&p == c.paths[c.active()].get());
      break;
    case WrKind::cts:
    case WrKind::bulk:  // its size notice (WrKind::data) completes the send
    case WrKind::bye:   // awaited by say_goodbye itself
    case WrKind::reprotect:
    case WrKind::hello:
    case WrKind::flush:  // flush reads complete on their own loopback QPs (flush.cpp)
      break;
  }
}

ncclResult_t send_on(SendComm& c, void* data, std::size_t size, int tag, void* mhandle, void* phandle,
                     std::size_t remote_offset, void** request) {
  *request = nullptr;
  Hold hold(c);
  if (!hold) return ncclSuccess;  // the control plane is on the comm: not yet
  if (!can_post(c)) return c.error;
  if (c.cur_seq != c.seq) {  // the clear-to-send entry for c.seq, copied whole
    switch (read_cts(c.fifo[c.seq % kMaxRequests], c.seq, c.cur)) {
      case CtsRead::not_posted:  // not yet posted
      case CtsRead::landing:     // still landing
        return ncclSuccess;
      case CtsRead::corrupt:
        HA_WARN("NET/HA: %s on %s: corrupt clear-to-send entry (nreqs %u)", c.id.c_str(), c.device().port.id().c_str(),
                c.cur.nreqs);
        c.error = ncclInternalError;
        return c.error;
      case CtsRead::whole:
        break;
    }
    c.cur_seq = c.seq;
  }
  const FifoEntry& e = c.cur;
  const std::uint32_t nreqs = e.nreqs;
  const std::uint32_t index = match_cts(e, c.matched, tag);
  if (index == nreqs) return ncclSuccess;  // this slot has no receive for that tag (yet)
  if (size > e.size[index]) {
    HA_WARN("NET/HA: %s on %s: message of %zu bytes (tag %d) is larger than the receive buffer of %llu bytes",
            c.id.c_str(), c.device().port.id().c_str(), size, tag, static_cast<unsigned long long>(e.size[index]));
    return ncclInvalidUsage;
  }
  if (remote_offset > e.size[index] - size) {  // a fused device's part (fused.cpp): the message is too large
    HA_WARN("NET/HA: %s on %s: part of %zu bytes at offset %zu (tag %d) is beyond the receive buffer of %llu bytes",
            c.id.c_str(), c.device().port.id().c_str(), size, remote_offset, tag,
            static_cast<unsigned long long>(e.size[index]));
    return ncclInvalidUsage;
  }
  if (c.nfree == 0) return ncclSuccess;
  const std::uint16_t id = c.free_list[--c.nfree];
  Request& r = c.reqs[id];
  r.type = ReqType::send;
  r.nreqs = 1;
  r.completed = 0;
  r.done_mask = 0;
  r.buffers_gone = false;
  r.index = static_cast<std::uint8_t>(index);
  r.seq = c.seq;
  r.sizes[0] = static_cast<int>(size);
  r.laddr = reinterpret_cast<std::uint64_t>(data);
  r.raddr = e.addr[index] + remote_offset;
  const auto* mh = static_cast<const RegHandle*>(mhandle);
  r.mh[0] = mh;
  for (int s = 0; s < kSlots; ++s) {
    r.lkey[s] = mh ? mh->lkey(s) : 0;
    r.rkey[s] = e.rkey[s][index];
  }
  r.prof.phandle[0] = phandle;
  profile_posted(c, r);
  c.matched |= static_cast<std::uint8_t>(1u << index);
  if (c.matched == (1u << nreqs) - 1) {  // every buffer of this slot sent: move on
    c.matched = 0;
    ++c.seq;
  }
  *request = &r;
  if (int rc = post_data(c, r, c.path()); rc != 0)  // the request stays: the failover replays it
    request_failover(c, std::string("ibv_post_send failed: ") + std::strerror(rc));
  return ncclSuccess;
}

ncclResult_t recv_on(RecvComm& c, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                     void** phandles, void** request) {
  *request = nullptr;
  Hold hold(c);
  if (!hold) return ncclSuccess;  // the control plane is on the comm: not yet
  if (!can_post(c)) return c.error;
  const std::uint64_t slot = c.seq % kMaxRequests;
  Request& r = c.reqs[slot];
  if (r.type != ReqType::free) return ncclSuccess;  // kMaxRequests receives in flight: retry later

  FifoEntry& e = c.outbox[slot];
  for (int i = 0; i < n; ++i) {
    const auto* mh = static_cast<const RegHandle*>(mhandles[i]);
    r.mh[i] = mh;
    e.addr[i] = reinterpret_cast<std::uint64_t>(data[i]);
    e.size[i] = sizes[i];
    for (int s = 0; s < kSlots; ++s) e.rkey[s][i] = mh ? mh->rkey(s) : 0;
    e.tag[i] = tags[i];
  }
  e.nreqs = static_cast<std::uint32_t>(n);
  e.seq = c.seq + 1;
  seal(e);
  r.type = ReqType::recv;
  r.nreqs = static_cast<std::uint8_t>(n);
  r.completed = 0;
  r.done_mask = 0;
  r.buffers_gone = false;
  r.seq = c.seq;
  for (int i = 0; i < n; ++i) {
    r.sizes[i] = 0;
    r.parts[i] = 0;
    r.prof.phandle[i] = phandles ? phandles[i] : nullptr;
  }
  profile_posted(c, r);
  ++c.seq;
  *request = &r;
  // A post that fails keeps the request: the failover posts its receives and its clear-to-send
  // again on the new path.
  Path& p = c.path();
  if (int rc = post_data_recvs(p, r.seq, n); rc != 0)
    request_failover(c, std::string("ibv_post_recv failed: ") + std::strerror(rc));
  else if (int rc2 = post_cts(c, p, slot); rc2 != 0)
    request_failover(c, std::string("posting the clear-to-send failed: ") + std::strerror(rc2));
  return ncclSuccess;
}

ncclResult_t isend(void* send_comm, void* data, std::size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
  CommHead& h = from_nccl(send_comm);
  if (h.fused) return fused_isend(static_cast<FusedComm&>(h), data, size, tag, mhandle, phandle, request);
  return send_on(static_cast<SendComm&>(h), data, size, tag, mhandle, phandle, 0, request);
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                   void** phandles, void** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxRecvs) {
    HA_WARN("NET/HA: irecv of %d buffers (1..%d supported)", n, kMaxRecvs);
    return ncclInvalidArgument;
  }
  CommHead& h = from_nccl(recv_comm);
  if (h.fused) return fused_irecv(static_cast<FusedComm&>(h), n, data, sizes, tags, mhandles, phandles, request);
  return recv_on(static_cast<RecvComm&>(h), n, data, sizes, tags, mhandles, phandles, request);
}

ncclResult_t test(void* request, int* done, int* sizes) {
  auto& r = *static_cast<Request*>(request);
  if (r.type == ReqType::fused) return fused_test(r, done, sizes);
  return test_one(r, done, sizes);
}

ncclResult_t test_one(Request& r, int* done, int* sizes) {
  *done = 0;
  CommBase& c = *r.comm;
  Hold hold(c);
  if (!hold) return ncclSuccess;  // the control plane is on the comm: not done yet
  if (r.type == ReqType::flush) return test_flush(r, done);
  if (r.completed < r.nreqs) {
    if (auto rc = data_poll(c); rc != ncclSuccess) return rc;
    if (r.completed < r.nreqs) return ncclSuccess;
  }
  profile_done(r);
  if (r.type == ReqType::send) {
    if (sizes) sizes[0] = r.sizes[0];
    auto& s = static_cast<SendComm&>(c);
    r.type = ReqType::free;
    s.free_list[s.nfree++] = static_cast<std::uint16_t>(&r - s.reqs.data());
  } else {
    if (sizes)
      for (int i = 0; i < r.nreqs; ++i) sizes[i] = r.sizes[i];
    r.type = ReqType::free;
  }
  *done = 1;
  return ncclSuccess;
}

ncclResult_t close_one(CommBase& c) {
  const std::shared_ptr<CommBase> nccl_ref = std::move(c.self);  // the comm goes with the last reference
  close_comm(c);
  return ncclSuccess;
}

ncclResult_t close_send(void* send_comm) {
  CommHead& h = from_nccl(send_comm);
  return h.fused ? fused_close(static_cast<FusedComm&>(h)) : close_one(static_cast<CommBase&>(h));
}

ncclResult_t close_recv(void* recv_comm) { return close_send(recv_comm); }

void close_at_finalize(CommBase& c) { close_one(c); }

}  // namespace nccl_ha::plugin
