// Posting on a comm's paths, as the data path and the control plane both do (path_ops.hpp): the
// data writes and receive WRs, the receiver's clear-to-send writes, control writes and
// heartbeats; each posted send counted on its path for the soft RTO. And how a failure is told.
#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>

#include "core/path_ops.hpp"
#include "nccl_ha/reactor/async_events.hpp"

namespace nccl_ha::plugin {
namespace {

void note_send_posted(Path& p, std::uint64_t bytes = 0) {
  if (p.sends_out++ == 0) p.last_progress_ns = 0;  // the soft RTO starts at the next look
  if (bytes) p.rto_allowance_ns = std::max(p.rto_allowance_ns, write_allowance_ns(bytes, p.dev->port.speed_mbps));
}

// A data write's immediate: the receive and buffer it completes (kImmSeqMask).
std::uint32_t imm_of(std::uint64_t seq, std::uint32_t index) {
  return htonl((static_cast<std::uint32_t>(seq & kImmSeqMask) << kImmIndexBits) | index);
}

// One part of r on QP q of p: `len` bytes at `offset` of the message (all of it unless split).
// Adaptive-routing mode (NCCL_IB_ADAPTIVE_ROUTING, as net_ib): a message larger than the device's
// threshold goes as a plain RDMA write, and a write with immediate data follows it on the same QP:
// the responder completes the second only after the first has landed, however the fabric routed
// the packets. net_ib's notice carries the size in its immediate; ours names the receive and buffer
// (imm_of), so it writes the size into the peer's ControlBlock::ar_size and sets kArImm (each
// part's notice the whole message's size). Both are signalled (two completions, two sends
// counted): an error completion of the first, then the flushed second, keep the count of sends
// outstanding exact.
int post_part(SendComm& c, Request& r, Path& p, int q, std::uint32_t offset, std::uint32_t len) {
  const int s = p.slot;
  const auto size = static_cast<std::uint32_t>(r.sizes[0]);
  const std::uint64_t id = static_cast<std::uint64_t>(&r - c.reqs.data());
  ibv_sge sge{r.laddr + offset, len, r.lkey[s]};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(WrKind::data, id);
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = imm_of(r.seq, r.index);
  wr.wr.rdma.remote_addr = r.raddr + offset;
  wr.wr.rdma.rkey = r.rkey[s];
  ibv_send_wr* bad = nullptr;
  if (size <= p.dev->ar_threshold || len == 0) {  // (an empty part of a large one: nothing to route)
    const int rc = ibv_post_send(p.qp(q), &wr, &bad);
    if (rc == 0) note_send_posted(p, len);
    return rc;
  }
  std::uint32_t& size_out = c.ctrl_out.ar_size[r.seq % kMaxRequests][r.index];  // the peer's twin gets it
  size_out = size;
  const auto at = reinterpret_cast<std::uintptr_t>(&size_out) - reinterpret_cast<std::uintptr_t>(&c.ctrl_out);
  ibv_sge notice_sge{reinterpret_cast<std::uint64_t>(&size_out), sizeof size, c.keys[s].ctrl_out->lkey};
  ibv_send_wr notice = wr;
  notice.sg_list = &notice_sge;
  notice.num_sge = 1;
  notice.imm_data = htonl(ntohl(wr.imm_data) | kArImm);
  notice.wr.rdma.remote_addr = c.peer_ctrl + at;
  notice.wr.rdma.rkey = c.keys[s].peer_ctrl;
  wr.wr_id = make_wr_id(WrKind::bulk, id);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.next = &notice;
  const int rc = ibv_post_send(p.qp(q), &wr, &bad);
  if (rc == 0 || bad == &notice) note_send_posted(p, len);
  if (rc == 0) note_send_posted(p);
  return rc;
}

}  // namespace

void weighted_offsets(std::uint64_t size, std::span<const std::uint32_t> weights,
                      std::span<std::uint64_t> offsets) noexcept {
  constexpr std::uint64_t kAlign = 128;
  std::uint64_t total = 0;
  for (std::uint32_t w : weights) total += w;
  const bool equal = total == 0;
  if (equal) total = weights.size();
  std::uint64_t before = 0;  // the weights of the parts before part i
  for (std::size_t i = 0; i < weights.size(); ++i) {
    // size < 2^40 and total <= 8 x 2^20: the product fits in 64 bits
    const std::uint64_t share = (size * before + total - 1) / total;
    offsets[i] = std::min(size, (share + kAlign - 1) / kAlign * kAlign);
    before += equal ? 1 : weights[i];
  }
  offsets[weights.size()] = size;
}

// One write (with its notice in adaptive-routing mode) on QP r.seq % nqps, or, split, a part on
// each QP: net_ib's chunks of size / nqps rounded up to 128 bytes (what NCCL's LL and LL128
// protocols need), part j at j chunks; a part past the end is an empty write with immediate
// data (the receiver counts one completion per QP). The request completes with its last part's
// completion (p2p.cpp); r.parts_done counts them.
int post_data(SendComm& c, Request& r, Path& p) {
  r.parts_done = 0;
  const auto size = static_cast<std::uint32_t>(r.sizes[0]);
  if (!p.split) return post_part(c, r, p, p.qp_of(r.seq), 0, size);
  const auto n = static_cast<std::uint32_t>(p.nqps);
  const std::uint32_t chunk = split_chunk(size, n);
  for (std::uint32_t j = 0; j < n; ++j) {
    const std::uint32_t offset = std::min(size, j * chunk);
    if (int rc = post_part(c, r, p, static_cast<int>(j), offset, std::min(chunk, size - offset)); rc != 0) return rc;
  }
  return 0;
}

int post_recvs(Path& p, int q, int n) {
  if (n <= 0) return 0;
  ibv_recv_wr wrs[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    wrs[i] = ibv_recv_wr{};
    wrs[i].wr_id = make_wr_id(WrKind::recv, static_cast<std::uint64_t>(q));
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(p.qp(q), wrs, &bad);
  // A failure midway leaves the WRs before `bad` posted: each will complete (or be flushed), so
  // each is counted; the rest were not posted.
  const auto posted = static_cast<std::uint32_t>(wrs_posted(wrs, n, rc, bad));
  p.recvs_out += posted;
  p.qp_recvs_out[static_cast<std::size_t>(q)] += posted;
  return rc;
}

int post_control_recvs(Path& p, int n) {
  int rc = 0;
  for (int left = n; left > 0 && rc == 0; left -= kMaxRecvs) rc = post_recvs(p, 0, std::min(left, kMaxRecvs));
  return rc;
}

int post_data_recvs(Path& p, std::uint64_t seq, int n) {
  const int first = p.split ? 0 : p.qp_of(seq);
  const int last = p.split ? p.nqps : first + 1;
  for (int q = first; q < last; ++q) {
    auto& spare = p.spare_recvs[static_cast<std::size_t>(q)];
    const auto taken = std::min(spare, static_cast<std::uint32_t>(n));  // WRs already there (replay.cpp)
    spare -= taken;
    if (int rc = post_recvs(p, q, n - static_cast<int>(taken)); rc != 0) return rc;
  }
  return 0;
}

int post_cts(RecvComm& c, Path& p, std::uint64_t slot) {
  const FifoEntry& e = c.outbox[slot];
  ibv_sge sge{reinterpret_cast<std::uint64_t>(&e), sizeof e, c.keys[p.slot].ring->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(WrKind::cts, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;  // every CTS is watched by the soft RTO
  wr.wr.rdma.remote_addr = c.remote_fifo + slot * sizeof(FifoEntry);
  wr.wr.rdma.rkey = c.keys[p.slot].peer_fifo;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(p.qp(), &wr, &bad);
  if (rc == 0) note_send_posted(p);
  return rc;
}

int post_control(CommBase& c, Path& p, WrKind kind, std::size_t offset, std::size_t len, CtlKind notify,
                 const WriteKeys* keys, std::uint64_t value) {
  auto* src = reinterpret_cast<std::uint8_t*>(&c.ctrl_out) + offset;
  const WriteKeys k = keys ? *keys : WriteKeys{c.keys[p.slot].ctrl_out->lkey, c.keys[p.slot].peer_ctrl};
  ibv_sge sge{reinterpret_cast<std::uint64_t>(src), static_cast<std::uint32_t>(len), k.lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(kind, value);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = notify != CtlKind{} ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.imm_data = htonl(kCtlImm | static_cast<std::uint32_t>(notify));
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c.peer_ctrl + offset;
  wr.wr.rdma.rkey = k.rkey;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(p.qp(), &wr, &bad);
  if (rc == 0) note_send_posted(p);
  return rc;
}

int post_heartbeat(CommBase& c, Path& p, std::uint64_t seq) {
  c.ctrl_out.heartbeat = ++c.stats.heartbeats_sent;
  return post_control(c, p, WrKind::heartbeat, offsetof(ControlBlock, heartbeat), sizeof(std::uint64_t), {}, nullptr, seq);
}

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

}  // namespace nccl_ha::plugin
