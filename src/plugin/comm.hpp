// Send and receive communicators and their requests.
//
// Data path (receiver-driven clear-to-send, like NCCL's IB transport):
//   irecv  - the receiver posts one receive WR per buffer (consumed by WRITE_WITH_IMM) and
//            RDMA-writes a FifoEntry (address, rkey, size, tag of each buffer) into slot
//            seq % kMaxRequests of the sender's FIFO.
//   isend  - the sender reads its FIFO slot (seq last, so a complete entry is visible), matches
//            the tag, and RDMA-writes the data with immediate data = (seq << 3 | index).
//   test   - polls the comm's CQ (at most HA_NCCL_TEST_MAX_POLL entries); the receiver learns
//            each message's size from the completion's byte_len.
// Every request is identified by (seq, index): the basis for exactly-once replay on failover.
#pragma once

#include <atomic>
#include <array>
#include <cstdint>

#include "core.hpp"
#include "device.hpp"
#include "nccl_ha/net/qp.hpp"

namespace nccl_ha::plugin {

struct FifoEntry {
  std::uint64_t addr[kMaxRecvs];
  std::uint64_t size[kMaxRecvs];
  std::uint32_t rkey[kMaxRecvs];
  std::int32_t tag[kMaxRecvs];
  std::uint32_t nreqs;
  std::uint32_t reserved;
  std::uint64_t seq;  // irecv sequence number + 1 (0 = empty); written last
};
static_assert(sizeof(FifoEntry) == 208);

constexpr int kImmIndexBits = 3;  // log2(kMaxRecvs)
static_assert((1 << kImmIndexBits) == kMaxRecvs);
constexpr std::uint64_t kFifoWrId = ~0ull;  // receiver's FIFO writes

enum class ReqType : std::uint8_t { free, send, recv, flush };

struct CommBase;

struct Request {
  ReqType type = ReqType::free;
  std::uint8_t nreqs = 0;       // recv: buffers in the group
  std::uint8_t completed = 0;   // completions seen so far
  bool failed = false;
  std::uint64_t seq = 0;
  int sizes[kMaxRecvs] = {};    // what test() reports
  CommBase* comm = nullptr;
};

enum class CommKind : std::uint8_t { send, recv };

// Verbs resources of one connection. Declaration order = reverse destruction order.
struct CommBase {
  CommKind kind;
  Device* dev = nullptr;
  net::CqPtr cq;
  net::QpPtr qp;
  net::Endpoint local{};
  bool failed = false;  // an error completion was seen: every later call fails fast
  int max_poll = 16;    // HA_NCCL_TEST_MAX_POLL, copied at creation (test() reads no global)
  std::uint64_t completions = 0;

  explicit CommBase(CommKind k) : kind(k) {}
};

struct SendComm : CommBase {
  SendComm() : CommBase(CommKind::send) {}
  alignas(64) FifoEntry fifo[kMaxRequests] = {};  // written remotely by the receiver
  net::MrPtr fifo_mr;
  std::uint64_t seq = 0;           // FIFO slot being consumed
  std::uint8_t matched = 0;        // buffers of the current slot already sent (bit mask)
  std::array<Request, kMaxRequests * kMaxRecvs> reqs{};
  std::array<std::uint16_t, kMaxRequests * kMaxRecvs> free_list{};
  int nfree = 0;
};

struct RecvComm : CommBase {
  RecvComm() : CommBase(CommKind::recv) {}
  alignas(64) FifoEntry outbox[kMaxRequests] = {};  // source of the FIFO writes
  net::MrPtr outbox_mr;
  std::uint64_t remote_fifo = 0;
  std::uint32_t remote_fifo_rkey = 0;
  std::uint64_t seq = 0;  // next irecv
  std::array<Request, kMaxRequests> reqs{};
  Request flushed{ReqType::flush};  // returned by iflush for host memory: complete at once
};

constexpr int kSendQueueDepth = kMaxRequests * kMaxRecvs;  // one WRITE_WITH_IMM per isend
constexpr int kRecvQueueDepth = kMaxRequests * kMaxRecvs;  // one receive WR per buffer
constexpr int kFifoSignalEvery = 8;                         // FIFO writes are signalled 1 in 8

// Creates CQ, QP (INIT not yet) and the comm's registered FIFO memory on `dev`.
Expected<std::unique_ptr<SendComm>> make_send_comm(Device& dev);
Expected<std::unique_ptr<RecvComm>> make_recv_comm(Device& dev);

}  // namespace nccl_ha::plugin
