// Send and receive communicators, their paths and their requests.
//
// Data path (receiver-driven clear-to-send, like NCCL's IB transport):
//   irecv  - the receiver posts one receive WR per buffer (consumed by WRITE_WITH_IMM) and
//            RDMA-writes a FifoEntry (address, rkeys, size, tag of each buffer) into slot
//            seq % kMaxRequests of the sender's FIFO.
//   isend  - the sender reads its FIFO slot (seq last, so a complete entry is visible), matches
//            the tag, and RDMA-writes the data with immediate data = (seq << 3 | index).
//   test   - polls the active path's CQ (at most HA_NCCL_MAX_POLL entries); the receiver
//            learns each message's size from the completion's byte_len.
// Every message is identified by (seq, index): the receiver knows exactly which it has, which
// is what makes replay after a failover exactly-once (failover.cpp).
//
// Control plane (control.cpp): everything of HA besides moving data - standby heartbeats, the
// idle-path probe, fault detection, the failover and re-protection conversations - runs on the
// reactor's progress thread, woken by completion-channel events (one channel per device) and by
// the comm's timer, whether or not NCCL calls the plugin. The data path and the progress thread
// hand the comm to each other through CommBase::owned, a try-lock: whoever holds it works on
// the comm, the other one does not wait (the data path answers "not yet", the progress thread
// looks again later). Control messages that need the peer to act are RDMA writes with
// immediate data (kCtlImm) into the peer's ControlBlock, so that they raise a completion (and
// a completion-channel event) there; each record carries a checksum and is read only after
// its completion, never by polling memory alone.
//
// Paths: a comm has up to two RC connections, one per device slot: slot 0 on the primary
// device, slot 1 on the backup device (HA_NCCL_BACKUP_MAP / backup.hpp). Slot s on one side
// is connected to slot s on the other. `active` carries the traffic; the other is the standby.
// Every buffer is registered on both devices (reg.cpp), and FIFO entries carry the rkeys of
// both, so a failover never waits for a registration.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config.hpp"
#include "core.hpp"
#include "device.hpp"
#include "flush_plan.hpp"
#include "liveness.hpp"
#include "rescue.hpp"
#include "topology.hpp"
#include "nccl_ha/net/qp.hpp"
#include "nccl_ha/net/wire.hpp"

namespace nccl_ha::plugin {

constexpr int kSlots = 2;  // primary + backup device
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
// only to have it refused again (scale bench: 725 wasted attempts for 512 comms in a 5 s outage).
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
static_assert(sizeof(ReprotectMsg) == 64);

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

// wr_id = kind in the top byte, a value below: every completion, even a flushed one (whose
// opcode is undefined), says what it was.
enum class WrKind : std::uint8_t {
  data = 1,       // isend's WRITE_WITH_IMM (value: the request's index in SendComm::reqs)
  recv = 2,       // a receive WR, for data or a control write (value: the receive's slot, or 0)
  cts = 3,        // a clear-to-send write into the sender's FIFO (value: the slot)
  sync = 4,       // our failover notice / report
  heartbeat = 5,  // a heartbeat write (standby health, idle-path probe)
  reprotect = 6,  // a re-protection request or answer
  hello = 7,      // a re-protection hello over the new path
  flush = 8,      // an iflush RDMA READ on a loopback QP (value: flush seq and attempt)
  bye = 9         // the goodbye write of an orderly close (p2p.cpp say_goodbye)
};
constexpr std::uint64_t make_wr_id(WrKind k, std::uint64_t value) {
  return (static_cast<std::uint64_t>(k) << 56) | value;
}
constexpr WrKind wr_kind(std::uint64_t wr_id) { return static_cast<WrKind>(wr_id >> 56); }
constexpr std::uint64_t wr_value(std::uint64_t wr_id) { return wr_id & ((1ull << 56) - 1); }

// What regMr hands to NCCL: the buffer's registration on every device slot of the comm.
// Written under CommBase::reg_mutex (regMr, deregMr, a slot moving to another device: rebind.hpp);
// the data path reads mr[] / lkey / rkey while it holds the comm, which a move's installation
// also holds, so it never sees one half done.
struct RegHandle {
  MrHandle* mr[kSlots] = {};
  Device* dev[kSlots] = {};
  // A slot moving to another device: the buffer's registration there, prepared off the progress
  // thread and swapped into mr[slot] when the move is installed (rebind.cpp).
  MrHandle* next_mr = nullptr;
  Device* next_dev = nullptr;
  void* data = nullptr;  // what NCCL registered: registered again on a device the comm moves to
  std::size_t size = 0;
  bool gpu = false;  // registered as NCCL_PTR_CUDA: iflush reads it back (flush.cpp)
  // regMrDmaBuf: the handle's own duplicate of NCCL's dma-buf fd (NCCL closes its fd when the call
  // returns; a device the comm moves to registers from this one), closed at deregMr; and the
  // offset of `data` in the dma-buf. No fd: ordinary memory.
  UniqueFd dmabuf_fd;
  int dmabuf_fd_given = -1;  // NCCL's fd number, for messages only (closed by NCCL)
  std::uint64_t dmabuf_offset = 0;
  std::uint32_t lkey(int slot) const { return mr[slot] ? mr[slot]->mr->lkey : 0; }
  std::uint32_t rkey(int slot) const { return mr[slot] ? mr[slot]->mr->rkey : 0; }
};

// The comm's own memory registered on the device of one slot, and the peer's keys for its memory
// on the device at the other end of that slot's path: everything a slot's path needs besides its
// QP. Replaced whole when the slot moves to another device (rebind.hpp).
struct SlotKeys {
  net::MrPtr ctrl;        // our ControlBlock: the peer writes it
  net::MrPtr ctrl_out;    // source of our control writes
  net::MrPtr ring;        // send comm: its FIFO (the peer writes it); receive comm: its outbox (source of CTS writes)
  net::MrPtr flush_sink;  // receive comms with flush QPs: where the slot's READs land (flush.cpp)
  std::uint32_t peer_ctrl = 0;  // rkey of the peer's ControlBlock on its device of this slot
  std::uint32_t peer_fifo = 0;  // receive comm: rkey of the sender's FIFO on its device of this slot
};

enum class ReqType : std::uint8_t {
  free,   // slot unused: never used, or finished (test() reported it done, or its flush failed)
  send,   // an isend until test() reports it done (a failover replays it unless delivered)
  recv,   // an irecv group until test() reports it done (receive WRs and clear-to-send posted)
  flush   // an iflush READ until test() reports it done; also RecvComm::flushed (done at once)
};

struct CommBase;

struct Request {
  ReqType type = ReqType::free;
  std::uint8_t nreqs = 0;      // recv: buffers in the group
  std::uint8_t completed = 0;  // completions seen so far
  std::uint8_t done_mask = 0;  // recv: which buffers completed; send: bit 0 once delivered
  std::uint8_t index = 0;      // send: buffer index inside the receiver's group
  bool buffers_gone = false;   // a buffer was deregistered while in flight (NCCL's abort path): never posted again
  std::uint64_t seq = 0;
  int sizes[kMaxRecvs] = {};   // what test() reports
  // send: what replaying it takes (failover.cpp)
  std::uint64_t laddr = 0;
  std::uint64_t raddr = 0;
  std::uint32_t lkey[kSlots] = {};
  std::uint32_t rkey[kSlots] = {};
  // The registration of each buffer (send: [0]; receive: [0, nreqs); flush: [0]): keys are taken
  // afresh from it when the request is posted again after its slot moved (rebind.hpp).
  const RegHandle* mh[kMaxRecvs] = {};
  CommBase* comm = nullptr;
  // flush: the device slots to read through and how far each is (flush_plan.hpp), and, while one
  // waits for its loopback QP to be rebuilt, when the flush gives up (0: not waiting).
  FlushState flush;
  std::uint64_t wait_until_ns = 0;
};

enum class CommKind : std::uint8_t { send, recv };

// One RC connection of a comm on one device. Shared with the reactor while the standby is
// being connected in the background: the reactor owns everything until it publishes `link`.
struct CommBase;
struct Path {
  enum Link : int {
    connecting,  // not connected yet (the handshake's phase two, a re-protection job's path): only
                 // the code connecting it touches it
    up,          // connected: may carry traffic, heartbeats and control writes
    failed       // setup failed (`why`), or the QP went to ERROR (a failed heartbeat or flush
                 // read): dead until re-protection or tend_flush replaces the path
  };

  Device* dev = nullptr;
  int slot = 0;
  // The comm, for the device's completion channel: the CQ's cq_context points here. Declared
  // before `cq` so that it outlives the CQ (ibv_destroy_cq waits for a taken event's ack).
  std::weak_ptr<CommBase> owner;
  net::CqPtr cq;
  net::QpPtr qp;
  net::Endpoint local{};
  net::Endpoint remote{};
  std::atomic<int> link{connecting};  // reactor -> proxy thread (release / acquire)
  std::string why;                    // set before link = failed

  // Whoever holds the comm (CommBase::owned), once the path carries traffic or heartbeats.
  std::uint32_t sends_out = 0;          // send WRs posted and not yet reaped (all are signalled)
  std::uint32_t recvs_out = 0;          // receive WRs posted and not yet reaped
  std::uint64_t completions = 0;        // reaped so far (the control plane compares it per tick)
  std::uint64_t seen_completions = 0;   // control plane: `completions` at its last look
  std::uint64_t last_progress_ns = 0;   // soft RTO base: last completion or empty send queue (0: unset)
  std::uint64_t last_completion_ns = 0; // idle probe base
  // The soft RTO's allowance for large writes: the largest data write outstanding, at a tenth of
  // the port's rate (reset when the send queue empties). A healthy path finishes its oldest
  // write well within that; a 64 MiB write is no black hole because it takes a while.
  std::uint64_t rto_allowance_ns = 0;
  // Receive WRs posted beyond what the receives outstanding need: a path left by a failback keeps
  // the WRs of the buffers that were then missing (it stays connected, as the standby); when it
  // carries traffic again, they stand for the next receives instead of new posts (failover.cpp).
  std::uint32_t spare_recvs = 0;
  std::uint32_t fault_gen = 0;          // dev->fault_gen when the path came up
  Qos qos;                              // the comm's, set before the QP is connected
  int peer_dev = -1;                    // the peer's NCCL device index at the other end (-1: not known)
  // The pair of ports it runs on (liveness.hpp), once connected and with HA on: set by the control
  // plane (join_pair), read by whoever reaps a heartbeat's completion (PairLiveness::acked).
  std::shared_ptr<PairLiveness> pair;
  std::uint64_t pair_heartbeat = 0;     // the pair's heartbeat outstanding on it (its number; 0: none)
};

// The RC attributes `p`'s QP is connected with: its port's timeouts, the comm's QoS.
net::QpTimeouts rc_attrs(const Path& p);

// Path::rto_allowance_ns of one write of `bytes` on a port of `speed_mbps` (unknown: 2500, SDR 1x):
// bytes / (speed / 8 / 10) = bytes * 80000 / speed_mbps nanoseconds.
constexpr std::uint64_t write_allowance_ns(std::uint64_t bytes, int speed_mbps) {
  return bytes * 80000u / static_cast<std::uint64_t>(speed_mbps > 0 ? speed_mbps : 2500);
}

// Standby health (heartbeats on the standby path).
struct StandbyHealth {
  enum State : std::uint8_t {
    connecting,  // being connected: the handshake's phase two, or a re-protection attempt
    up,          // connected and answering heartbeats: a failover may use it
    down,        // known unusable (setup failed, heartbeats missed or failed, a port event, left
                 // by a failover, a failed re-protection) until re-protected or answering again
    none         // single path: the comm has no standby slot
  };
  State state = none;
  std::string why;
  std::uint64_t failures = 0;        // lost: a failed heartbeat, or its pair silent
  std::uint64_t up_since_ns = 0;     // failback hysteresis
  bool lost = false;                 // loss of protection said at WARN; its return will be too
  std::uint64_t lost_ns = 0;         // when it was lost (CLOCK_MONOTONIC ns)
  // Down only because its pair's heartbeats went unanswered (its path connected, its port up: maybe
  // just a congested link): a failover still tries it, bounded by HA_NCCL_FAILOVER_TIMEOUT_MS.
  bool silent = false;
};

// Building a new standby after a failover (reprotect.cpp).
struct PathJob;  // path_job.hpp: verbs work on the reactor's worker threads
struct ReprotectState {
  enum Step : std::uint8_t {
    idle,        // no attempt under way (send side: waits for next_try_ns; receive side: for a request)
    building,    // a PathJob builds the new QP (and registrations, a flush QP) on a worker; the
                 // receive side's job also connects it to the sender's endpoint
    requested,   // send side: the ReprotectMsg request is written; waiting for the answer
    connecting,  // send side: a PathJob connects our QP to the receiver's endpoint
    hello        // send side: the HelloMsg is written over the new path, waiting for its completion;
                 // receive side: answered, waiting for that HelloMsg. Then install()
  };
  Step step = idle;
  std::uint32_t gen = 0;             // send side: attempts made; receive side: last request answered
  std::uint64_t next_try_ns = 0;
  std::uint64_t backoff_ns = 0;
  std::uint64_t deadline_ns = 0;
  std::uint64_t requested_ns = 0;    // send side: when the attempt's request was first written
  std::uint32_t reminders = 0;       // send side: the request written again (an answer overdue)
  std::uint32_t refused_gen = 0;     // receive side: the last request refused (a reminder is refused again); gen - 1 from a new request until it is
  std::uint32_t refused_ok = 0;      // receive side: how (0, or kPortDown)
  // Send side: the peer's devices it said are down (kPortDown), left out of the attempts (their
  // kCandUp cleared in peer_cands) until its kPortBack note, or until peer_down_until_ns.
  std::vector<int> peer_down;
  std::uint64_t peer_down_until_ns = 0;
  std::uint64_t attempts = 0;
  std::uint64_t done = 0;            // standbys re-established
  std::uint64_t dropped = 0;         // receive side: requests not acted on (an older attempt's; a rescue's not by rescue mail)
  std::shared_ptr<PathJob> job;      // the path being built / connected
  // The attempt's ports: ours (a device index) and the peer's (-1: its slot's device as it is).
  int dev = -1;
  int peer_dev = -1;
  std::uint64_t rebind = 0;          // the attempt's move of the slot to another device (rebind.hpp); 0: none
  // Send side: its place among the process's attempts in flight (State::attempts, attempt_gate.hpp),
  // or its place in the line for one.
  bool admitted = false;
  bool queued = false;
  std::uint64_t deferred_ns = 0;     // since when it waits for the process's failovers to end (0: not)
  std::uint32_t peer_ctrl = 0;       // the peer's keys on its device of the attempt
  std::uint32_t peer_fifo = 0;       // (receive side: the sender's FIFO)
  std::string port;                  // "rxe1:1": the attempt's port here (log lines)
  // The attempt moves a standby that is up to the connection's own pair (kMove): the standby it
  // replaces serves until the install, the standby's state is left alone, and a failure ends the
  // move only. Send side: the next move is tried no sooner than next_move_ns.
  bool move = false;
  std::uint64_t next_move_ns = 0;
};

struct FailoverState {
  enum Phase : std::uint8_t {
    normal,     // no switch under way: the data path may post (can_post)
    quiescing,  // a failback only (the sender's), or a sender re-synchronising in place: no new
                // sends, the old path's own complete
    draining,   // the old path's WRs are reaped (its QP in ERROR, unless a failback keeps it);
                // then the switch to the new path and our SyncMsg notice on it
    syncing     // our notice is written: waiting for the peer's SyncMsg of this epoch, then
                // replay (sender) and finish()
  };
  Phase phase = normal;
  std::uint32_t epoch = 0;            // failovers started; both sides count the same
  std::uint32_t prev_epoch = 0;       // before this one (a failback abandoned before its notice)
  int from = 0;                       // slot that failed
  std::uint64_t started_ns = 0;
  std::uint64_t deadline_ns = 0;      // drain deadline, then the peer's confirmation deadline
  std::string cause;
  bool planned = false;               // a failback: the path it leaves is healthy
  // A failback leaves its old path connected (no ERROR; it becomes the standby): until the switch
  // is done it is where the comm returns if the failback's target fails during it.
  bool keep_from = false;
  // The peer moved onto the path we are on (its failback failed before we followed it): no
  // switch, the same path is re-synchronised.
  bool in_place = false;
  std::uint64_t stall_until_ns = 0;   // HA_NCCL_TEST_FAILBACK_STALL_AT
  std::uint64_t drain_seen = 0;       // quiescing: the old path's completions at the last look
  // Syncing: the new path is shown to work (our notice's write completed, or the peer's notice
  // came over it). From then on only a fault of that path ends the wait, no deadline.
  bool proven = false;
  std::uint64_t next_probe_ns = 0;    // syncing, proven: next heartbeat on the new path
  // Raised by the data path (an error completion, a failed post) for the control plane.
  std::string requested;
  bool awaiting_standby = false;      // `requested` waits for a standby still being connected
  std::deque<std::uint64_t> recent;   // start times of the failovers in the HA_NCCL_RETRY_WINDOW_MS
};

// Control messages the peer wrote (kCtlImm completions seen): posted by whoever reaps the
// completion (the data path's poll or the control plane's), cleared by the part of the control
// plane that reads the record (failover.cpp: sync; reprotect.cpp: reprotect, hello).
// A record can also come as mail: the rescue service's proven TCP request or the outcome of our own
// exchange, copied into the record (rescue.cpp); by_mail tells the two apart (a rescue's request is
// acted on only as mail).
class Inbox {
 public:
  void post(CtlKind kind, const Path* via) noexcept {
    if (kind == CtlKind::sync) sync_path_ = via;
    flags_ |= bit(kind);
    mail_ &= static_cast<std::uint8_t>(~bit(kind));
  }
  void post_mail(CtlKind kind) noexcept {
    flags_ |= bit(kind);
    mail_ |= bit(kind);
  }
  bool has(CtlKind kind) const noexcept { return (flags_ & bit(kind)) != 0; }
  bool by_mail(CtlKind kind) const noexcept { return (mail_ & bit(kind)) != 0; }
  void clear(CtlKind kind) noexcept {
    flags_ &= static_cast<std::uint8_t>(~bit(kind));
    mail_ &= static_cast<std::uint8_t>(~bit(kind));
  }
  const Path* sync_path() const noexcept { return sync_path_; }  // the last notice's path (identity only)

 private:
  static constexpr std::uint8_t bit(CtlKind k) noexcept { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(k)); }
  std::uint8_t flags_ = 0;
  std::uint8_t mail_ = 0;
  const Path* sync_path_ = nullptr;
};

struct CommStats {
  // switches of the active path, and the stall the last one cost
  std::uint64_t failovers = 0;
  std::uint64_t failbacks = 0;
  double last_stall_ms = 0;
  // what the switches replayed, and the copies the receiver dropped
  std::uint64_t replayed = 0;
  std::uint64_t duplicates_dropped = 0;
  // traffic
  std::uint64_t messages = 0;
  std::uint64_t bytes_sent = 0;      // completed sends (a replayed message counts once)
  std::uint64_t bytes_received = 0;  // completed receives
  std::uint64_t heartbeats_sent = 0; // heartbeat writes posted on the comm's paths (by their pairs: liveness.hpp)
  std::uint64_t flush_reads[kSlots] = {};  // completed flush RDMA READs per device slot (flush.cpp)
  std::uint64_t flush_rebuilds[kSlots] = {};  // flush QPs replaced per device slot (flush.cpp)
  // flushes that read through the active slot because the device that wrote on this slot could
  // not be read through (its port down, or the slot moved to another device) (flush.cpp)
  std::uint64_t flush_redirects[kSlots] = {};
};

// Where a comm's standbys go (standby.cpp).
struct StandbyPorts {
  Device* counted_active = nullptr;   // the ports account_ports counted this comm on
  Device* counted_standby = nullptr;
  std::vector<std::pair<int, int>> failed_pairs;  // (our device, the peer's) failed since the last reset
  std::vector<std::uint32_t> seen_recover;        // every device's recover_gen at the last look
};

// A send comm's place among the process's re-protection attempts (attempt_gate.hpp).
struct AttemptTicket {
  bool admitted = false;  // it may run its attempt (until it leaves)
  bool queued = false;    // it waits in line for that
};

// A receive comm's rebuilds of its flush QPs (flush.cpp); flush_paths, which iflush reads, stay
// in RecvComm.
struct FlushRebuild {
  std::shared_ptr<Path> next[kSlots];     // built, installed once no read is outstanding on the old one
  std::shared_ptr<PathJob> job[kSlots];   // a rebuild of its own (a failed or stale QP)
  std::uint32_t gen[kSlots] = {};         // the device's recover_gen the slot's QP was built for
  bool want[kSlots] = {};                 // a new QP is wanted (the old one failed, or is stale)
  std::uint64_t retry_ns[kSlots] = {};    // after a failed rebuild: next attempt
  std::uint64_t backoff_ns[kSlots] = {};
  // HA_NCCL_TEST_FLUSH_QP_ERROR_MS: when (now_ns) the active slot's loopback QP is moved to
  // ERROR, and how many of them were done.
  std::vector<std::uint64_t> test_error_ns;
  std::size_t test_errors_done = 0;
};

// A slot of the comm moving to another device (rebind.hpp): announced by the progress thread,
// read by regMr and the move's preparation; under CommBase::reg_mutex.
struct RebindState {
  Device* dev = nullptr;   // a move of a slot to this device is being prepared
  std::uint64_t gen = 0;   // moves begun or given up so far
};

// The comm's control plane (CommBase::cp): the state machines of failover, standby health,
// re-protection, rescue, the flush QPs' rebuilds and a slot's move, and where its standbys go.
// Run by the progress thread (control_step and what it calls) while it holds the comm (`owned`).
//
// The data path, under `owned` too, has three calls and nothing else: may it post (may_post),
// hand a fault over (hand_over), and what its polls reaped (reaped_control, reaped_notice_write).
// Everyone may read every state machine; each has one writer, named below as a friend: the type
// defined in the one file named beside it, and named nowhere else (unit.plugin_writers checks it:
// a second definition elsewhere is an ODR violation no linker reports).
class ControlPlane {
 public:
  // ---- the data path
  bool may_post() const noexcept { return fo_.phase == FailoverState::normal && fo_.requested.empty(); }
  // A fault of the active path, for the control step to fail over (false: one is already asked
  // for or under way). The caller wakes the control task.
  bool hand_over(std::string cause) {
    if (!may_post()) return false;
    fo_.requested = std::move(cause);
    return true;
  }
  // A control write of the peer came in over `p` (its receive's completion). False: an unknown
  // kind. True for the peer's goodbye the first time (CtlKind::bye: `peer_closed` from now on).
  bool reaped_control(CtlKind kind, const Path& p) noexcept {
    switch (kind) {
      case CtlKind::sync:
      case CtlKind::reprotect:
      case CtlKind::hello:
        inbox_.post(kind, &p);
        return true;
      case CtlKind::bye:
        peer_closed_ = true;
        return true;
    }
    return false;
  }
  // Our failover notice's write completed on `p`: the new path is proven if it is the active one.
  void reaped_notice_write(bool on_active) noexcept {
    if (fo_.phase == FailoverState::syncing && on_active) fo_.proven = true;
  }

  // ---- the state machines (read by all)
  const FailoverState& fo() const noexcept { return fo_; }
  const StandbyHealth& standby() const noexcept { return standby_; }
  const ReprotectState& rp() const noexcept { return rp_; }
  const RescueState& rescue() const noexcept { return rescue_; }
  const AttemptTicket& ticket() const noexcept { return ticket_; }
  const FlushRebuild& flush() const noexcept { return flush_; }
  const RebindState& rebind() const noexcept { return rebind_; }
  const StandbyPorts& ports() const noexcept { return ports_; }
  const Inbox& inbox() const noexcept { return inbox_; }
  const SyncMsg& peer_sync() const noexcept { return peer_sync_; }  // the peer's last whole SyncMsg
  // The peer closed the connection in order (its CtlKind::bye came): what follows from it (its
  // QPs gone, heartbeats unanswered) is no fault. The control plane stops watching the comm.
  bool peer_closed() const noexcept { return peer_closed_; }

 private:
  friend struct FailoverWriter;   // failover.cpp: fo_, peer_sync_, the sync notice of inbox_
  friend struct StandbyWriter;    // standby_health.cpp: standby_
  friend struct ReprotectWriter;  // reprotect.cpp: rp_, the reprotect and hello messages of inbox_
  friend struct RescueWriter;     // rescue.cpp: rescue_ (its TCP mail into inbox_)
  friend struct GateWriter;       // attempt_gate.cpp: ticket_
  friend struct FlushWriter;      // flush.cpp: flush_
  friend struct RebindWriter;     // rebind.cpp: rebind_
  friend struct PortsWriter;      // standby.cpp: ports_
  friend struct DetectWriter;     // progress.cpp: rto_noted_

  FailoverState fo_;
  StandbyHealth standby_;
  ReprotectState rp_;
  RescueState rescue_;  // re-protection over TCP when no path is left (rescue.hpp)
  AttemptTicket ticket_;
  FlushRebuild flush_;
  RebindState rebind_;
  Inbox inbox_;
  SyncMsg peer_sync_;
  bool peer_closed_ = false;
  bool rto_noted_ = false;  // the soft RTO expired with no standby: said once
  StandbyPorts ports_;
};

// Everything one connection owns. Declaration order = reverse destruction order.
struct ControlTask;  // control.cpp: the comm's timer on the reactor
class Reaper;

// What a comm is built from besides its devices (make_send_comm, make_recv_comm): the settings
// and the reaper its paths go to. Passed in, not read from the process-wide state, so that a comm
// can be built without it (unit tests). No config: the CommBase defaults; no reaper: its paths
// are ordinary ones, destroyed wherever their last reference goes.
struct CommEnv {
  const Config* config = nullptr;
  Reaper* reaper = nullptr;
};

struct CommBase : std::enable_shared_from_this<CommBase> {
  CommKind kind;
  Reaper* reaper = nullptr;  // where every path of the comm goes when dropped (CommEnv), or none
  // The hand-off between NCCL's thread and the progress thread: held (true) by whoever works on
  // the comm. Both only ever try to take it.
  std::atomic<bool> owned{false};
  std::atomic<bool> closing{false};      // set by close (under `owned`): the control task ends
  std::uint64_t polls = 0;               // data path: CQ polls so far (the control plane reads it)
  std::uint64_t seen_polls = 0;          // control plane: `polls` at its last look
  std::shared_ptr<CommBase> self;        // NCCL's reference, dropped by closeSend / closeRecv
  std::shared_ptr<ControlTask> task;     // its timer; null until the comm is handed to NCCL
  Device* devs[kSlots] = {};             // slot 0: primary device; slot 1: backup (nullptr: single path)
  // The connection's own pair of ports (the primary at both ends, as NCCL chose them): where a
  // failback returns to, wherever the slots have moved since (rebind.hpp).
  Device* home = nullptr;
  int peer_home = -1;                    // the peer's device index (-1: not known)
  std::shared_ptr<Path> paths[kSlots];   // connected paths (paths[1] null: single path)
  int active = 0;                        // slot carrying the traffic
  ncclResult_t error = ncclSuccess;      // sticky: once set, every call returns it

  ControlBlock ctrl;                     // written by the peer
  ControlBlock ctrl_out;                 // source of our control writes
  SlotKeys keys[kSlots];                 // registrations and the peer's keys, per device slot
  std::uint64_t peer_ctrl = 0;           // the peer's ControlBlock (its address; rkeys in keys[])

  // Settings copied at creation (the data path reads no global).
  int max_poll = 16;
  std::uint64_t rto_ns = 0;
  std::uint64_t heartbeat_ns = 0;
  std::uint64_t failover_timeout_ns = 0;
  std::uint64_t rescue_timeout_ns = 10'000'000'000;  // HA_NCCL_RESCUE_TIMEOUT_MS (rescue.hpp)
  std::uint32_t max_retries = 0;
  std::uint64_t retry_window_ns = 0;
  bool watch_pairs = false;  // HA on: its paths join their pairs' heartbeats (liveness.hpp)

  ControlPlane cp;                   // failover, standby health, re-protection, rescue, flush rebuilds, moves (above)
  bool failback = false;             // HA_NCCL_ENABLE_FAILBACK
  std::uint64_t failback_hold_ns = 0;
  std::uint64_t test_failback_stall_ns = 0;  // HA_NCCL_TEST_FAILBACK_STALL_MS (test_hooks.hpp)
  std::uint8_t test_failback_stall_at = 0;   // TestHooks::FailbackStall
  CommStats stats;
  std::string id;  // "send comm 0x..." for log lines
  CommParams params;  // NCCL's communicator id and traffic class (core.hpp)
  Qos qos;            // traffic class and service level of all its paths (config.hpp resolve_qos)
  // The peer's ports as its handshake listed them (topology.hpp): with our own, where later
  // standbys can go (standby.cpp). The sender's list is side A of every ranking, the receiver's B.
  std::vector<Candidate> peer_cands;
  std::string peer;   // the peer's handshake address (set by the handshake)

  // The buffers NCCL registered on this comm (regMr .. deregMr), so that a slot moving to another
  // device registers them there too (rebind.hpp). regMr / deregMr (NCCL's thread), a move's
  // preparation (a worker) and its commit (progress thread) take `reg_mutex`; the data path never.
  std::mutex reg_mutex;
  std::vector<RegHandle*> regs;


  explicit CommBase(CommKind k) : kind(k) {}
  Path& path() { return *paths[active]; }
  // Whether `p` runs between the connection's own pair of ports.
  bool at_home(const Path& p) const { return p.dev == home && p.peer_dev == peer_home; }
  Device& device() { return *devs[active]; }
  int standby_slot() const { return 1 - active; }
};

struct SendComm : CommBase {
  SendComm() : CommBase(CommKind::send) {}
  alignas(64) FifoEntry fifo[kMaxRequests] = {};  // written remotely by the receiver (keys[s].ring)
  std::uint64_t seq = 0;           // FIFO slot being consumed
  FifoEntry cur{};                 // whole copy of fifo[seq % kMaxRequests] once it checked
  std::uint64_t cur_seq = ~0ull;   // the seq `cur` is for
  std::uint8_t matched = 0;        // buffers of the current slot already sent (bit mask)
  std::array<Request, kMaxRequests * kMaxRecvs> reqs{};
  std::array<std::uint16_t, kMaxRequests * kMaxRecvs> free_list{};
  int nfree = 0;
};

struct RecvComm : CommBase {
  RecvComm() : CommBase(CommKind::recv) {}
  alignas(64) FifoEntry outbox[kMaxRequests] = {};  // source of the FIFO writes (keys[s].ring)
  std::uint64_t remote_fifo = 0;                     // the sender's FIFO (its address; rkeys in keys[])
  std::uint64_t seq = 0;  // next irecv
  std::array<Request, kMaxRequests> reqs{};
  Request flushed = [] { Request r; r.type = ReqType::flush; return r; }();  // returned by iflush when nothing is to be read back: complete
  // RDMA READ flushes (flush.cpp), with HA_NCCL_FORCE_FLUSH or GPU peer memory: a loopback QP per
  // device slot, the 8 bytes each READ lands in, and a ring of flush requests. The loopback QPs
  // are rebuilt by the control plane (with re-protection, or when one failed or its port came
  // back); iflush / test only ever read flush_paths.
  bool force_flush = false;  // HA_NCCL_FORCE_FLUSH: host buffers are read back too
  bool flush_on = false;     // the comm has loopback QPs
  std::shared_ptr<Path> flush_paths[kSlots];   // in use (replaced by the control plane, under `owned`)
  alignas(8) std::uint64_t flush_sink[kSlots] = {};  // registered as keys[s].flush_sink
  std::array<Request, kMaxRequests> flushes{};
  std::uint64_t flush_seq = 0;
  // Since the last flush was posted: the slots that delivered data (bit per slot), and the device
  // (Device::index) that wrote each one's, which the next flush reads through (p2p.cpp
  // complete_recv, when flush_on; iflush takes and clears them).
  std::uint8_t flush_wrote = 0;
  std::uint8_t flush_last = 0;  // the marks the last flush took (iflush: a flush with none new reads those)
  std::int16_t flush_writer[kSlots] = {kAnyDevice, kAnyDevice};
  // Slots a flush waits on for a new loopback QP: tend_flush rebuilds them even where it would
  // leave it to re-protection (cleared when one is installed).
  std::uint8_t flush_waiting = 0;
};

constexpr int kControlWrs = 8;                                        // sync + heartbeats in flight
constexpr int kSendQueueDepth = kMaxRequests * kMaxRecvs + kControlWrs;  // one WRITE_WITH_IMM per isend
constexpr int kRecvSendQueueDepth = 2 * kMaxRequests + kControlWrs;      // CTS writes (+ re-published)
constexpr int kSendRecvQueueDepth = 2 * kCtlRecvs;                    // control writes from the receiver
constexpr int kRecvQueueDepth = kMaxRequests * kMaxRecvs + 2 * kCtlRecvs;  // one receive WR per buffer

// Creates the comm on `primary` (and its standby resources on `backup`, may be null): CQs, QPs
// (RESET), and the comm's own registered memory on both devices. Local work only.
// The comm's own reference is in `self` (NCCL's, dropped at close).
Expected<std::shared_ptr<SendComm>> make_send_comm(const CommEnv& env, Device& primary, Device* backup);
Expected<std::shared_ptr<RecvComm>> make_recv_comm(const CommEnv& env, Device& primary, Device* backup);
// A comm made without a backup gets its standby resources on `backup` (slot 1): the QP (RESET) and
// the comm's registrations there. All or nothing: on failure the comm stays single path. Local
// work, before the comm is handed to NCCL (the connector learns its backup from the reply).
Status attach_standby(CommBase& c, Device& backup);

// The comm's own memory (control blocks, FIFO or outbox, the flush sink of a receive comm with
// flush QPs) registered on `d` as slot `slot`'s; the peer's keys are left as they are. Verbs work.
Status register_slot_keys(CommBase& c, Device& d, int slot, SlotKeys& out);

// A path on `dev`: CQ + RC QP in RESET, its local endpoint chosen. With an `owner`, the CQ
// reports to the device's completion channel (wakes the owner's control plane). Dropped, it goes to
// `reaper` (null: an ordinary object).
Expected<std::shared_ptr<Path>> make_path(Reaper* reaper, Device& dev, int slot, int send_depth, int recv_depth,
                                          std::weak_ptr<CommBase> owner = {});

std::uint64_t now_ns() noexcept;

}  // namespace nccl_ha::plugin
