// Internal interface between the data path (p2p.cpp), polling and detection (progress.cpp), the
// switchover (failover.cpp), re-protection (reprotect.cpp) and the control task (control.cpp).
//
// Who runs what (comm.hpp, "Control plane"):
//   NCCL's thread      isend / irecv / test / iflush: post, poll the active path's CQ, hand errors
//                      to the control plane (request_failover). Never waits for the progress thread.
//   progress thread    control_step(): everything else, every tick of the comm's timer and at
//                      every completion-channel or port event, whether or not NCCL calls.
// Both hold CommBase::owned (a try-lock, class Hold) while they touch the comm.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "comm.hpp"
#include "monitor.hpp"
#include "nccl_ha/net/json.hpp"

namespace nccl_ha::plugin {

// Takes the comm for the calling thread if nobody holds it (one atomic exchange, no waiting).
class Hold {
 public:
  explicit Hold(CommBase& c) noexcept
      : c_(c), ok_(!c.owned.load(std::memory_order_relaxed) && !c.owned.exchange(true, std::memory_order_acquire)) {}
  ~Hold() {
    if (ok_) c_.owned.store(false, std::memory_order_release);
  }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  explicit operator bool() const noexcept { return ok_; }

 private:
  CommBase& c_;
  bool ok_;
};
// Takes the comm, waiting (yielding) until the other thread lets go, and lets go of it when it goes
// out of scope: for the calls that may not answer "not yet" (close, iflush, deregMr); never on the
// data path's isend / irecv / test, never on the progress thread.
class HoldWait {
 public:
  explicit HoldWait(CommBase& c) noexcept : c_(c) {
    while (c.owned.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  }
  ~HoldWait() { c_.owned.store(false, std::memory_order_release); }
  HoldWait(const HoldWait&) = delete;
  HoldWait& operator=(const HoldWait&) = delete;

 private:
  CommBase& c_;
};

// ---- posting (p2p.cpp); each returns 0 or the errno of ibv_post_*
// How many WRs of the chain `first` (at most n, linked by `next`) a post that returned `rc` and
// `bad` did post: all of them on success; on a failure the ones before `bad`, the first WR not
// posted (the verbs contract); none when `bad` is not in the chain. Pure; unit-tested.
template <class Wr>
int wrs_posted(const Wr* first, int n, int rc, const Wr* bad) noexcept {
  if (rc == 0) return n;
  int k = 0;
  for (const Wr* w = first; w && k < n; w = w->next, ++k)
    if (w == bad) return k;
  return 0;
}
int post_data(SendComm& c, Request& r, Path& p);                 // r's WRITE_WITH_IMM on p
int post_recvs(Path& p, std::uint64_t slot, int n);              // n receive WRs (data or control)
int post_cts(RecvComm& c, Path& p, std::uint64_t slot);          // outbox[slot] -> peer FIFO
// Writes ctrl_out bytes [offset, offset+len) into the peer's ControlBlock over p; with a `notify`
// kind, as a write with immediate data that raises a completion (and wakes the peer's control plane).
// The keys are p's slot's (CommBase::keys), or `keys` for a path whose slot has not moved to its
// device yet (re-protection's hello).
struct WriteKeys {
  std::uint32_t lkey = 0;  // ctrl_out on p's device
  std::uint32_t rkey = 0;  // the peer's ControlBlock on its device of p
};
int post_control(CommBase& c, Path& p, WrKind kind, std::size_t offset, std::size_t len, CtlKind notify = {},
                 const WriteKeys* keys = nullptr);
// One heartbeat write on p (the standby's health probe, the idle active path's liveness probe).
int post_heartbeat(CommBase& c, Path& p);

// ---- RDMA READ flushes (flush.cpp)
// With HA_NCCL_FORCE_FLUSH or GPU peer memory: a loopback QP and a sink on every device of the
// comm (the primary's is required, a backup's failure is WARNed about). Nothing otherwise.
// Verbs work: runs on a reactor worker (Reactor::offload), before the comm is handed to NCCL.
Status setup_flush(RecvComm& c);
void close_flush(RecvComm& c);                   // closing, comm held: the loopback QPs go to the reaper
ncclResult_t test_flush(Request& r, int* done);  // test() of an iflush request
// A new loopback path on d, slot `slot`, connected to itself with the port's GID as it is now.
// Verbs work (any thread, a worker's).
Expected<std::shared_ptr<Path>> build_flush_path(Device& d, int slot);
struct PathJob;
// The flush path a finished job built for `slot` (control plane, comm held): it replaces the
// slot's QP as soon as no READ is outstanding on that one.
void offer_flush_path(RecvComm& c, int slot, PathJob& job);
// Control plane, comm held: installs waiting flush QPs, rebuilds failed and stale ones. Returns
// when it wants to run again (0: no wish).
std::uint64_t tend_flush(RecvComm& c, std::uint64_t now);

// A comm NCCL never closed, at the last finalize: closed as closeSend / closeRecv would (NCCL's
// reference dropped too). The reactor is stopped by then.
void close_at_finalize(CommBase& c);

// ---- completions (p2p.cpp): a successful completion on path p
void on_success(CommBase& c, Path& p, const ibv_wc& wc);

// ---- polling and detection (progress.cpp)
// Reaps up to `max` completions of p (successes handled, accounting kept). Returns the number
// reaped, -1 when ibv_poll_cq failed; the first error completion is copied to *error (status
// IBV_WC_SUCCESS when none).
int poll_path(CommBase& c, Path& p, int max, ibv_wc* error);
// poll_path, then arm p's completion channel and poll once more (a completion between the two
// raises an event, none is lost). Progress thread only.
int poll_and_arm(CommBase& c, Path& p, int max, ibv_wc* error);
// The data path's part (test): poll the active path; an error goes to the control plane.
// Returns the comm's sticky error.
ncclResult_t data_poll(CommBase& c);
// The control plane's step (progress thread, comm held): polls what the data path leaves alone,
// watches for faults (error completions, port events, the soft RTO, the peer's failover notice),
// keeps the standby's heartbeats going, advances failover and re-protection. Returns when it
// wants to run again (CLOCK_MONOTONIC ns; 0: only when woken).
std::uint64_t control_step(CommBase& c, std::uint64_t now);
// True when isend / irecv may post (no failover in progress or asked for, no error).
inline bool can_post(const CommBase& c) {
  return c.error == ncclSuccess && c.fo.phase == FailoverState::normal && c.fo.requested.empty();
}
// The data path met a fault of the active path: the control plane fails over (woken now).
void request_failover(CommBase& c, std::string cause);
std::string describe_error(const Path& p, const ibv_wc& wc);
std::string describe_fault(const Device& d);

// ---- handshakes (connect.cpp, listen.cpp)
// Finalize, before the devices close: the comms of connections whose connect() was never called
// again (and of handshakes still running, when they end) go to the reaper, none outlives the state.
void drop_connect_ops();

// ---- the control task (control.cpp)
// Starts the comm's control plane on the reactor: called once, when the comm is handed to NCCL.
void start_control(const std::shared_ptr<CommBase>& c);
// Runs the comm's control step soon: from any thread (a hop to the progress thread)...
void wake(CommBase& c);
// ... or from the progress thread itself.
void wake_here(CommBase& c);
// The device's completion channel: wakes the comm of every CQ event (progress thread).
void watch_channel(Device& d);
// Port events of d: every comm with a path on it runs its control step now.
void wake_watchers(Device& d);
// The comm is woken by d's port events too (its standby moved there). Progress thread.
void watch_device(const std::shared_ptr<CommBase>& c, Device& d);
inline void watch_device(CommBase& c, Device& d) { watch_device(c.shared_from_this(), d); }

// ---- switchover (failover.cpp)
// The receiver's report: base = its oldest receive not fully received (or next_seq), and the
// received-buffer mask of every receive base .. base+31 (0xff for one already handed back to
// NCCL, 0 for one not posted yet).
SyncMsg receiver_report(const std::array<Request, kMaxRequests>& reqs, std::uint64_t next_seq);
// Whether the report shows buffer `index` of receive `seq` as received.
bool delivered(const SyncMsg& m, std::uint64_t seq, unsigned index);
// `planned`: a failback to a healthy path, not a fault. `via`: the path the peer's notice came
// over - it proves that path works, whatever the local view of the standby says.
void start_failover(CommBase& c, const std::string& cause, bool planned = false, const Path* via = nullptr);
// Returns when it wants to run again (as control_step).
std::uint64_t advance_failover(CommBase& c, std::uint64_t now);
// The peer's SyncMsg if a whole one of epoch >= min_epoch arrived (kept in c.peer_sync); an older
// one is dropped, one still landing is left for its completion to announce again.
const SyncMsg* peer_notice(CommBase& c, std::uint32_t min_epoch);
// No usable path left: WARN, a "fatal" stats line, and ncclSystemError from every later call.
void fail_comm(CommBase& c, const std::string& why);
// Failovers started within the window, after dropping the older ones (pure; unit-tested).
std::size_t failovers_in_window(std::deque<std::uint64_t>& starts, std::uint64_t now, std::uint64_t window_ns);

// ---- standby ports (standby.cpp): which pair of ports a new standby goes on
// The next attempt's ports: ours (nullptr: none now, `why` says why) and the peer's (-1: its slot's
// device as it is). Pairs that failed since the last reset are skipped.
struct AttemptPorts {
  Device* dev = nullptr;
  int peer_dev = -1;
  std::string why;
};
AttemptPorts choose_standby_ports(CommBase& c);
// This node's ports as candidates for a connection whose port here is `primary` (each port's state,
// standby load and topology; `primary` flagged, its HA_NCCL_BACKUP_MAP backup preferred), sorted
// by device, at most kMaxCandidates (the primary always among them).
std::vector<Candidate> local_candidates(const Device& primary);
// One of them: port `d` as a candidate for connections whose port here is `primary`.
Candidate candidate_for(const Device& d, const Device& primary);
// The pair (dev, peer_dev) failed: the next choice skips it until the reset.
void standby_ports_failed(CommBase& c, int dev, int peer_dev);
// Every pair may be tried again (after the backoff).
void standby_ports_reset(CommBase& c);
// The ports that came back (PORT_ACTIVE, GID change) since the last call, "rxe0:1,rxe2:1" ("":
// none): the standby pairs through them may be tried again.
std::string standby_ports_recovered(CommBase& c);
// The connections each port carries (Device::carried): the comm's active and standby devices
// counted, what it counted before taken back. Called after every change of devs[] or active, and
// at close (closing: nothing counted any more).
void account_ports(CommBase& c);

// ---- re-protection (reprotect.cpp): builds a new standby when there is none (send side
// drives, receive side answers). Called by control_step in the normal phase; returns when it
// wants to run again (0: no wish).
std::uint64_t reprotect(CommBase& c, std::uint64_t now);
// The peer's failover notice came over the path re-protection is still building: install it.
bool adopt_job_path(CommBase& c, const Path* via, std::uint64_t now);
// Closing: the path of a finished re-protection job goes to the reaper (a running job keeps its own).
void retire_job(CommBase& c);

// Standby state change (INFO line + stats line).
// Operators see protection come and go at NCCL_DEBUG=WARN: the first loss (a standby that was up
// goes down, or one that never came up fails) is a WARN, and so is its return; the transitions in
// between (re-protection attempts and their backoff) are INFO. `said` : a WARN line of the caller
// (the failover's) already tells the loss.
void set_standby(CommBase& c, StandbyHealth::State state, const std::string& why, bool said = false);

// ---- observability (stats.cpp)
const char* standby_name(StandbyHealth::State s) noexcept;
// One JSON line into HA_NCCL_STATS_FILE (written on the progress thread); `extra` adds the
// event's own members (key/value pairs) to the record's object.
void write_stats(const CommBase& c, const char* event, const std::function<void(net::JsonWriter&)>& extra = {});
// The exporter's view of a comm (the caller holds it).
CommSample sample_comm(const CommBase& c);
// The registry of live comms (State::comms): start_control registers, close unregisters (holding
// the comm; its counters are folded into the process totals).
void register_comm(const std::shared_ptr<CommBase>& c);
void unregister_comm(const CommBase& c);
// At init, with the reactor running: the "init" stats record, and the HA_NCCL_PROM_FILE timer.
struct State;
void start_monitoring(State& st);
PromSnapshot take_snapshot(State& st);  // progress thread

}  // namespace nccl_ha::plugin
