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
// device, slot 1 on the standby device (HA_NCCL_STANDBY_MAP / standby_map.hpp). Slot s on one side
// is connected to slot s on the other. `active()` carries the traffic (ControlPlane::active, set
// by HA only: set_active_slot); the other is the standby.
// Every buffer is registered on both devices (reg.cpp), and FIFO entries carry the rkeys of
// both, so a failover never waits for a registration.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm_params.hpp"
#include "core/control_plane.hpp"
#include "core/limits.hpp"
#include "core/path.hpp"
#include "core/rdma_records.hpp"
#include "core/request.hpp"
#include "nccl_ha_profiler.h"
#include "nccl_net_abi.h"
#include "runtime/config.hpp"
#include "runtime/device.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/topology.hpp"

namespace nccl_ha::plugin {

enum class CommKind : std::uint8_t { send, recv };

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
  std::uint64_t flush_rebuilds[kSlots] = {};  // flush QPs replaced per device slot (ha/flush_paths.cpp)
  // flushes that read through the active slot because the device that wrote on this slot could
  // not be read through (its port down, or the slot moved to another device) (flush.cpp)
  std::uint64_t flush_redirects[kSlots] = {};
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
  const TestHooks* hooks = nullptr;  // the test builds' fault injection (test_hooks.hpp); none: off
};

// What the comm pointers NCCL holds point to: one connection's comm (CommBase), or a connection on
// a fused device, striped over several of them (datapath/fused.hpp). Handed to NCCL and taken
// back only as a CommHead (to_nccl / from_nccl), and told apart by `fused`.
struct CommHead {
  bool fused = false;
};
inline void* to_nccl(CommHead* c) noexcept { return c; }
inline CommHead& from_nccl(void* comm) noexcept { return *static_cast<CommHead*>(comm); }

struct CommBase : CommHead, std::enable_shared_from_this<CommBase> {
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
  Device* devs[kSlots] = {};             // slot 0: primary device; slot 1: standby (nullptr: single path)
  // The connection's own pair of ports (the primary at both ends, as NCCL chose them): where a
  // failback returns to, wherever the slots have moved since (rebind.hpp).
  Device* home = nullptr;
  int peer_home = -1;                    // the peer's device index (-1: not known)
  std::shared_ptr<Path> paths[kSlots];   // connected paths (paths[1] null: single path)
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
  CommStats stats;
  CommHooks hooks;  // the test builds' fault injection for this comm (test_hooks.hpp)
  // NCCL's profiler (profiler.hpp): the data of the last switch's events, and a note for the next
  // request posted (HA writes it, isend / irecv take it).
  ncclProfilerNetHaDescr_v1_t prof_descr{};
  std::atomic<std::uint64_t> prof_note{0};
  std::string id;  // "send comm 0x..." for log lines (a fused device's member: with `member`)
  // A fused device's member (datapath/fused.hpp): "rxe0+rxe1 2/2" - the device's ports, which of
  // its connections this is; "" for a connection of its own. Set by the handshake before the comm
  // is shared; in log lines, stats records ("member") and the fused comm's INFO line.
  std::string member;
  // A fused device's member: the next member's port (member i's is i + 1's, the last's the first's),
  // its standby's preferred port unless HA_NCCL_STANDBY_MAP names one: a member's traffic moves onto
  // the device's other ports first (topology.hpp rank_standby_pairs, "preferred"). Null otherwise.
  const Device* sibling = nullptr;
  CommParams params;  // NCCL's communicator id and traffic class (comm_params.hpp)
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
  int active() const noexcept { return cp.active(); }  // the slot carrying the traffic (HA sets it)
  Path& path() { return *paths[active()]; }
  // Whether `p` runs between the connection's own pair of ports.
  bool at_home(const Path& p) const { return p.dev == home && p.peer_dev == peer_home; }
  Device& device() { return *devs[active()]; }
  int standby_slot() const { return 1 - active(); }
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

// The queue depths of a comm's path on `d`: a send comm's send queue holds two WRs per isend in
// adaptive-routing mode (the write, its size notice: path_ops.cpp post_data).
struct QueueDepths {
  int send = 0;
  int recv = 0;
};
constexpr QueueDepths queue_depths(CommKind kind, const Device& d) {
  if (kind == CommKind::recv) return {kRecvSendQueueDepth, kRecvQueueDepth};
  const int ar = d.ar_threshold == kNoAdaptiveRouting ? 0 : kMaxRequests * kMaxRecvs;
  return {kSendQueueDepth + ar, kSendRecvQueueDepth};
}

// Creates the comm on `primary` (and its standby resources on `standby`, may be null): CQs, QPs
// (RESET), and the comm's own registered memory on both devices. Local work only.
// The comm's own reference is in `self` (NCCL's, dropped at close).
// The control plane's record of it (its standby's state, its ports' counts) begins with
// comm_built (control_ops.hpp), which the builder calls next; attach_standby likewise.
Expected<std::shared_ptr<SendComm>> make_send_comm(const CommEnv& env, Device& primary, Device* standby);
Expected<std::shared_ptr<RecvComm>> make_recv_comm(const CommEnv& env, Device& primary, Device* standby);
// A comm made without a standby device gets its standby resources on `standby` (slot 1): the QP
// (RESET) and the comm's registrations there. All or nothing: on failure the comm stays single path. Local
// work, before the comm is handed to NCCL (the connector learns its standby from the reply).
Status attach_standby(CommBase& c, Device& standby);

// The comm's own memory (control blocks, FIFO or outbox, the flush sink of a receive comm with
// flush QPs) registered on `d` as slot `slot`'s; the peer's keys are left as they are. Verbs work.
Status register_slot_keys(CommBase& c, Device& d, int slot, SlotKeys& out);

std::uint64_t now_ns() noexcept;

}  // namespace nccl_ha::plugin
