// HA's face: the calls connection setup (setup/) and the data path (datapath/) make into HA, and
// the only header of ha/ they include (test/unit/plugin/check_layers.py). Behind it stay
// detection, failover and failback, standby health, liveness, re-protection, rescue, the flush
// paths' upkeep, and the state they keep (ControlPlane, written only in ha/: check_writers.py).
// Besides these calls the data path meets HA only through ControlPlane's own calls in core
// (may_post, hand_over, reaped_control, reaped_notice_write), as net_ib's p2p meets its resiliency.
//
//   setup                                   data path
//   comm_built, start_control               profile_posted, profile_done (inline: one test each)
//   set_active_slot, started_on_standby     heartbeat_acked
//   standby_declined, comm_discarded        wake
//   local_candidates, setup_flush           comm_closing
//   rescue_point, take_rescue_point
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "core/comm.hpp"
#include "core/conn_msg.hpp"
#include "nccl_ha/net/auth.hpp"
#include "runtime/topology.hpp"

namespace nccl_ha::plugin {

// ---- a comm's life (comm_life.cpp, control.cpp)
// A comm was built (make_send_comm, make_recv_comm) or given its standby (attach_standby): its
// standby's record starts (connecting, or none for a single path) and its ports count it. On the
// worker that built it, before anyone else sees the comm (connect.cpp, listen.cpp).
void comm_built(CommBase& c);
// The comm is handed to NCCL: its control task starts (its timer; heartbeats and detection from
// now on, whether or not NCCL calls the plugin). control.cpp.
void start_control(const std::shared_ptr<CommBase>& c);
// Runs the comm's control step soon: from any thread (a hop to the progress thread). control.cpp.
void wake(CommBase& c);
// NCCL closes the comm (closing set, the comm held, the goodbye said): HA lets go of it - its
// profiler events ended, its ports' counts, the close record (stats), its place among the live
// comms, its rescue enrolment, the flush paths, a re-protection job in flight.
void comm_closing(CommBase& c);
// A comm NCCL never got (closing set): its rescue enrolment, its ports' counts, its flush paths.
// No close record: NCCL never saw it.
void comm_discarded(CommBase& c);

// ---- where the comm's traffic goes, as setup finds it (comm_life.cpp, standby.cpp)
// This node's ports as candidates for a connection whose port here is `primary` (each port's state,
// standby load and topology; `primary` flagged, its HA_NCCL_STANDBY_MAP standby port preferred, else
// `sibling`: a fused device's member's next member, CommBase::sibling), sorted by device, at most
// kMaxCandidates (the primary always among them). standby.cpp.
std::vector<Candidate> local_candidates(const Device& primary, const Device* sibling = nullptr);
// The slot that carries the comm's traffic from now on (ControlPlane::active), its ports counted
// again: a failover's switch, a rescue adopting the peer's numbering of the slots, a connection
// that starts on its standby pair (setup, before anyone else sees the comm). standby.cpp.
void set_active_slot(CommBase& c, int slot);
// The connection's own pair did not connect (`why`): it starts on its standby pair (slot 1, up),
// the primary's path gone, the standby down until re-protection builds a new one.
void started_on_standby(CommBase& c, const std::string& why);
// The peer did not take the standby (before NCCL has the comm): the standby slot is emptied (its
// path and flush path retired) and the comm is single-path.
void standby_declined(CommBase& c);

// ---- RDMA READ flushes (flush_paths.cpp)
// With HA_NCCL_FORCE_FLUSH or GPU peer memory: a loopback QP and a sink on every device of the
// comm (the one of the slot the comm starts on, `active()`, is required; another's failure is
// WARNed about). Nothing otherwise. Verbs work: on a reactor worker, before NCCL has the comm.
Status setup_flush(RecvComm& c);

// ---- the rescue service's point of contact (rescue.cpp; rescue.hpp says what a rescue is)
// The comm's rescue point for its handshake message (enrolls it with the connection's rescue key
// `key`; none when HA is off).
RescuePoint rescue_point(const std::shared_ptr<CommBase>& c, const net::Key& key);
// The peer's, from its handshake message, at `addr` (its handshake socket's address).
void take_rescue_point(CommBase& c, const boost::asio::ip::address& addr, const RescuePoint& theirs);

// ---- the data path's calls
// A heartbeat write on `p` completed: its pair of ports is alive up to `seq` (liveness.cpp; any
// thread).
void heartbeat_acked(Path& p, std::uint64_t seq) noexcept;
// NCCL's profiler (profiler.hpp): isend / irecv give a posted request the comm's note, test()
// ends its events; inline so that without profiling they cost one test each.
void profile_close(Request& r) noexcept;
void profile_note_post(CommBase& c, Request& r, std::uint64_t note) noexcept;
template <class R>
inline void profile_done(R& r) noexcept {
  if (r.prof.open) profile_close(r);
}
template <class C, class R>
inline void profile_posted(C& c, R& r) noexcept {
  if (c.prof_note.load(std::memory_order_relaxed) != 0) {
    if (const std::uint64_t note = c.prof_note.exchange(0, std::memory_order_acquire)) profile_note_post(c, r, note);
  }
}

}  // namespace nccl_ha::plugin
