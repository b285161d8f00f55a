// The plugin's control plane: everything of HA besides moving data, run on the reactor's
// progress thread (and its workers) whether or not NCCL calls - the control task and its step,
// fault detection, the switchover, re-protection and the choice of standby ports, the flush
// paths, the handshakes' leftovers at finalize, and the stats. The data path's own calls are in
// core/path_ops.hpp; who runs what: the Threads section of api/init.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/path_ops.hpp"
#include "ha/face.hpp"
#include "nccl_ha/net/json.hpp"
#include "runtime/monitor.hpp"

namespace nccl_ha::plugin {

// ---- RDMA READ flushes (flush_paths.cpp): the flush paths, built and tended by the control plane
// (setup_flush, setup's call: face.hpp)
void close_flush(RecvComm& c);                   // closing, comm held: the loopback QPs go to the reaper
void drop_flush_path(RecvComm& c, int slot);     // a slot dropped before NCCL has the comm: its loopback QP goes
// A new loopback path on d, slot `slot`, connected to itself with the port's GID as it is now.
// Verbs work (any thread, a worker's).
Expected<std::shared_ptr<Path>> build_flush_path(Reaper* reaper, Device& d, int slot);
struct PathJob;
// The flush path a finished job built for `slot` (control plane, comm held): it replaces the
// slot's QP as soon as no READ is outstanding on that one.
void offer_flush_path(RecvComm& c, int slot, PathJob& job);
// Control plane, comm held: installs waiting flush QPs, rebuilds failed and stale ones. Returns
// when it wants to run again (0: no wish).
std::uint64_t tend_flush(RecvComm& c, std::uint64_t now);

// ---- the control step (control_step.cpp)
// The control plane's step (progress thread, comm held): polls what the data path leaves alone,
// watches for faults (error completions, port events, the soft RTO, the peer's failover notice),
// keeps the standby's heartbeats going, advances failover and re-protection. Returns when it
// wants to run again (CLOCK_MONOTONIC ns; 0: only when woken).
std::uint64_t control_step(CommBase& c, std::uint64_t now);

// ---- the control task (control.cpp; start_control and wake: face.hpp)
// Runs the comm's control step soon, from the progress thread itself (wake: from any thread).
void wake_here(CommBase& c);
// The device's completion channel: wakes the comm of every CQ event (progress thread).
void watch_channel(Device& d);
// Port events of d: every comm with a path on it runs its control step now, first those whose
// traffic runs on d (their failover), then those with only a standby or flush path there.
void wake_watchers(Device& d);
// The comm is woken by d's port events too (its standby moved there). Progress thread.
void watch_device(const std::shared_ptr<CommBase>& c, Device& d);
inline void watch_device(CommBase& c, Device& d) { watch_device(c.shared_from_this(), d); }

// ---- exactly-once across a switchover (replay.cpp)
// The receiver's report: base = its oldest receive not fully received (or next_seq), and the
// received-buffer mask of every receive base .. base+31 (0xff for one already handed back to
// NCCL, 0 for one not posted yet).
SyncMsg receiver_report(const std::array<Request, kMaxRequests>& reqs, std::uint64_t next_seq);
// Whether the report shows buffer `index` of receive `seq` as received.
bool delivered(const SyncMsg& m, std::uint64_t seq, unsigned index);
// Receiver: a receive WR on the new path `p` for every buffer not received yet (only the difference
// when the path still has some posted, the excess kept as its spare_recvs), its clear-to-send
// entries re-published there, and its report in ctrl_out.sync (written by the caller).
Status announce_recv(RecvComm& c, Path& p);
// Sender: every in-flight send the report `m` shows delivered completed (its ACK was lost), the
// others replayed on `p`. Returns the number replayed.
Expected<std::uint32_t> apply_report(SendComm& c, const SyncMsg& m, Path& p);

// ---- switchover (failover.cpp)
// `planned`: a failback to a healthy path, not a fault. `via`: the path the peer's notice came
// over - it proves that path works, whatever the local view of the standby says.
void start_failover(CommBase& c, const std::string& cause, bool planned = false, const Path* via = nullptr);
// Returns when it wants to run again (as control_step).
std::uint64_t advance_failover(CommBase& c, std::uint64_t now);
// The fault the data path handed over (ControlPlane::hand_over), taken ("": none).
std::string take_failover_request(CommBase& c);
// Failback: a send comm whose standby runs on the connection's own ports again, healthy for the
// (dampened) hold-down, switches back to them (a planned failover). Returns when the hold ends (0:
// no failback due).
std::uint64_t go_home(CommBase& c, std::uint64_t now);
// The peer's SyncMsg if a whole one of epoch >= min_epoch arrived (kept in c.cp.peer_sync()); an older
// one is dropped, one still landing is left for its completion to announce again.
const SyncMsg* peer_notice(CommBase& c, std::uint32_t min_epoch);
// No usable path left: WARN, a "fatal" stats line, and ncclSystemError from every later call.
void fail_comm(CommBase& c, const std::string& why);
// Failovers started within the window, after dropping the older ones (pure; unit-tested).
std::size_t failovers_in_window(std::deque<std::uint64_t>& starts, std::uint64_t now, std::uint64_t window_ns);
// The failback's hold-down, dampened: HA_NCCL_FAILBACK_HOLD_MS after one failover in the retry
// window, doubled for each further one, at most kMaxHoldDoublings times (a flapping home port
// waits longer each time; pure, unit-tested).
constexpr unsigned kMaxHoldDoublings = 5;
std::uint64_t dampened_hold_ns(std::uint64_t hold_ns, std::size_t failovers) noexcept;

// ---- standby ports (standby.cpp): which pair of ports a new standby goes on
// The next attempt's ports: ours (nullptr: none now, `why` says why) and the peer's (-1: its slot's
// device as it is). Pairs that failed since the last reset are skipped.
struct AttemptPorts {
  Device* dev = nullptr;
  int peer_dev = -1;
  std::string why;
};
AttemptPorts choose_standby_ports(CommBase& c);
// Port `d` as a candidate for connections whose port here is `primary` (one of local_candidates:
// face.hpp).
Candidate candidate_for(const Device& d, const Device& primary, const Device* sibling = nullptr);
// The pair (dev, peer_dev) failed: the next choice skips it until the reset.
void standby_ports_failed(CommBase& c, int dev, int peer_dev);
// Every pair may be tried again (after the backoff).
void standby_ports_reset(CommBase& c);
// The ports that came back (PORT_ACTIVE, GID change) since the last call, "rxe0:1,rxe2:1" ("":
// none): the standby pairs through them may be tried again.
std::string standby_ports_recovered(CommBase& c);
// The connections each port carries (Device::active_comms, standby_comms): the comm's active and standby devices
// counted, what it counted before taken back. Called after every change of devs[] or active, and
// at close (closing: nothing counted any more).
void account_ports(CommBase& c);
// set_active_slot (the one writer of the active slot): face.hpp.

// ---- re-protection (reprotect.cpp): builds a new standby when there is none (send side
// drives, receive side answers). Called by control_step in the normal phase; returns when it
// wants to run again (0: no wish).
std::uint64_t reprotect(CommBase& c, std::uint64_t now);
// A rescue begins (rescue.hpp): the send side starts re-protection over (every pair may be tried,
// now; its messages go over TCP); the receive side waits for the peer's request.
void restart_for_rescue(CommBase& c, std::uint64_t now);
// The peer's failover notice came over the path re-protection is still building: install it.
bool adopt_job_path(CommBase& c, const Path* via, std::uint64_t now);
// Closing: the path of a finished re-protection job goes to the reaper (a running job keeps its own).
void retire_job(CommBase& c);
// A failover while the standby is being moved to the connection's own pair: whether it must wait
// for the move's hello (it may have been installed by the peer already: true, the failover asks
// again at the next step), else the move is given up (or, when the peer's notice came over the move's
// path, left for adopt_job_path to install).
bool failover_waits_for_move(CommBase& c, const std::string& cause, const Path* via, std::uint64_t now);

// ---- the re-protection message (reprotect_msg.cpp)
// Writes our ReprotectMsg to the peer over the active path (or as the rescue's mail): the endpoint
// of `job`'s path (no job: zeros, ok 0) and our keys on its device, `ok`, `gen`, and (a request,
// peer_dev >= 0) the peer's device to use. 0 or the posting's errno.
int post_reprotect(CommBase& c, const PathJob* job, std::uint32_t ok, std::uint32_t gen, int peer_dev);
// Our keys on a re-protection attempt's device: the standby slot's own, or the ones its job
// registered there (a move to another device, rebind.hpp).
const SlotKeys& attempt_keys(const CommBase& c, const PathJob& job);
// The receive side's decisions on the peer's ReprotectMsg, pure (no verbs, no process state), as
// answer() / take_request() make them; fuzzed (test/fuzz/reprotect_request.cpp).
// What a whole request (read_record) gets from a receive comm whose re-protection is at `rp`:
enum class RequestAction : std::uint8_t {
  judge,         // a new attempt (its gen newer than the last one taken): judge_request, then build or refuse
  answer_again,  // the attempt we answered and wait the hello of (a reminder): the same answer again
  refuse_again,  // the attempt we refused (a reminder): refused again, the same way
  none,          // the attempt whose side we still build: its answer comes when the job is done
  drop           // not acted on, counted (ReprotectState::dropped): an older attempt's (a write that
                 // landed late, or a peer's bug), or a rescue's request (ok kRescueSlot + s) that did
                 // not come as the rescue service's mail (only a proven TCP request may renumber our slots)
};
// How the request came: written by the peer over a path, or as the rescue service's mail (Inbox::by_mail).
enum class RequestOrigin : std::uint8_t { path, rescue_mail };
RequestAction request_action(const ReprotectState& rp, const ReprotectMsg& req, RequestOrigin origin) noexcept;
// Whether generation `a` is newer than `b` (serial-number order: a peer's gen may wrap).
constexpr bool newer_gen(std::uint32_t a, std::uint32_t b) noexcept { return static_cast<std::int32_t>(a - b) > 0; }
// The receive side's state as a new request is taken (a new attempt: gen, not refused yet; its
// job, if any, dropped by the caller), and as the attempt is refused (`ok`: 0 or kPortDown), at once
// (judge_request) or when its job failed: what request_action tells a reminder from.
void begin_request(ReprotectState& rp, const ReprotectMsg& req) noexcept;
void refuse_request(ReprotectState& rp, std::uint32_t ok) noexcept;
// What a request is judged against: the comm as the receive side sees it.
struct RequestView {
  std::array<Device*, kSlots> devs{};  // CommBase::devs (both set: a single-path comm answers no request)
  int active = 0;                      // CommBase::active()
  const Device* home = nullptr;        // CommBase::home
  std::span<const Candidate> peer_cands;  // CommBase::peer_cands
  FailoverState::Phase phase = FailoverState::normal;
  std::span<const std::unique_ptr<Device>> devices;  // the process's devices, by NCCL index (State::devices)
};
RequestView request_view(const CommBase& c);
// The verdict: build our side on `dev`, connected to `remote`, or refuse (`dev` null, `why`, the
// answer's ok `refusal`: kPortDown when the device is there but its port is down, else 0). A
// rescue's request (ok kRescueSlot + s) for the slot we count as active renumbers ours: `active`
// (whatever the rest of the verdict; not during a failover, which refuses it).
struct RequestVerdict {
  Device* dev = nullptr;
  net::Endpoint remote{};
  int active = 0;
  std::uint32_t refusal = 0;
  std::string why;
};
RequestVerdict judge_request(const RequestView& v, const ReprotectMsg& req);

// ---- standby health (standby_health.cpp): the one writer of StandbyHealth
// A new comm's standby slot: connecting (its standby is being connected), or none (single path).
void init_standby(CommBase& c, bool connecting);
// Health of the standby path, at every control step: its device's events, its completions, its
// pair's heartbeats (a dead path is moved to ERROR and marked down; a silent pair's marks it down,
// its answers up again).
void tend_standby(CommBase& c);
// The failback's hold-down starts again now (a failback given up, a standby moved home).
void restart_failback_hold(CommBase& c, std::uint64_t now);
// Standby state change (INFO line + stats line).
// Operators see protection come and go at NCCL_DEBUG=WARN: the first loss (a standby that was up
// goes down, or one that never came up fails) is a WARN, and so is its return; the transitions in
// between (re-protection attempts and their backoff) are INFO. `said` : a WARN line of the caller
// (the failover's) already tells the loss.
void set_standby(CommBase& c, StandbyHealth::State state, const std::string& why, bool said = false);

// ---- observability (stats.cpp)
const char* standby_name(StandbyHealth::State s) noexcept;
// One JSON line for HA_NCCL_STATS_FILE, from any thread that holds the comm: queued, and appended
// to the file by a reactor worker (never on the caller's thread); `extra` adds the event's own
// members (key/value pairs) to the record's object.
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
