// listen / connect / accept / closeListen. None of them waits for the peer or the network:
// each does local work and returns; the handshakes run as coroutines on the reactor. Their
// verbs work (creating the comm's CQs, QPs and registrations, the INIT->RTR->RTS transitions,
// the flush QPs) is offloaded to the reactor's workers (co_await Reactor::offload), so that a
// burst of handshakes never sits in front of port events and failovers on the progress thread.
//
//   connector (sender)                         listener (receiver)
//   TCP connect to the handle's address  --->  accept
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
//
// The messages are encoded and checked by conn_msg.cpp, the handle by handle.cpp: nothing is
// created for a connector before its request decoded whole. Whatever a connector sends (garbage,
// another token, half a frame, nothing), its handshake ends with one WARN, within the handshake
// timeout; at most kMaxHandshakes run per listener at once, the rest wait in the kernel's backlog.
//
// Comms that never reach NCCL (queued when the listener is closed, or made by a connect() that is
// never called again before finalize: drop_connect_ops) go the way closeSend / closeRecv send
// theirs: QPs to ERROR, paths to the reaper.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <cstddef>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>

#include "comm.hpp"
#include "conn_msg.hpp"
#include "core.hpp"
#include "datapath.hpp"
#include "handle.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Millis = std::chrono::milliseconds;

// The peer's handshake address for the stats records (an IPv4-mapped address as IPv4).
std::string peer_name(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).to_string();
  return a.to_string();
}

static_assert(kSlots == kConnSlots, "conn_msg.hpp carries one rkey per device slot");

// Handshakes one listener runs at once; more connections wait in the kernel's backlog until one
// ends (each is bounded by the handshake timeout). NCCL connects one connector per listener.
constexpr int kMaxHandshakes = 64;

// Connections on `dev` without a standby: said once per port, side and reason (a WARN when HA is
// on: protection expected and not given, the operator must see it).
void note_unprotected(const Device& dev, const char* side, const std::string& why) {
  static std::mutex once_mutex;
  static std::vector<std::string> logged;
  const std::string key = dev.port.id() + side + why;
  std::lock_guard<std::mutex> lock(once_mutex);
  if (std::find(logged.begin(), logged.end(), key) != logged.end()) return;
  logged.push_back(key);
  if (state()->config.enable_backup)
    HA_WARN("NET/HA: %s comms on %s: single path (%s): NOT protected", side, dev.port.id().c_str(), why.c_str());
  else
    HA_INFO("NET/HA: %s comms on %s: single path (%s)", side, dev.port.id().c_str(), why.c_str());
}

// Why connections from `dev` offer no standby at all ("": they do).
std::string no_standby_here(const Device& dev) {
  if (!state()->config.enable_backup) return "HA_NCCL_ENABLE_BACKUP=0";
  if (dev.backup < 0) return "no other port of its link layer";
  return {};
}

// The address of our memory `addr` and its rkey on the primary's device (the registration `mr` of
// SlotKeys); the standby's rkeys travel with its endpoint (reply, conn_ready).
RemoteKeys keys_of(const CommBase& c, const void* addr, net::MrPtr SlotKeys::*mr) {
  RemoteKeys k;
  k.addr = reinterpret_cast<std::uint64_t>(addr);
  k.rkey[0] = (c.keys[0].*mr)->rkey;
  return k;
}

// The peer's memory: its address, and its rkey on the primary's device into the SlotKeys member `rkey`.
void take_keys(CommBase& c, const RemoteKeys& k, std::uint64_t& addr, std::uint32_t SlotKeys::*rkey) {
  addr = k.addr;
  c.keys[0].*rkey = k.rkey[0];
}

// The peer's ports (its handshake message's candidates): kept for the standby choices of later
// re-protections; its primary is the other end of our primary path.
void take_peer(CommBase& c, std::vector<Candidate> candidates) {
  c.peer_cands = std::move(candidates);
  c.peer_home = primary_dev(c.peer_cands);
  c.paths[0]->peer_dev = c.peer_home;
}

// A comm NCCL never got (or will never get): its QPs go to ERROR and its paths to the reaper,
// as closeSend / closeRecv do; nothing is destroyed on the calling thread.
void discard(CommBase& c) {
  c.closing.store(true, std::memory_order_relaxed);
  account_ports(c);
  for (auto& p : c.paths) {
    if (p && p->qp) (void)net::qp_to_error(p->qp.get());
    retire(std::move(p));
  }
}
void discard(RecvComm& c) {
  close_flush(c);
  discard(static_cast<CommBase&>(c));
}

// Discards the handshake's comm unless it was handed on (moved out) by then: a handshake that
// fails or is refused leaves its QPs to the reaper.
template <class C>
struct DiscardUnclaimed {
  std::shared_ptr<C>& comm;
  ~DiscardUnclaimed() {
    if (comm) discard(*comm);
  }
};

// Drops the standby of a comm whose peer did not take it (before NCCL has the comm).
void make_single_path(CommBase& c) {
  if (c.kind == CommKind::recv) {  // its flush QP on the standby's device goes too
    auto& rc = static_cast<RecvComm&>(c);
    retire(std::move(rc.flush_paths[1]));
    rc.flush_want[1] = false;
  }
  retire(std::move(c.paths[1]));
  c.keys[1] = SlotKeys{};
  c.devs[1] = nullptr;
  c.standby.state = StandbyHealth::none;
  account_ports(c);
}

// Phase two: connects the standby QP and agrees with the peer that both ends are up, then
// publishes Path::link. The comm may already be in NCCL's hands (and even closed: `path` is
// shared); only the Path is touched here.
asio::awaitable<void> run_standby(tcp::socket& sock, Path& path, const net::Endpoint& remote, std::uint64_t token,
                                  Millis timeout) {
  path.remote = remote;
  if (const int ms = state()->config.test_standby_delay_ms; ms > 0) {  // test setting: a slow standby
    asio::steady_timer delay(sock.get_executor(), Millis(ms));
    auto [ec] = co_await delay.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
  }
  auto connect_standby = [&path, &remote] {  // verbs work: on a reactor worker
    auto done = net::connect_rc_qp(path.qp.get(), path.local, remote, rc_attrs(path));
    if (done)
      if (int rc = post_recvs(path, 0, kCtlRecvs); rc != 0) done = errno_error(Errc::verbs, "posting control receives", rc);
    return done;
  };
  auto local = co_await state()->reactor.offload(connect_standby);
  const std::string mine = local ? std::string() : local.error().message;
  const std::vector<std::uint8_t> payload(mine.begin(), mine.end());
  const auto type = static_cast<std::uint16_t>(local ? HandshakeMsg::standby_up : HandshakeMsg::standby_failed);
  auto sent = co_await net::write_frame(sock, type, token, payload, timeout);
  std::string why;
  if (!local) {
    why = "local: " + mine;
  } else if (!sent) {
    why = "telling the peer: " + sent.error().message;
  } else {
    auto theirs = co_await net::read_frame(sock, token, timeout);
    if (!theirs)
      why = "waiting for the peer: " + theirs.error().message;
    else if (theirs->type != static_cast<std::uint16_t>(HandshakeMsg::standby_up))
      why = "the peer: " + std::string(theirs->payload.begin(), theirs->payload.end());
  }
  if (!why.empty()) path.why = why;
  path.link.store(why.empty() ? Path::up : Path::failed, std::memory_order_release);
}

// ------------------------------------------------------------------ connector side

struct ConnectOp {
  enum State {
    pending,  // the handshake runs: connect() answers with a NULL comm
    ready,    // acknowledged by the listener: the next connect() hands `comm` to NCCL
    failed    // the handshake failed (`error`): the next connect() returns ncclSystemError
  };
  std::atomic<int> state{pending};
  CommParams params;               // the connecting communicator's
  std::shared_ptr<SendComm> comm;  // valid once ready
  std::string error;               // valid once failed
  bool dropped = false;            // ConnectOps::mutex: finalize dropped it (drop_connect_ops)
};

// The connects in progress, by Handle::stage. Never destroyed: drop_connect_ops() runs from
// destroy_state(), also at unload from a static destructor in another translation unit, whose
// order against this one's statics is not defined. It is empty once the state is gone.
struct ConnectOps {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::shared_ptr<ConnectOp>> by_stage;
};
ConnectOps& connect_ops() {
  alignas(ConnectOps) static unsigned char storage[sizeof(ConnectOps)];
  static ConnectOps* const ops = ::new (static_cast<void*>(storage)) ConnectOps();
  return *ops;
}

ConnRequest make_request(const SendComm& c, bool offer_standby) {
  ConnRequest r;
  r.primary = c.paths[0]->local;
  r.offer_standby = offer_standby;
  r.fifo = keys_of(c, c.fifo, &SlotKeys::ring);
  r.ctrl = keys_of(c, &c.ctrl, &SlotKeys::ctrl);
  r.qos = c.qos;
  r.candidates = local_candidates(*c.devs[0]);
  return r;
}

// The connector's side of the standby the listener offers: its port of the pair, if the offer is
// one it can take ("" then, else why not).
std::string check_offer(const ConnRequest& sent, const ConnReply& rep) {
  if (!rep.standby) return "the peer offers no standby (HA disabled there, or no standby pair both ends can reach)";
  if (auto s = check_standby_offer(sent, rep); !s) return "the peer's standby offer: " + s.error().message;
  return {};
}

void set_qos(CommBase& c, const Qos& q) {
  c.qos = q;
  for (auto& p : c.paths)
    if (p) p->qos = q;
}

// What phase two needs after the comm was handed over.
struct StandbyPlan {
  std::optional<tcp::socket> sock;
  std::shared_ptr<Path> path;  // null: single path
  net::Endpoint remote{};
};

// Coroutine parameters are references or trivially destructible values: GCC 12 may destroy
// by-value temporaries of a co_await expression twice.
asio::awaitable<Status> run_connect(ConnectOp& op, Device* dev, tcp::endpoint peer, std::uint64_t token, bool peer_ha,
                                    Millis timeout, StandbyPlan& plan) {
  auto sock = co_await net::connect_with_retry(peer, timeout);
  if (!sock) co_return std::move(sock).error();
  std::string unprotected = no_standby_here(*dev);
  if (unprotected.empty() && !peer_ha) unprotected = "the peer offers no standby (HA disabled there, or no backup port)";
  auto create = [dev] { return make_send_comm(*dev, nullptr); };  // verbs work: on a reactor worker
  auto comm = co_await state()->reactor.offload(create);
  if (!comm) co_return std::move(comm).error();
  std::shared_ptr<SendComm> owned = std::move(comm).value();
  const DiscardUnclaimed<SendComm> unclaimed{owned};
  SendComm& c = *owned;
  c.params = op.params;
  set_qos(c, resolve_qos(state()->config, c.params.traffic_class));
  c.peer = peer_name(peer.address());
  const ConnRequest sent = make_request(c, unprotected.empty());
  if (auto s = co_await net::write_frame(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_request), token,
                                         encode_request(sent), timeout); !s)
    co_return s;
  auto reply = co_await net::read_frame_of(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_reply), token, timeout);
  if (!reply) co_return std::move(reply).error();
  auto decoded = decode_reply(reply->payload);
  if (!decoded) co_return std::move(decoded).error();
  const ConnReply& rep = *decoded;
  take_keys(c, rep.ctrl, c.peer_ctrl, &SlotKeys::peer_ctrl);
  take_peer(c, rep.candidates);
  if (unprotected.empty()) unprotected = check_offer(sent, rep);
  ConnReady ready;
  if (unprotected.empty()) {  // our end of the pair the listener chose: a QP and the comm's memory there
    Device* backup = state()->devices[static_cast<std::size_t>(rep.standby->pair.a)].get();
    auto attach = [&c, backup] { return attach_standby(c, *backup); };  // verbs work: on a reactor worker
    if (auto s = co_await state()->reactor.offload(attach); !s) {
      unprotected = "building the standby on " + backup->port.id() + ": " + s.error().message;
    } else {
      c.keys[1].peer_ctrl = rep.standby->ctrl_rkey;
      c.paths[1]->peer_dev = rep.standby->pair.b;
      ready.standby = c.paths[1]->local;
      ready.fifo_rkey = c.keys[1].ring->rkey;
      ready.ctrl_rkey = c.keys[1].ctrl->rkey;
    }
  }
  if (!unprotected.empty()) note_unprotected(*dev, "send", unprotected);
  const net::Endpoint* remote = &rep.primary;
  c.paths[0]->remote = *remote;
  auto connect_primary = [&c, &remote]() -> Status {  // verbs work: on a reactor worker
    if (auto s = net::connect_rc_qp(c.paths[0]->qp.get(), c.paths[0]->local, *remote, rc_attrs(*c.paths[0])); !s) return s;
    if (int rc = post_recvs(*c.paths[0], 0, kCtlRecvs); rc != 0) return errno_error(Errc::verbs, "posting control receives", rc);
    return {};
  };
  if (auto s = co_await state()->reactor.offload(connect_primary); !s) co_return s;
  if (auto s = co_await net::write_frame(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ready), token,
                                         encode_ready(ready), timeout); !s)
    co_return s;
  auto ack = co_await net::read_frame_of(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ack), token, timeout);
  if (!ack) co_return std::move(ack).error();
  HA_INFO("NET/HA: connected %s QP %u -> %s QP %u%s%s (tc %u sl %u)", dev->port.id().c_str(), c.paths[0]->local.qpn,
          peer.address().to_string().c_str(), remote->qpn, c.paths[1] ? ", standby on " : ", single path",
          c.paths[1] ? c.devs[1]->port.id().c_str() : "", c.qos.traffic_class, c.qos.service_level);
  if (c.paths[1]) {
    plan.path = c.paths[1];
    plan.remote = rep.standby->endpoint;
    plan.sock.emplace(std::move(*sock));
  }
  op.comm = std::move(owned);
  co_return Status{};
}

// ------------------------------------------------------------------ listener side

struct ListenState {
  explicit ListenState(asio::io_context& io) : acceptor(io), slot_free(io) {}
  Device* dev = nullptr;
  CommParams params;  // the listening communicator's (v11+)
  std::uint64_t token = 0;
  Millis ack_delay{0};     // HA_NCCL_TEST_ACK_DELAY_MS (tests only)
  tcp::acceptor acceptor;  // progress thread only (after listen() returns)
  int handshakes = 0;      // progress thread: handshakes running (<= kMaxHandshakes)
  asio::steady_timer slot_free;  // progress thread: cancelled when one ends
  std::mutex mutex;        // guards ready / closed / error (accept() vs the progress thread)
  std::deque<std::shared_ptr<RecvComm>> ready;
  bool closed = false;
  std::string error;
};

struct ListenComm {
  std::shared_ptr<ListenState> state;
};

// The last step of an accepted handshake, one step with respect to closeListen(): under the
// listener's mutex, either the listener is closed (nothing is sent, the caller sends the error
// frame), or conn_ack is written whole to the socket and the comm queued for accept(). The ack is
// a non-blocking write of 24 bytes into the socket's empty send buffer; should it not go out
// whole, the comm is not queued and the connector, which reads a truncated frame, fails too. So
// the connector's connect() succeeds only for a comm that was queued before closeListen() (which
// drops it like an unaccepted one: the connector then has a comm whose peer closed it).
enum class AckResult {
  queued,  // conn_ack written whole, the comm queued for accept()
  closed,  // closeListen() came first: nothing sent (the caller sends the error frame)
  failed   // conn_ack could not be written whole (`why`): the comm is not queued
};
AckResult ack_and_queue(ListenState& ls, tcp::socket& sock, std::shared_ptr<RecvComm>& comm, std::string& why) {
  const std::vector<std::uint8_t> ack = net::encode_frame(static_cast<std::uint16_t>(HandshakeMsg::conn_ack), ls.token, {});
  std::lock_guard<std::mutex> lock(ls.mutex);
  if (ls.closed) return AckResult::closed;
  boost::system::error_code ec;
  sock.non_blocking(true, ec);
  const std::size_t n = ec ? 0 : sock.send(asio::buffer(ack), 0, ec);
  if (ec || n != ack.size()) {
    why = "sending the acknowledgement: " + (ec ? ec.message() : std::to_string(n) + " of " + std::to_string(ack.size()) + " bytes");
    return AckResult::failed;
  }
  ls.ready.push_back(std::move(comm));
  return AckResult::queued;
}

asio::awaitable<Status> run_accept_one(ListenState* ls, tcp::socket& sock, Millis timeout) {
  boost::system::error_code peer_ec;
  auto frame = co_await net::read_frame_of(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_request), ls->token, timeout);
  if (!frame) co_return std::move(frame).error();
  auto decoded = decode_request(frame->payload);  // nothing is created for a request that does not decode
  if (!decoded) co_return std::move(decoded).error();
  const ConnRequest& req = *decoded;
  // The standby pair: the best both ends can reach (topology.hpp), our port of it the backup.
  std::string unprotected = no_standby_here(*ls->dev);
  if (unprotected.empty() && !req.offer_standby) unprotected = "the peer offers no standby (HA disabled there, or no backup port)";
  const std::vector<Candidate> mine = local_candidates(*ls->dev);
  std::optional<PortPair> pair;
  if (unprotected.empty()) {
    const auto pairs = rank_standby_pairs(req.candidates, mine, PortPair{primary_dev(req.candidates), ls->dev->index});
    if (pairs.empty())
      unprotected = "no standby pair both ends can reach (different islands, ports down, or no other port of the link layer)";
    else
      pair = pairs.front();
  }
  Device* const backup = pair ? state()->devices[static_cast<std::size_t>(pair->b)].get() : nullptr;
  if (pair)
    HA_INFO("NET/HA: standby of the connection from %s on %s: %s <-> its device %d (%s)",
            peer_name(sock.remote_endpoint(peer_ec).address()).c_str(), ls->dev->port.id().c_str(),
            backup->port.id().c_str(), pair->a,
            explain_pair(req.candidates, mine, *pair, PortPair{primary_dev(req.candidates), ls->dev->index}).c_str());
  // The port counts as carrying this standby from the decision on (the comm counts itself once it
  // exists): handshakes running at once - NCCL opens its channels together - spread their standbys.
  if (backup) backup->standby_comms.fetch_add(1, std::memory_order_relaxed);
  auto create = [ls, backup] { return make_recv_comm(*ls->dev, backup); };  // verbs work: on a reactor worker
  auto comm = co_await state()->reactor.offload(create);
  if (backup) backup->standby_comms.fetch_sub(1, std::memory_order_relaxed);
  if (!comm) co_return std::move(comm).error();
  std::shared_ptr<RecvComm> owned = std::move(comm).value();
  const DiscardUnclaimed<RecvComm> unclaimed{owned};
  RecvComm& c = *owned;
  c.params = ls->params;
  c.peer = peer_name(sock.remote_endpoint(peer_ec).address());
  take_keys(c, req.fifo, c.remote_fifo, &SlotKeys::peer_fifo);
  take_keys(c, req.ctrl, c.peer_ctrl, &SlotKeys::peer_ctrl);
  take_peer(c, req.candidates);
  set_qos(c, req.qos);  // the connector's, as NCCL does
  c.paths[0]->remote = req.primary;
  auto connect_primary = [&c, &req]() -> Status {  // verbs work: on a reactor worker
    if (auto s = net::connect_rc_qp(c.paths[0]->qp.get(), c.paths[0]->local, req.primary, rc_attrs(*c.paths[0])); !s) return s;
    if (int rc = post_recvs(*c.paths[0], 0, kCtlRecvs); rc != 0) return errno_error(Errc::verbs, "posting control receives", rc);
    return setup_flush(c);
  };
  if (auto s = co_await state()->reactor.offload(connect_primary); !s) co_return s;
  ConnReply rep;
  rep.primary = c.paths[0]->local;
  if (c.paths[1]) rep.standby = StandbyOffer{*pair, c.paths[1]->local, c.keys[1].ctrl->rkey};
  rep.ctrl = keys_of(c, &c.ctrl, &SlotKeys::ctrl);
  rep.candidates = mine;
  const std::vector<std::uint8_t> reply = encode_reply(rep);
  if (auto s = co_await net::write_frame(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_reply), ls->token, reply, timeout); !s)
    co_return s;
  auto ready_frame = co_await net::read_frame_of(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ready), ls->token, timeout);
  if (!ready_frame) co_return std::move(ready_frame).error();
  auto ready = decode_ready(ready_frame->payload);
  if (!ready) co_return std::move(ready).error();
  if (c.paths[1] && ready->standby) {  // the connector built its end: the keys of its memory on its port of the pair
    c.keys[1].peer_fifo = ready->fifo_rkey;
    c.keys[1].peer_ctrl = ready->ctrl_rkey;
    c.paths[1]->peer_dev = pair->a;
  } else if (c.paths[1]) {
    unprotected = "the peer could not build its end of the standby";
    make_single_path(c);
  }
  if (!unprotected.empty()) note_unprotected(*ls->dev, "recv", unprotected);
  HA_INFO("NET/HA: accepted on %s QP %u <- QP %u%s%s (tc %u sl %u)", ls->dev->port.id().c_str(), c.paths[0]->local.qpn,
          req.primary.qpn, c.paths[1] ? ", standby on " : ", single path", c.paths[1] ? c.devs[1]->port.id().c_str() : "",
          c.qos.traffic_class, c.qos.service_level);
  if (ls->ack_delay.count() > 0) {  // tests only: the window in which closeListen() may come
    HA_WARN("NET/HA: test setting HA_NCCL_TEST_ACK_DELAY_MS: holding the acknowledgement of the connection from %s "
            "on %s for %lld ms", c.peer.c_str(), ls->dev->port.id().c_str(), static_cast<long long>(ls->ack_delay.count()));
    asio::steady_timer hold(sock.get_executor(), ls->ack_delay);
    auto [ec] = co_await hold.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
  }
  const std::shared_ptr<Path> standby_path = c.paths[1];
  std::string why;
  switch (ack_and_queue(*ls, sock, owned, why)) {
    case AckResult::queued:
      break;
    case AckResult::failed:
      co_return make_error(Errc::closed, why);
    case AckResult::closed: {  // tell the connector, so its connect() fails instead of returning a dead comm
      why = "the listener was closed during the handshake";
      const std::vector<std::uint8_t> reason(why.begin(), why.end());
      auto sent = co_await net::write_frame(sock, static_cast<std::uint16_t>(net::MsgType::error), ls->token, reason, timeout);
      (void)sent;  // best effort: the connector also fails when the socket closes
      co_return make_error(Errc::closed, why);
    }
  }
  if (standby_path) co_await run_standby(sock, *standby_path, *ready->standby, ls->token, timeout);
  co_return Status{};
}

// accept() errors that say nothing about the listener itself (the connection went away before it
// was taken, or the process is out of descriptors / memory for a moment): pause and go on.
bool transient_accept_error(const boost::system::error_code& ec) {
  namespace e = asio::error;
  return ec == e::connection_aborted || ec == e::no_descriptors || ec == e::no_buffer_space || ec == e::no_memory ||
         ec == e::connection_reset || ec == boost::system::errc::protocol_error ||
         ec == boost::system::errc::too_many_files_open_in_system;
}

asio::awaitable<void> run_acceptor(std::shared_ptr<ListenState> ls, Millis timeout) {
  State* st = state();
  constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
  bool paused = false;  // a transient accept() error was WARNed about and not yet followed by a success
  for (;;) {
    while (ls->handshakes >= kMaxHandshakes && ls->acceptor.is_open()) {
      ls->slot_free.expires_at(asio::steady_timer::time_point::max());
      auto [ignored] = co_await ls->slot_free.async_wait(use_tuple);  // cancelled when a handshake ends
      (void)ignored;
    }
    auto [ec, sock] = co_await ls->acceptor.async_accept(use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !ls->acceptor.is_open()) co_return;
      if (transient_accept_error(ec)) {
        if (!paused)
          HA_WARN("NET/HA: listener on %s: accept failed (%s); retrying", ls->dev->port.id().c_str(), ec.message().c_str());
        paused = true;
        asio::steady_timer backoff(ls->acceptor.get_executor(), Millis(100));
        auto [ignored] = co_await backoff.async_wait(use_tuple);
        (void)ignored;
        continue;
      }
      HA_WARN("NET/HA: listener on %s stopped: %s", ls->dev->port.id().c_str(), ec.message().c_str());
      std::lock_guard<std::mutex> lock(ls->mutex);
      ls->error = ec.message();
      co_return;
    }
    paused = false;
    boost::system::error_code ignored;
    const std::string from = sock.remote_endpoint(ignored).address().to_string();
    ++ls->handshakes;
    st->reactor.spawn("handshake from " + from,
                      [](std::shared_ptr<ListenState> l, tcp::socket s, Millis t, std::string who) -> asio::awaitable<void> {
                        auto result = co_await run_accept_one(l.get(), s, t);
                        if (!result)
                          HA_WARN("NET/HA: rejected a connection from %s on %s: %s", who.c_str(),
                                  l->dev->port.id().c_str(), result.error().message.c_str());
                        --l->handshakes;
                        l->slot_free.cancel();
                      }(ls, std::move(sock), timeout, from));
  }
}

}  // namespace

void drop_connect_ops() {
  std::vector<std::shared_ptr<SendComm>> orphans;
  {
    std::lock_guard<std::mutex> lock(connect_ops().mutex);
    for (auto& [id, op] : connect_ops().by_stage) {
      op->dropped = true;  // a handshake still running discards its comm itself
      if (op->comm) orphans.push_back(std::move(op->comm));
    }
    connect_ops().by_stage.clear();
  }
  for (auto& c : orphans) discard(*c);
  if (!orphans.empty())
    HA_INFO("NET/HA: finalize: %zu connection(s) that connect() never returned closed", orphans.size());
}

ncclResult_t listen(const CommParams& params, int dev, void* handle, void** listen_comm) {
  Device* d = device_or_warn(dev, "listen");
  if (!d || !handle || !listen_comm) return ncclInvalidArgument;
  State* st = state();
  auto ls = std::make_shared<ListenState>(st->reactor.context());
  ls->dev = d;
  ls->params = params;
  ls->token = net::random_token();
  ls->ack_delay = Millis(st->config.test_ack_delay_ms);
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(st->handshake_ip, ec);
  tcp::endpoint ep(addr, 0);
  if (!ec) ls->acceptor.open(ep.protocol(), ec);
  if (!ec) ls->acceptor.bind(ep, ec);
  if (!ec) ls->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    HA_WARN("NET/HA: listen on %s (%s) failed: %s", st->handshake_ip.c_str(), st->handshake_if.c_str(),
            ec.message().c_str());
    return ncclSystemError;
  }
  Handle h{};
  h.magic = kHandleMagic;
  h.version = kHandleVersion;
  h.length = sizeof(Handle);
  h.flags = (st->config.enable_backup && d->backup >= 0) ? kOfferStandby : 0;
  const auto local = ls->acceptor.local_endpoint(ec);
  h.port = local.port();
  if (addr.is_v4()) {
    h.family = AF_INET;
    auto b = addr.to_v4().to_bytes();
    std::memcpy(h.addr, b.data(), b.size());
  } else {
    h.family = AF_INET6;
    auto b = addr.to_v6().to_bytes();
    std::memcpy(h.addr, b.data(), b.size());
    h.scope_id = addr.to_v6().scope_id();
  }
  h.token = ls->token;
  std::memcpy(handle, &h, sizeof h);
  st->reactor.spawn("listener on " + d->port.id(), run_acceptor(ls, Millis(st->config.handshake_timeout_ms)));
  auto lc = std::make_unique<ListenComm>();
  lc->state = std::move(ls);
  *listen_comm = lc.release();
  HA_INFO("NET/HA: listening for %s on %s", d->port.id().c_str(), handle_address(h).c_str());
  return ncclSuccess;
}

ncclResult_t connect(const CommParams& params, int dev, void* handle, void** send_comm) {
  if (!send_comm || !handle) return ncclInvalidArgument;
  *send_comm = nullptr;
  Device* d = device_or_warn(dev, "connect");
  if (!d) return ncclInvalidArgument;
  // NCCL's buffer, of any alignment: read as bytes; connect() keeps its stage in it (NCCL passes
  // the same buffer on every call, as for its own IB transport).
  auto* bytes = static_cast<std::uint8_t*>(handle);
  auto decoded = decode_handle(std::span<const std::uint8_t>(bytes, sizeof(Handle)));
  if (!decoded) {
    HA_WARN("NET/HA: connect: rejecting handle: %s", decoded.error().message.c_str());
    return ncclInvalidArgument;
  }
  const Handle& h = *decoded;
  auto set_stage = [bytes](std::uint64_t stage) { std::memcpy(bytes + offsetof(Handle, stage), &stage, sizeof stage); };
  if (h.stage == 0) {  // first call for this connection: start the handshake
    auto op = std::make_shared<ConnectOp>();
    op->params = params;
    std::uint64_t id = net::random_token();
    {
      std::lock_guard<std::mutex> lock(connect_ops().mutex);
      connect_ops().by_stage.emplace(id, op);
    }
    set_stage(id);
    State* st = state();
    st->reactor.spawn("connect to " + handle_address(h),
                      [](std::shared_ptr<ConnectOp> o, Device* dv, tcp::endpoint peer, std::uint64_t token,
                         bool peer_ha, Millis timeout) -> asio::awaitable<void> {
                        StandbyPlan plan;
                        auto s = co_await run_connect(*o, dv, peer, token, peer_ha, timeout, plan);
                        std::shared_ptr<SendComm> orphan;
                        {
                          std::lock_guard<std::mutex> lock(connect_ops().mutex);
                          if (!s) o->error = s.error().message;
                          if (o->dropped) orphan = std::move(o->comm);  // finalize came first
                          o->state.store(s ? ConnectOp::ready : ConnectOp::failed, std::memory_order_release);
                        }
                        if (orphan) discard(*orphan);
                        if (s && plan.path) co_await run_standby(*plan.sock, *plan.path, plan.remote, token, timeout);
                      }(op, d, handle_endpoint(h), h.token, (h.flags & kOfferStandby) != 0,
                        Millis(st->config.handshake_timeout_ms)));
    return ncclSuccess;
  }
  std::shared_ptr<ConnectOp> op;
  {
    std::lock_guard<std::mutex> lock(connect_ops().mutex);
    auto& ops = connect_ops().by_stage;
    auto it = ops.find(h.stage);
    if (it == ops.end()) {
      HA_WARN("NET/HA: connect: the handle names no connection in progress (reused or corrupted handle)");
      return ncclInvalidUsage;
    }
    op = it->second;
    if (op->state.load(std::memory_order_acquire) == ConnectOp::pending) return ncclSuccess;
    ops.erase(it);
  }
  set_stage(0);
  if (op->state.load(std::memory_order_acquire) == ConnectOp::failed) {
    HA_WARN("NET/HA: connect to %s on %s failed: %s", handle_address(h).c_str(), d->port.id().c_str(), op->error.c_str());
    return ncclSystemError;
  }
  std::shared_ptr<SendComm> c = std::move(op->comm);
  c->self = c;  // NCCL's reference, until closeSend
  start_control(c);
  *send_comm = c.get();
  return ncclSuccess;
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
  if (!listen_comm || !recv_comm) return ncclInvalidArgument;
  *recv_comm = nullptr;
  auto& ls = *static_cast<ListenComm*>(listen_comm)->state;
  std::lock_guard<std::mutex> lock(ls.mutex);
  if (!ls.ready.empty()) {
    std::shared_ptr<RecvComm> c = std::move(ls.ready.front());
    ls.ready.pop_front();
    c->self = c;  // NCCL's reference, until closeRecv
    start_control(c);
    *recv_comm = c.get();
    return ncclSuccess;
  }
  if (!ls.error.empty()) {
    HA_WARN("NET/HA: accept on %s: the listener failed: %s", ls.dev->port.id().c_str(), ls.error.c_str());
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t close_listen(void* listen_comm) {
  if (!listen_comm) return ncclInvalidArgument;
  std::unique_ptr<ListenComm> lc(static_cast<ListenComm*>(listen_comm));
  std::deque<std::shared_ptr<RecvComm>> unaccepted;  // handshakes completed but never accepted
  {
    std::lock_guard<std::mutex> lock(lc->state->mutex);
    lc->state->closed = true;
    unaccepted.swap(lc->state->ready);
  }
  for (auto& c : unaccepted) discard(*c);
  // The acceptor lives on the progress thread: close it there. Handshakes in flight keep the
  // state alive and drop their comm when they finish.
  if (State* st = state())
    st->reactor.post([ls = lc->state] {
      boost::system::error_code ignored;
      ls->acceptor.close(ignored);
      ls->slot_free.cancel();
    });
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
