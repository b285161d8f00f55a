// The data path: isend / irecv / test / iflush and comm setup/teardown (see comm.hpp).
// No locks, allocations or thread hops between isend/irecv and test: every comm is used by one
// NCCL proxy thread at a time, requests live in fixed arrays inside the comm.
#include <arpa/inet.h>

#include <cstring>

#include "comm.hpp"
#include "core.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {
namespace {

constexpr int kFifoAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

Status init_base(CommBase& c, Device& dev, int send_depth, int recv_depth) {
  c.dev = &dev;
  auto cq = net::create_polled_cq(dev.ctx.get(), send_depth + recv_depth + 8);
  if (!cq) return std::move(cq).error();
  c.cq = std::move(cq).value();
  net::QpCaps caps;
  caps.max_send_wr = static_cast<std::uint32_t>(send_depth);
  caps.max_recv_wr = static_cast<std::uint32_t>(recv_depth);
  auto qp = net::create_rc_qp(dev.pd.get(), c.cq.get(), c.cq.get(), caps);
  if (!qp) return std::move(qp).error();
  c.qp = std::move(qp).value();
  c.local = net::local_endpoint(c.qp.get(), dev.port, net::random_psn());
  if (const State* st = state()) c.max_poll = st->config.test_max_poll;
  return {};
}

ncclResult_t fail_comm(CommBase& c, const ibv_wc& wc) {
  if (!c.failed)
    HA_WARN("NET/HA: %s %s comm QP %u: completion error '%s' (status %d, vendor error 0x%x, opcode %d)",
            c.dev->port.id().c_str(), c.kind == CommKind::send ? "send" : "recv", c.local.qpn,
            ibv_wc_status_str(wc.status), static_cast<int>(wc.status), wc.vendor_err, static_cast<int>(wc.opcode));
  c.failed = true;
  return ncclRemoteError;
}

// Polls up to `max` completions into `wcs`; -1 (comm failed, WARN logged) on a poll error.
int poll(CommBase& c, ibv_wc* wcs, int max) {
  const int n = ibv_poll_cq(c.cq.get(), std::min(max, 64), wcs);
  if (n < 0) {
    HA_WARN("NET/HA: ibv_poll_cq failed on %s", c.dev->port.id().c_str());
    c.failed = true;
  } else {
    c.completions += static_cast<std::uint64_t>(n);
  }
  return n;
}

// Reaps up to `max` completions of a send comm.
ncclResult_t progress_send(SendComm& c, int max) {
  ibv_wc wcs[64];
  const int n = poll(c, wcs, max);
  if (n < 0) return ncclSystemError;
  for (int i = 0; i < n; ++i) {
    if (wcs[i].status != IBV_WC_SUCCESS) return fail_comm(c, wcs[i]);
    if (wcs[i].wr_id < c.reqs.size()) ++c.reqs[wcs[i].wr_id].completed;
  }
  return ncclSuccess;
}

ncclResult_t progress_recv(RecvComm& c, int max) {
  ibv_wc wcs[64];
  const int n = poll(c, wcs, max);
  if (n < 0) return ncclSystemError;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wc.status != IBV_WC_SUCCESS) return fail_comm(c, wc);
    if (wc.wr_id == kFifoWrId) continue;  // a signalled FIFO write: frees send queue slots
    const std::uint32_t imm = ntohl(wc.imm_data);
    const std::uint32_t index = imm & (kMaxRecvs - 1);
    const std::uint32_t seq_low = imm >> kImmIndexBits;
    Request& r = c.reqs[seq_low % kMaxRequests];
    if (r.type != ReqType::recv || (r.seq & (0xffffffffu >> kImmIndexBits)) != seq_low || index >= r.nreqs) {
      HA_WARN("NET/HA: %s: completion for an unknown receive (seq %u, index %u)", c.dev->port.id().c_str(), seq_low,
              index);
      c.failed = true;
      return ncclInternalError;
    }
    r.sizes[index] = static_cast<int>(wc.byte_len);
    ++r.completed;
  }
  return ncclSuccess;
}

}  // namespace

Expected<std::unique_ptr<SendComm>> make_send_comm(Device& dev) {
  auto c = std::make_unique<SendComm>();
  if (auto s = init_base(*c, dev, kSendQueueDepth, 1); !s) return std::move(s).error();
  auto mr = net::register_mr(dev.pd.get(), c->fifo, sizeof c->fifo, kFifoAccess);
  if (!mr) return std::move(mr).error();
  c->fifo_mr = std::move(mr).value();
  c->nfree = static_cast<int>(c->reqs.size());
  for (std::size_t i = 0; i < c->reqs.size(); ++i) {
    c->free_list[i] = static_cast<std::uint16_t>(c->reqs.size() - 1 - i);
    c->reqs[i].comm = c.get();
  }
  return c;
}

Expected<std::unique_ptr<RecvComm>> make_recv_comm(Device& dev) {
  auto c = std::make_unique<RecvComm>();
  if (auto s = init_base(*c, dev, kMaxRequests + kFifoSignalEvery, kRecvQueueDepth); !s) return std::move(s).error();
  auto mr = net::register_mr(dev.pd.get(), c->outbox, sizeof c->outbox, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) return std::move(mr).error();
  c->outbox_mr = std::move(mr).value();
  for (auto& r : c->reqs) r.comm = c.get();
  c->flushed.comm = c.get();
  return c;
}

ncclResult_t isend(void* send_comm, void* data, std::size_t size, int tag, void* mhandle, void** request) {
  auto& c = *static_cast<SendComm*>(send_comm);
  *request = nullptr;
  if (c.failed) return ncclRemoteError;
  const std::uint64_t slot = c.seq % kMaxRequests;
  const FifoEntry& e = c.fifo[slot];
  // The receiver writes the whole entry with one RDMA write; `seq` is read first (acquire).
  if (__atomic_load_n(&e.seq, __ATOMIC_ACQUIRE) != c.seq + 1) return ncclSuccess;  // no clear-to-send yet
  const std::uint32_t nreqs = e.nreqs;
  if (nreqs == 0 || nreqs > kMaxRecvs) {
    HA_WARN("NET/HA: %s: corrupt clear-to-send entry (nreqs %u)", c.dev->port.id().c_str(), nreqs);
    c.failed = true;
    return ncclInternalError;
  }
  std::uint32_t index = 0;
  for (; index < nreqs; ++index)
    if (!(c.matched & (1u << index)) && e.tag[index] == tag) break;
  if (index == nreqs) return ncclSuccess;  // this slot has no receive for that tag (yet)
  if (size > e.size[index]) {
    HA_WARN("NET/HA: %s: message of %zu bytes (tag %d) is larger than the receive buffer of %llu bytes",
            c.dev->port.id().c_str(), size, tag, static_cast<unsigned long long>(e.size[index]));
    return ncclInvalidUsage;
  }
  if (c.nfree == 0) return ncclSuccess;
  const std::uint16_t id = c.free_list[--c.nfree];
  Request& r = c.reqs[id];
  r.type = ReqType::send;
  r.nreqs = 1;
  r.completed = 0;
  r.seq = c.seq;
  r.sizes[0] = static_cast<int>(size);

  auto* mh = static_cast<MrHandle*>(mhandle);
  ibv_sge sge{reinterpret_cast<std::uint64_t>(data), static_cast<std::uint32_t>(size), mh ? mh->mr->lkey : 0};
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = size ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<std::uint32_t>(c.seq << kImmIndexBits) | index);
  wr.wr.rdma.remote_addr = e.addr[index];
  wr.wr.rdma.rkey = e.rkey[index];
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(c.qp.get(), &wr, &bad)) {
    HA_WARN("NET/HA: %s: ibv_post_send failed: %s", c.dev->port.id().c_str(), std::strerror(rc));
    r.type = ReqType::free;
    c.free_list[c.nfree++] = id;
    return ncclSystemError;
  }
  c.matched |= static_cast<std::uint8_t>(1u << index);
  if (c.matched == (1u << nreqs) - 1) {  // every buffer of this slot sent: move on
    c.matched = 0;
    ++c.seq;
  }
  *request = &r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                   void** request) {
  auto& c = *static_cast<RecvComm*>(recv_comm);
  *request = nullptr;
  if (c.failed) return ncclRemoteError;
  if (n < 1 || n > kMaxRecvs) {
    HA_WARN("NET/HA: irecv of %d buffers (1..%d supported)", n, kMaxRecvs);
    return ncclInvalidArgument;
  }
  const std::uint64_t slot = c.seq % kMaxRequests;
  Request& r = c.reqs[slot];
  if (r.type != ReqType::free) return ncclSuccess;  // kMaxRequests receives in flight: retry later

  ibv_recv_wr wrs[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    wrs[i] = ibv_recv_wr{};
    wrs[i].wr_id = slot;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad_recv = nullptr;
  if (int rc = ibv_post_recv(c.qp.get(), wrs, &bad_recv)) {
    HA_WARN("NET/HA: %s: ibv_post_recv failed: %s", c.dev->port.id().c_str(), std::strerror(rc));
    return ncclSystemError;
  }

  FifoEntry& e = c.outbox[slot];
  for (int i = 0; i < n; ++i) {
    auto* mh = static_cast<MrHandle*>(mhandles[i]);
    e.addr[i] = reinterpret_cast<std::uint64_t>(data[i]);
    e.size[i] = sizes[i];
    e.rkey[i] = mh ? mh->mr->rkey : 0;
    e.tag[i] = tags[i];
  }
  e.nreqs = static_cast<std::uint32_t>(n);
  e.seq = c.seq + 1;
  ibv_sge sge{reinterpret_cast<std::uint64_t>(&e), sizeof e, c.outbox_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kFifoWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  // Unsignalled writes still hold send-queue slots until a later signalled one completes.
  wr.send_flags = (c.seq % kFifoSignalEvery == 0) ? IBV_SEND_SIGNALED : 0;
  wr.wr.rdma.remote_addr = c.remote_fifo + slot * sizeof(FifoEntry);
  wr.wr.rdma.rkey = c.remote_fifo_rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(c.qp.get(), &wr, &bad)) {
    HA_WARN("NET/HA: %s: posting the clear-to-send failed: %s", c.dev->port.id().c_str(), std::strerror(rc));
    c.failed = true;  // receive WRs are posted: the comm cannot be resynchronised
    return ncclSystemError;
  }
  r.type = ReqType::recv;
  r.nreqs = static_cast<std::uint8_t>(n);
  r.completed = 0;
  r.seq = c.seq;
  for (int i = 0; i < n; ++i) r.sizes[i] = 0;
  ++c.seq;
  *request = &r;
  return ncclSuccess;
}

ncclResult_t iflush(void* recv_comm, int /*n*/, void** /*data*/, const int* /*sizes*/, void** /*mhandles*/,
                    void** request) {
  // Host memory is coherent once the receive completed: nothing to flush. (GPU buffers would
  // need an RDMA READ to push PCIe writes out; ptrSupport does not offer them.)
  auto& c = *static_cast<RecvComm*>(recv_comm);
  *request = &c.flushed;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  auto& r = *static_cast<Request*>(request);
  *done = 0;
  if (r.type == ReqType::flush) {
    *done = 1;
    return ncclSuccess;
  }
  CommBase& base = *r.comm;
  const int max_poll = base.max_poll;
  if (base.kind == CommKind::send) {
    auto& c = static_cast<SendComm&>(base);
    if (r.completed < 1 && !c.failed)
      if (auto rc = progress_send(c, max_poll); rc != ncclSuccess) return rc;
    if (c.failed) return ncclRemoteError;
    if (r.completed < 1) return ncclSuccess;
    if (sizes) sizes[0] = r.sizes[0];
    r.type = ReqType::free;
    c.free_list[c.nfree++] = static_cast<std::uint16_t>(&r - c.reqs.data());
  } else {
    auto& c = static_cast<RecvComm&>(base);
    if (r.completed < r.nreqs && !c.failed)
      if (auto rc = progress_recv(c, max_poll); rc != ncclSuccess) return rc;
    if (c.failed) return ncclRemoteError;
    if (r.completed < r.nreqs) return ncclSuccess;
    if (sizes)
      for (int i = 0; i < r.nreqs; ++i) sizes[i] = r.sizes[i];
    r.type = ReqType::free;
  }
  *done = 1;
  return ncclSuccess;
}

ncclResult_t close_send(void* send_comm) {
  std::unique_ptr<SendComm> c(static_cast<SendComm*>(send_comm));
  return ncclSuccess;
}

ncclResult_t close_recv(void* recv_comm) {
  std::unique_ptr<RecvComm> c(static_cast<RecvComm*>(recv_comm));
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
