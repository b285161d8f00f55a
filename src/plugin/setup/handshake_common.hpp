// What the connector (connect.cpp) and the listener (listen.cpp) share: the helpers both sides of
// a handshake use, and phase two (the standby's agreement), which both run.
//
// The handshake. listen / connect / accept / closeListen: none of them waits for the peer or the network:
// each does local work and returns; the handshakes run as coroutines on the reactor. Their
// verbs work (creating the comm's CQs, QPs and registrations, the INIT->RTR->RTS transitions,
// the flush QPs) is offloaded to the reactor's workers (co_await Reactor::offload), so that a
// burst of handshakes never sits in front of port events and failovers on the progress thread.
//
//   connector (sender)                         listener (receiver)
//   TCP connect to the handle's address  --->  accept, admit unproven (admission.hpp)
//   hello / hello_reply: the connector proves the handle's secret first (handshake_auth.hpp);
//   every frame below is sealed with the session key (Channel)
//   conn_request {primary endpoint, FIFO and control block addresses/rkeys, QoS, the connector's
//                 candidate ports (topology.hpp: rail, island, NIC, load ...)}
//                                              chooses the standby pair both ends can reach
//                                              (rank_standby_pairs), creates QPs on its primary
//                                              and on its port of that pair, primary INIT->RTR->RTS
//                                        <---  conn_reply {primary endpoint, standby offer {pair,
//                                              endpoint, rkey}, control block, its candidates}
//   standby QP on its port of the pair (+ the comm's registrations there), primary INIT->RTR->RTS
//   conn_ready {standby endpoint, rkeys} --->  one step under the listener's mutex: conn_ack
//                                              written (non-blocking, whole or not at all) and
//                                        <---  the recv comm queued for accept(); closeListen()
//                                              before it: an error frame instead
//   the send comm is handed to connect()       (a connect() in flight when the listener is
//                                               closed fails instead of returning a dead comm)
//   phase two, in the background on the same socket, when both sides offered a standby:
//   standby QP INIT->RTR->RTS                  standby QP INIT->RTR->RTS
//   standby_up / standby_failed          <-->  standby_up / standby_failed
//   Path::link published: the comm starts its heartbeats and may fail over to it.
//   ECE (net/ece.hpp) where both standby QPs offer it: the listener's standby endpoint went first
//   (conn_reply), so the connector answers: it connects first and its standby_up carries its
//   endpoint with the reduced ECE, which the listener sets before it connects and answers.
//   The primary needs nothing of the kind: the listener connects it before conn_reply.
//
// A connection whose own pair of ports is down at either end (home_pair_up over the two candidate
// lists: both sides decide alike), or whose primary QP did not connect at either side (that side
// sets kStartOnStandby in conn_reply / conn_ready), uses no primary QP: phase two runs right after conn_ready,
// before conn_ack, and the comm starts on the standby pair with its own pair as the standby slot,
// down (start_on_standby). No pair up at both ends: the listener refuses (no_live_pair).
//
// The messages are encoded and checked by conn_msg.cpp, the handle by handle.cpp: nothing is
// created for a connector before its request decoded whole. A connection that does not prove the
// secret in its first frame (garbage, another id, a replay, half a frame, nothing) is closed within
// the admission deadline without a byte sent back (admission.hpp: counted, an INFO line at most
// once a minute per source). A proven connector's handshake that fails ends with one WARN.
//
// Comms that never reach NCCL (queued when the listener is closed, or made by a connect() that is
// never called again before finalize: drop_connect_ops) go the way closeSend / closeRecv send
// theirs: QPs to ERROR, paths to the reaper.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/conn_msg.hpp"
#include "setup/handshake_auth.hpp"

namespace nccl_ha::plugin::hs {

using tcp = boost::asio::ip::tcp;
using Millis = std::chrono::milliseconds;

// The peer's handshake address for the stats records (an IPv4-mapped address as IPv4).
std::string peer_name(const boost::asio::ip::address& a);

// Connections on `dev` without a standby: said once per port, side and reason (a WARN when HA is
// on: protection expected and not given, the operator must see it).
void note_unprotected(const Device& dev, const char* side, const std::string& why);

// Why connections from `dev` offer no standby at all ("": they do).
std::string no_standby_here(const Device& dev);

// The address of our memory `addr` and its rkey on the primary's device (the registration `mr` of
// SlotKeys); the standby's rkeys travel with its endpoint (reply, conn_ready).
RemoteKeys keys_of(const CommBase& c, const void* addr, net::MrPtr SlotKeys::*mr);

// The peer's memory: its address, and its rkey on the primary's device into the SlotKeys member `rkey`.
void take_keys(CommBase& c, const RemoteKeys& k, std::uint64_t& addr, std::uint32_t SlotKeys::*rkey);

// The peer's ports (its handshake message's candidates): kept for the standby choices of later
// re-protections; its primary is the other end of our primary path.
void take_peer(CommBase& c, std::vector<Candidate> candidates);

// The communicator's traffic class and service level, on the comm and each of its paths.
void set_qos(CommBase& c, const Qos& q);

// Names c member `index` (0-based) of the `count` connections of a fused device over `ports` (its
// ports' names joined by '+'), whose next member's port here is `sibling`: CommBase::member,
// CommBase::sibling, and its id for log lines. Nothing for count 1. Before the comm is shared with
// another thread.
void name_member(CommBase& c, const std::string& ports, int index, int count, const Device* sibling);

// A comm NCCL never got (or will never get): its QPs go to ERROR and its paths to the reaper,
// as closeSend / closeRecv do; nothing is destroyed on the calling thread.
void discard(CommBase& c);

// Discards the handshake's comm unless it was handed on (moved out) by then: a handshake that
// fails or is refused leaves its QPs to the reaper.
template <class C>
struct DiscardUnclaimed {
  std::shared_ptr<C>& comm;
  ~DiscardUnclaimed() {
    if (comm) discard(*comm);
  }
};

// A connection's own pair of ports down at either end (topology.hpp home_pair_up): why, naming the
// ports ("its own pair rxe0:1 <-> the peer's device 0 is down (here)"); `mine` / `theirs` are this
// side's and the peer's candidates of the handshake.
std::string home_down_reason(const Device& dev, std::span<const Candidate> mine, std::span<const Candidate> theirs);
// The same when its primary QP did not connect here (`why`) although both ports were listed up,
// and when the peer's did not (it set kStartOnStandby).
std::string primary_failed_reason(const Device& dev, int peer_dev, const std::string& why);
inline constexpr const char* kPeerPrimaryFailed = "the peer could not connect its end of the connection's own pair";
// No pair of ports up at both ends: the error of a connect/accept that cannot start anywhere,
// naming every port of both sides with its state.
Error no_live_pair(std::span<const Candidate> mine, std::span<const Candidate> theirs, const std::string& why);

// The tail of the connected / accepted INFO lines for a connected path: " <n> QPs" when it has
// more than one (" split" when messages are split across them), " ECE 0x<options>" when its QPs
// were connected with ECE (net/ece.hpp); "" for one QP without ECE.
std::string path_note(const Path& p);

// Which end of the handshake runs phase two (the listener's standby endpoint goes first).
enum class StandbySide { listener, connector };

// A connection whose own pair is down starts on its standby pair (issue #19): phase two runs
// before the comm is handed over, on the handshake socket, both sides. Once that path is up the
// comm is as after a failover away from home: slot 1 active, slot 0 without a path and its standby
// "down" (`why`), so re-protection rebuilds slot 0 - at home once its port is back, where a
// failback (HA_NCCL_ENABLE_FAILBACK) returns the traffic. An error when that path did not come up.
boost::asio::awaitable<Status> start_on_standby(Channel& ch, CommBase& c, const net::Endpoint& remote, Millis timeout,
                                                const std::string& why, StandbySide side);

// Phase two: connects the standby QP and agrees with the peer that both ends are up, then
// publishes Path::link. The comm may already be in NCCL's hands (and even closed: `path` is
// shared); only the Path is touched here.
boost::asio::awaitable<void> run_standby(Channel& ch, Path& path, const net::Endpoint& remote, Millis timeout,
                                         StandbySide side);

}  // namespace nccl_ha::plugin::hs
