// Internal interface between the data path (p2p.cpp), polling and detection (progress.cpp) and
// the switchover (failover.cpp). Everything here runs on the thread NCCL drives the comm from.
#pragma once

#include <string>

#include "comm.hpp"

namespace nccl_ha::plugin {

// ---- posting (p2p.cpp); each returns 0 or the errno of ibv_post_*
int post_data(SendComm& c, Request& r, Path& p);                      // r's WRITE_WITH_IMM on p
int post_recv_wrs(RecvComm& c, Path& p, std::uint64_t slot, int n);   // n receive WRs for a slot
int post_cts(RecvComm& c, Path& p, std::uint64_t slot);               // outbox[slot] -> peer FIFO
// Writes ctrl_out bytes [offset, offset+len) into the peer's ControlBlock over p.
int post_control(CommBase& c, Path& p, WrKind kind, std::size_t offset, std::size_t len);

// ---- RDMA READ flushes (flush.cpp)
// With HA_NCCL_FORCE_FLUSH or GPU peer memory: a loopback QP and a sink on every device of the
// comm (the primary's is required, a backup's failure is WARNed about). Nothing otherwise. Runs
// on the reactor.
Status setup_flush(RecvComm& c);
void close_flush(RecvComm& c);                   // the loopback QPs go to the reaper
ncclResult_t test_flush(Request& r, int* done);  // test() of an iflush request

// ---- completions (p2p.cpp): a successful data-path completion on path p
void on_success(CommBase& c, Path& p, const ibv_wc& wc);

// ---- polling and detection (progress.cpp)
// Reaps up to `max` completions of p (successes handled, accounting kept). Returns the number
// reaped, -1 when ibv_poll_cq failed; the first error completion is copied to *error (status
// IBV_WC_SUCCESS when none).
int poll_path(CommBase& c, Path& p, int max, ibv_wc* error);
// One step of everything the comm needs: polls the active path, watches for faults (error
// completions, port events, the soft RTO, the peer's failover notice), keeps the standby's
// heartbeats going and advances a failover in progress. Returns the comm's sticky error.
ncclResult_t progress(CommBase& c);
// True when isend / irecv may post (no failover in progress, no error).
inline bool can_post(const CommBase& c) { return c.error == ncclSuccess && c.fo.phase == FailoverState::normal; }

// ---- switchover (failover.cpp)
// The receiver's report: base = its oldest receive not fully received (or next_seq), and the
// received-buffer mask of every receive base .. base+31 (0xff for one already handed back to
// NCCL, 0 for one not posted yet).
SyncMsg receiver_report(const std::array<Request, kMaxRequests>& reqs, std::uint64_t next_seq);
// Whether the report shows buffer `index` of receive `seq` as received.
bool delivered(const SyncMsg& m, std::uint64_t seq, unsigned index);
// `planned`: a failback to a healthy path, not a fault.
void start_failover(CommBase& c, const std::string& cause, bool planned = false);
void advance_failover(CommBase& c);
// No usable path left: WARN, a "fatal" stats line, and ncclSystemError from every later call.
void fail_comm(CommBase& c, const std::string& why);
// ---- re-protection (reprotect.cpp): builds a new standby when there is none (send side
// drives, receive side answers). Called from progress() in the normal phase.
void reprotect(CommBase& c, std::uint64_t now);
// Closing: the path of a finished re-protection job goes to the reaper (a running job keeps its own).
void retire_job(CommBase& c);

// Standby state change (INFO line + stats line).
void set_standby(CommBase& c, StandbyHealth::State state, const std::string& why);

// ---- observability (stats.cpp)
const char* standby_name(StandbyHealth::State s) noexcept;
// One JSON line into HA_NCCL_STATS_FILE (written on the progress thread); `extra` is a list of
// additional "key":value members, without braces (may be empty).
void write_stats(const CommBase& c, const char* event, const std::string& extra);
std::string json_string(const std::string& s);

}  // namespace nccl_ha::plugin
