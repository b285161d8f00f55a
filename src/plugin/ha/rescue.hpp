// Rescue: re-protection when no RDMA path of a connection is left.
//
// Re-protection (reprotect.cpp) talks over the active path. When the active path and the standby
// are lost together (two ports at once, on one host or one on each, or the second before the
// standby was rebuilt), there is no RDMA path to talk over, yet another pair of ports may be up at
// both ends. Then the same conversation runs over TCP, between the two processes' rescue
// services:
//
//   send side (drives)                            receive side (answers)
//   the ReprotectMsg request, TCP, to the
//   peer's rescue point (its handshake socket's
//   address, the port and the comm's id from
//   its handshake message), sealed with the
//   connection's rescue key (rescue_wire.hpp) -->  the service finds the comm by id, checks the
//                                                 seal, that it comes from the peer's address,
//                                                 that the comm is a receive comm with a standby
//                                                 slot and that the attempt is newer than any it
//                                                 took (the sender sees the loss first: the
//                                                 receiver may not have noticed it yet); then it
//                                                 hands the comm the request as if it had come
//                                                 over RDMA;
//                                <------------    the comm's answer (its endpoint or why not)
//   the answer, handed to the comm                goes back over the same connection
//   the hello over the new path, as always; the standby is up; then the ordinary failover onto
//   it replays what the lost path had in flight, exactly once.
//
// One TCP connection per exchange, closed after the answer: no descriptor per connection in peace
// time (the service's one listening socket per process). Everything here runs on the progress
// thread; a comm's RescueState is touched only there, by the service and the control plane.
//
// Who is heard: a connection to the service is admitted unproven (admission.hpp, the budget the
// listeners share) and must send a request sealed with the key of the connection it names within
// the admission deadline; anything else is closed without a byte sent back. A proven request that
// the comm's state does not call for (a rescue's request to a send comm or to a single-path comm,
// a check to a receive comm, an attempt not newer than the last one taken, a source other than the
// peer's address) is dropped and counted (RescueService::dropped). The ids are not secrets: the
// key is the proof. Over a path, a rescue's request is never taken (reprotect.cpp: request_action).
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/conn_msg.hpp"
#include "core/rescue_state.hpp"
#include "ha/face.hpp"
#include "nccl_ha/net/auth.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::plugin {

struct CommBase;
struct ReprotectMsg;


// The process's rescue service: a TCP listener on the handshake address, run on the reactor.
class RescueService {
 public:
  // Listens on `ip` (the handshake address), any port, and starts accepting.
  static Expected<std::shared_ptr<RescueService>> start(const std::string& ip);
  std::uint16_t port() const noexcept { return port_; }
  // An id for `c`, whose rescue requests the service hands it from now on; withdraw() at close.
  std::uint64_t enroll(const std::shared_ptr<CommBase>& c);
  // Close: the service forgets the comm, but keeps its key and peer for a while (kClosedMemory of
  // them), to tell the peer's proven requests that the connection is closed here.
  void withdraw(std::uint64_t token, const net::Key& key, const boost::asio::ip::address& peer);
  struct Closed {
    net::Key key{};
    boost::asio::ip::address peer;
  };
  // The comm of `token` (null: none enrolled), or the key and peer of one closed not long ago.
  std::shared_ptr<CommBase> find(std::uint64_t token);
  std::optional<Closed> find_closed(std::uint64_t token);
  void stop();  // progress thread: closes the listener
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  void count_dropped() noexcept { dropped_.fetch_add(1, std::memory_order_relaxed); }

  static constexpr std::size_t kClosedMemory = 4096;
  struct Impl;
  std::shared_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
  std::mutex mutex_;  // enroll / withdraw come from NCCL's thread and the handshakes
  std::unordered_map<std::uint64_t, std::weak_ptr<CommBase>> comms_;
  std::unordered_map<std::uint64_t, Closed> closed_;
  std::deque<std::uint64_t> closed_order_;
  std::atomic<std::uint64_t> dropped_{0};  // proven requests not acted on (rescue.hpp: who is heard)
};

// rescue_point, take_rescue_point: face.hpp (setup's calls).
// Close (comm_closing, comm_discarded): the service forgets the comm.
void withdraw_rescue(CommBase& c);

// Whether the comm can try a rescue: both sides have the service, and one of our ports is up.
bool rescue_possible(const CommBase& c);
// Send side, rescue on: sends the ReprotectMsg in c.ctrl_out.reprotect to the peer; its answer
// (or a refusal with the reason in c.cp.rescue().why) lands in c.cp.rescue().mail and wakes the comm.
void rescue_send(CommBase& c);
// Receive side: whether an exchange waits for our answer; then the answer goes there.
bool rescue_answer(CommBase& c, const ReprotectMsg& m);
// start_failover, comm held: the failover found no usable standby (`what` says what failed).
// True: it waits for a rescue (begun now, if possible; the failover asks again at every step).
// False: no rescue (not possible, or given up: `gave_up` says why, e.g. the last port here went
// down while it waited) - the comm fails.
bool wait_for_rescue(CommBase& c, const std::string& what, std::uint64_t now, std::string& gave_up);
// The comm failed (fail_comm): the peer's rescue requests are refused at once, with `why`.
void refuse_rescues(CommBase& c, const std::string& why);
// The rescue under way cannot succeed (no pair took a new path): the failover waiting for it fails.
void rescue_hopeless(CommBase& c, const std::string& why);
// The failover goes ahead on the rescued standby: says so.
void end_rescue(CommBase& c, std::uint64_t now);
// Control plane, comm held: a message that came over TCP is moved to where RDMA would have
// written it (ControlBlock::reprotect, the inbox). Returns true if one was delivered.
bool deliver_rescue_mail(CommBase& c);

}  // namespace nccl_ha::plugin
