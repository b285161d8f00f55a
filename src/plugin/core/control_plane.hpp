// A comm's control plane state (CommBase::cp, the class ControlPlane): the state machines of
// failover, standby health, re-protection, rescue, the flush QPs' rebuilds and a slot's move, the
// peer's control messages waiting to be read (Inbox), and where its standbys go. Each state
// machine has one writer (the friends of ControlPlane); the operations that run them are declared
// in control_ops.hpp.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/path.hpp"
#include "core/rdma_records.hpp"
#include "core/rescue_state.hpp"

namespace nccl_ha::plugin {

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

// A receive comm's rebuilds of its flush QPs (ha/flush_paths.cpp); flush_paths, which iflush reads, stay
// in RecvComm.
struct FlushRebuild {
  std::shared_ptr<Path> next[kSlots];     // built, installed once no read is outstanding on the old one
  std::shared_ptr<PathJob> job[kSlots];   // a rebuild of its own (a failed or stale QP)
  std::uint32_t gen[kSlots] = {};         // the device's recover_gen the slot's QP was built for
  bool want[kSlots] = {};                 // a new QP is wanted (the old one failed, or is stale)
  std::uint64_t retry_ns[kSlots] = {};    // after a failed rebuild: next attempt
  std::uint64_t backoff_ns[kSlots] = {};
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
  int active() const noexcept { return active_; }  // the slot carrying the traffic (CommBase::path())
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
  friend struct FailoverWriter;   // ha/failover.cpp: fo_, peer_sync_, the sync notice of inbox_
  friend struct StandbyWriter;    // ha/standby_health.cpp: standby_
  friend struct ReprotectWriter;  // ha/reprotect.cpp: rp_, the reprotect and hello messages of inbox_
  friend struct RescueWriter;     // ha/rescue.cpp: rescue_ (its TCP mail into inbox_)
  friend struct GateWriter;       // ha/attempt_gate.cpp: ticket_
  friend struct FlushWriter;      // ha/flush_paths.cpp: flush_
  friend struct RebindWriter;     // ha/rebind.cpp: rebind_
  friend struct PortsWriter;      // ha/standby.cpp: ports_
  friend struct ActiveWriter;     // ha/standby.cpp: active_ (set_active_slot)
  friend struct DetectWriter;     // ha/control_step.cpp: rto_noted_

  int active_ = 0;
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

}  // namespace nccl_ha::plugin
