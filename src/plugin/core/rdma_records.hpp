// What the two ends of a connection write into each other's memory over RDMA (the FIFO's
// clear-to-send entries, the control block's records: failover notice, re-protection request and
// answer, the hello of a new path), the immediate data of control writes, and the work request ids
// every completion is decoded by. Records land in no defined byte order and carry a checksum
// (record_check, read_record).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/limits.hpp"
#include "nccl_ha/net/wire.hpp"
#include "runtime/flush_plan.hpp"

namespace nccl_ha::plugin {

constexpr int kSlots = 2;  // primary + standby device
static_assert(kSlots == kFlushSlots);

// Records written by one RDMA write land in no defined byte order: every record carries a
// checksum of its other bytes, and a reader copies it out and accepts it only when the copy's
// checksum matches (record_check / read_record below).
struct FifoEntry {
  std::uint64_t addr[kMaxRecvs];
  std::uint64_t size[kMaxRecvs];
  std::uint32_t rkey[kSlots][kMaxRecvs];  // the buffer's rkey on each device slot
  std::int32_t tag[kMaxRecvs];
  std::uint32_t nreqs;
  std::uint32_t reserved;
  std::uint64_t seq;    // irecv sequence number + 1 (0 = empty)
  std::uint64_t check;  // record_check of the bytes above
};
static_assert(sizeof(FifoEntry) == 248);

// What each side RDMA-writes into the other's ControlBlock during a failover.
struct SyncMsg {
  std::uint64_t base = 0;               // receiver: every receive with seq < base is complete
  std::uint8_t done[kMaxRequests] = {}; // receiver: completed buffers (bit mask) of receive base + i
  std::uint32_t slot = 0;               // the path slot the writer moved to
  std::uint32_t planned = 0;            // 1: a failback (the path left is healthy)
  std::uint32_t reserved = 0;
  std::uint32_t epoch = 0;              // failover number
  std::uint64_t check = 0;              // record_check of the bytes above
};
static_assert(sizeof(SyncMsg) == 64);

// Re-protection handshake (reprotect.cpp): the send side asks, the receive side answers. The
// standby may move to another pair of ports (rebind.hpp): the request names the receiver's device,
// and each side's keys for its memory on its new device travel with its endpoint.
constexpr std::uint32_t kSameDevice = 0xffffffffu;  // ReprotectMsg::dev: the slot's device as it is
// ReprotectMsg::ok of the receiver's unasked note that one of its ports came back while its standby
// is down (the sender sees only its own port events): the sender's next attempt starts at once.
constexpr std::uint32_t kPortBack = 2;
// ReprotectMsg::ok of a request that moves a standby which is up onto the connection's own pair
// (make-before-break): the receiver keeps its standby as it is until the hello, and a failure of the
// attempt leaves it there.
constexpr std::uint32_t kMove = 3;
// ReprotectMsg::ok of the receive side's question over TCP, while it waits for a rescue (rescue.hpp):
// does the peer's side of the connection still live? Answered by the peer's rescue service itself.
constexpr std::uint32_t kRescueCheck = 4;
// ReprotectMsg::ok of the receive side's refusal because the device the request names is down here:
// the sender leaves that device of the peer out of its next attempts until the receiver's kPortBack
// note (or kPeerPortDownNs, should the note be lost) instead of building a new QP for each attempt
// only to have it refused again.
constexpr std::uint32_t kPortDown = 5;
// ReprotectMsg::ok of a rescue's request (over TCP): kRescueSlot + the sender's slot of the new path.
// Both ends must number a path's slot alike (FifoEntry::rkey is indexed by it), and after a switch
// whose target was lost the two ends may disagree on which slot is active (the sender moved, the
// receiver never saw the notice, or did): the receiver adopts the sender's numbering (take_request).
constexpr std::uint32_t kRescueSlot = 8;
struct ReprotectMsg {
  std::uint8_t endpoint[net::kEndpointSize] = {};  // the writer's new standby QP
  std::uint32_t ok = 0;                            // answer: 1 = connected, 0 = cannot (port down ...);
                                                   // kPortDown: cannot, the device asked for is down;
                                                   // kPortBack: no answer, the receiver's port came back
  std::uint32_t gen = 0;                           // attempt number
  std::uint32_t dev = kSameDevice;                 // request: the receiver's device to build on (its NCCL index)
  std::uint32_t ctrl_rkey = 0;                     // the writer's ControlBlock on its device of the attempt
  std::uint32_t fifo_rkey = 0;                     // request: the sender's FIFO on its device of the attempt
  std::uint32_t own_dev = kSameDevice;             // the writer's device of the attempt (its NCCL index)
  std::uint64_t check = 0;                         // record_check of the bytes above
};
static_assert(sizeof(ReprotectMsg) == 104 && offsetof(ReprotectMsg, check) == 96);  // no padding

// The re-protection attempt whose new path the sender proved by writing this over it.
struct HelloMsg {
  std::uint64_t gen = 0;
  std::uint64_t check = 0;
};

// Registered on both devices, written remotely by the peer.
struct alignas(64) ControlBlock {
  std::uint64_t heartbeat = 0;  // the peer's heartbeat counter (the write's completion is the probe)
  std::uint64_t bye = 0;        // written by the peer's goodbye (CtlKind::bye); never read
  std::uint64_t pad[6] = {};
  HelloMsg hello;
  SyncMsg sync;
  ReprotectMsg reprotect;
  // Adaptive-routing mode (path_ops.cpp post_data): the size of a message sent as a plain write,
  // written by the size notice that follows it, by receive slot (seq % kMaxRequests) and buffer.
  // Read by the receiver when the notice's completion (kArImm) arrives, before the slot is reused.
  std::uint32_t ar_size[kMaxRequests][kMaxRecvs] = {};
};

// Checksum of a record's bytes before its `check` member (a word-wise multiply-xorshift chain:
// any byte at any position changes it). Pure; unit-tested.
std::uint64_t record_check(const void* data, std::size_t len) noexcept;
template <class T>
void seal(T& rec) noexcept {
  rec.check = record_check(&rec, offsetof(T, check));
}
// Copies the record `src` (written remotely, possibly still landing) into `out` and tells
// whether the copy is whole. The copy is read through volatile accesses so that it is a real
// load of the memory the NIC writes.
template <class T>
bool read_record(const T& src, T& out) noexcept {
  static_assert(sizeof(T) % 8 == 0 && alignof(T) >= 8);
  const volatile auto* in = reinterpret_cast<const volatile std::uint64_t*>(&src);
  auto* o = reinterpret_cast<std::uint64_t*>(&out);
  for (std::size_t i = 0; i < sizeof(T) / 8; ++i) o[i] = in[i];
  std::atomic_thread_fence(std::memory_order_acquire);
  return out.check == record_check(&out, offsetof(T, check));
}

// Immediate data of control writes: the top bit set (data writes leave it clear), the kind below.
constexpr std::uint32_t kCtlImm = 0x80000000u;
enum class CtlKind : std::uint32_t {
  sync = 1,       // ControlBlock::sync: a failover notice / the receiver's report (failover.cpp)
  reprotect = 2,  // ControlBlock::reprotect: a re-protection request or answer (reprotect.cpp)
  hello = 3,      // ControlBlock::hello: the sender proves a re-protection's new path
  bye = 4         // no record: the peer closed the connection in order (p2p.cpp say_goodbye)
};
constexpr int kCtlRecvs = 4;  // receive WRs every path keeps posted for control writes

constexpr int kImmIndexBits = 3;  // log2(kMaxRecvs)
static_assert((1 << kImmIndexBits) == kMaxRecvs);
// A data immediate whose write carried no data but the message's size (ControlBlock::ar_size): the
// message itself went before it as a plain RDMA write (adaptive-routing mode, NCCL_IB_ADAPTIVE_ROUTING).
constexpr std::uint32_t kArImm = 0x40000000u;
// Data immediates keep kCtlImm's bit clear: kArImm, 27 bits of the sequence, 3 of the buffer index.
constexpr std::uint32_t kImmSeqMask = (~(kCtlImm | kArImm)) >> kImmIndexBits;

// wr_id = kind in the top byte, a value below: every completion, even a flushed one (whose
// opcode is undefined), says what it was.
enum class WrKind : std::uint8_t {
  data = 1,       // isend's WRITE_WITH_IMM, or its size notice (value: the request's index in SendComm::reqs)
  recv = 2,       // a receive WR, for data or a control write (value: the receive's slot, or 0)
  cts = 3,        // a clear-to-send write into the sender's FIFO (value: the slot)
  sync = 4,       // our failover notice / report
  heartbeat = 5,  // a heartbeat write (standby health, idle-path probe)
  reprotect = 6,  // a re-protection request or answer
  hello = 7,      // a re-protection hello over the new path
  flush = 8,      // an iflush RDMA READ on a loopback QP (value: flush seq and attempt)
  bye = 9,        // the goodbye write of an orderly close (p2p.cpp say_goodbye)
  bulk = 10       // adaptive-routing mode: a message's plain write, before its size notice (value: as data)
};
constexpr std::uint64_t make_wr_id(WrKind k, std::uint64_t value) {
  return (static_cast<std::uint64_t>(k) << 56) | value;
}
constexpr WrKind wr_kind(std::uint64_t wr_id) { return static_cast<WrKind>(wr_id >> 56); }
constexpr std::uint64_t wr_value(std::uint64_t wr_id) { return wr_id & ((1ull << 56) - 1); }

}  // namespace nccl_ha::plugin
