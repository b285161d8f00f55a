// listen / accept / closeListen: the listener's side of the handshake (the connector's is
// connect.cpp; the protocol and what both sides share: handshake_common.hpp; who may talk:
// handshake_auth.hpp). listen() binds the handshake socket, writes the handle (handle.hpp, with
// the listener's secret) and spawns the acceptor on the reactor. Every connection is accepted at
// once and admitted unproven (admission.hpp): it must prove the secret in its first frame within
// seconds, or it is closed without a byte sent back. A proven connection's handshake is a
// coroutine there, its frames sealed (Channel). accept() takes what the handshakes queued; it
// never waits; it only ever returns comms whose peer proved the secret.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/conn_msg.hpp"
#include "core/path_ops.hpp"
#include "core/state.hpp"
#include "datapath/fused.hpp"
#include "ha/face.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "runtime/admission.hpp"
#include "setup/handle.hpp"
#include "setup/handshake_auth.hpp"
#include "setup/handshake_common.hpp"
#include "setup/setup.hpp"

namespace nccl_ha::plugin {
namespace {

namespace asio = boost::asio;
using namespace hs;

struct ListenState {
  explicit ListenState(asio::io_context& io) : acceptor(io) {}
  Device* dev = nullptr;   // its first port (named in log lines)
  DeviceMembers ports;     // its ports: `dev`, or a fused device's members (Handle::members)
  std::string names;       // their names joined by '+' (name_member)
  CommParams params;  // the listening communicator's (v11+)
  std::uint64_t token = 0;  // the handle's public id: the header token of this listener's frames
  net::Key secret{};        // the handle's secret (handshake_auth.hpp)
  Millis ack_delay{0};     // HA_NCCL_TEST_ACK_DELAY_MS (tests only)
  tcp::acceptor acceptor;  // progress thread only (after listen() returns)
  hs::NonceLog nonces;     // progress thread: the connectors' hello nonces seen (replays are refused)
  std::mutex mutex;        // guards ready / members / closed / error (accept() vs the progress thread)
  std::deque<std::shared_ptr<RecvComm>> ready;  // one port: each connection for accept()
  // A fused device: the connection to each member (ConnRequest::member), until all are there and
  // accept() hands them to NCCL as one comm (fused.hpp).
  std::array<std::shared_ptr<RecvComm>, kMaxVDeviceMembers> members;
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
AckResult ack_and_queue(ListenState& ls, Channel& ch, std::shared_ptr<RecvComm>& comm, int member, std::string& why) {
  std::lock_guard<std::mutex> lock(ls.mutex);
  if (ls.closed) return AckResult::closed;
  std::shared_ptr<RecvComm>* place = nullptr;  // a fused device's member's
  if (ls.ports.count > 1) {
    place = &ls.members[static_cast<std::size_t>(member)];
    if (*place) {
      why = "a second connection to the listener's port " + std::to_string(member) + " before the first was accepted";
      return AckResult::failed;
    }
  }
  // Sealed only now: a frame sealed takes the channel's next sequence number, and the error frame
  // that follows a close must have it.
  const std::vector<std::uint8_t> ack = ch.seal(static_cast<std::uint16_t>(HandshakeMsg::conn_ack), {});
  tcp::socket& sock = ch.socket();
  boost::system::error_code ec;
  sock.non_blocking(true, ec);
  const std::size_t n = ec ? 0 : sock.send(asio::buffer(ack), 0, ec);
  if (ec || n != ack.size()) {
    why = "sending the acknowledgement: " + (ec ? ec.message() : std::to_string(n) + " of " + std::to_string(ack.size()) + " bytes");
    return AckResult::failed;
  }
  if (place)
    *place = std::move(comm);
  else
    ls.ready.push_back(std::move(comm));
  return AckResult::queued;
}

// The standby pair of a connection from `from` to our `dev`: the best both ends can reach
// (topology.hpp: rank_standby_pairs on the connector's candidates `req` and ours `mine`), its `b`
// our port; none, with `unprotected` saying why, when there is none or either end offers none.
std::optional<PortPair> choose_standby_pair(const Device& dev, const ConnRequest& req, const std::vector<Candidate>& mine,
                                            const std::string& from, std::string& unprotected) {
  unprotected = no_standby_here(dev);
  if (unprotected.empty() && !req.offer_standby) unprotected = "the peer offers no standby (HA disabled there, or no standby port)";
  if (!unprotected.empty()) return std::nullopt;
  const PortPair primaries{primary_dev(req.candidates), dev.index};
  const auto pairs = rank_standby_pairs(req.candidates, mine, primaries);
  if (pairs.empty()) {
    unprotected = "no standby pair both ends can reach (different islands, ports down, or no other port of the link layer)";
    return std::nullopt;
  }
  const PortPair pair = pairs.front();
  HA_INFO("NET/HA: standby of the connection from %s on %s: %s <-> its device %d (%s)", from.c_str(),
          dev.port.id().c_str(), state()->devices[static_cast<std::size_t>(pair.b)]->port.id().c_str(), pair.a,
          explain_pair(req.candidates, mine, pair, primaries).c_str());
  return pair;
}

// Standbys this process chose on a connector's ports that the connector does not count yet (it
// counts its standby once it built it, just before its conn_ready), by connector - its address and
// rescue port: one process - and device. Added to the loads its requests carry, so that handshakes
// running at once (NCCL opens its channels together) spread over the connector's ports as the
// reservations in Device::standby_comms spread them over ours. Progress thread only.
struct PeerPort {
  std::string host;
  std::uint16_t rescue_port = 0;
  int dev = -1;
  friend auto operator<=>(const PeerPort&, const PeerPort&) = default;
};
std::map<PeerPort, int>& chosen_on_peers() {
  static std::map<PeerPort, int> chosen;
  return chosen;
}

// The connector's candidates with our choices on its ports not yet counted there added to their loads.
std::vector<Candidate> with_our_choices(std::vector<Candidate> theirs, const std::string& host, std::uint16_t rescue_port) {
  for (auto& c : theirs) {
    auto it = chosen_on_peers().find(PeerPort{host, rescue_port, c.dev});
    if (it != chosen_on_peers().end()) c.load = candidate_load(std::size_t{c.load} + static_cast<std::size_t>(it->second));
  }
  return theirs;
}

// One choice on a connector's port, counted in chosen_on_peers() while the handshake runs.
class ChosenOnPeer {
 public:
  ChosenOnPeer(std::string host, std::uint16_t rescue_port, int dev) : key_{std::move(host), rescue_port, dev} {
    if (dev >= 0) ++chosen_on_peers()[key_];
  }
  ~ChosenOnPeer() {
    if (key_.dev < 0) return;
    auto it = chosen_on_peers().find(key_);
    if (it != chosen_on_peers().end() && --it->second <= 0) chosen_on_peers().erase(it);
  }
  ChosenOnPeer(const ChosenOnPeer&) = delete;
  ChosenOnPeer& operator=(const ChosenOnPeer&) = delete;

 private:
  PeerPort key_;
};

// conn_reply: our primary's endpoint, the standby offer (when we built one), our control block's
// keys and our candidate ports.
ConnReply make_reply(const RecvComm& c, const std::optional<PortPair>& pair, std::vector<Candidate> mine,
                     bool start_on_standby) {
  ConnReply rep;
  rep.primary = c.paths[0]->local;
  if (c.paths[1]) rep.standby = StandbyOffer{*pair, c.paths[1]->local, c.keys[1].ctrl->rkey};
  rep.start_on_standby = start_on_standby && c.paths[1];
  rep.ctrl = keys_of(c, &c.ctrl, &SlotKeys::ctrl);
  rep.candidates = std::move(mine);
  return rep;
}

// Where a connection starts: its standby pair (none: `unprotected` says why) and, when its own pair
// is down at either end, why (`home_down`): it then starts on the standby pair. An error when its
// own pair is down and there is no standby pair to start on.
struct Start {
  std::optional<PortPair> pair;
  std::string unprotected;
  std::string home_down;
};
Expected<Start> decide_start(const Device& dev, const ConnRequest& req, const std::vector<Candidate>& mine,
                             const std::string& from) {
  Start s;
  s.pair = choose_standby_pair(dev, req, mine, from, s.unprotected);
  if (home_usable(req.candidates, mine, s.pair.has_value())) return s;
  s.home_down = home_down_reason(dev, mine, req.candidates);
  if (s.pair) return s;
  const bool offered = no_standby_here(dev).empty() && req.offer_standby;  // then no pair was up at both ends
  if (offered) return no_live_pair(mine, req.candidates, s.home_down);
  return make_error(Errc::not_found, s.home_down + ", and " + s.unprotected);
}

void log_accepted(const Device& dev, const RecvComm& c, const ConnRequest& req, const Start& start) {
  if (!start.home_down.empty()) {
    HA_INFO("NET/HA: accepted on %s <- QP %u on the pair through %s QP %u: %s (tc %u sl %u)%s",
            dev.port.id().c_str(), req.primary.qpn, c.devs[1]->port.id().c_str(), c.paths[1]->local.qpn,
            start.home_down.c_str(), c.qos.traffic_class, c.qos.service_level, path_note(*c.paths[1]).c_str());
    return;
  }
  if (!start.unprotected.empty()) note_unprotected(dev, "recv", start.unprotected);
  HA_INFO("NET/HA: accepted on %s QP %u <- QP %u%s%s (tc %u sl %u)%s", dev.port.id().c_str(), c.paths[0]->local.qpn,
          req.primary.qpn, c.paths[1] ? ", standby on " : ", single path", c.paths[1] ? c.devs[1]->port.id().c_str() : "",
          c.qos.traffic_class, c.qos.service_level, path_note(*c.paths[0]).c_str());
}

// HA_NCCL_TEST_ACK_DELAY_MS (tests only): the window in which closeListen() may come.
asio::awaitable<void> hold_ack(const ListenState& ls, Channel& ch, const RecvComm& c) {
  if (!kTestHooks || ls.ack_delay.count() <= 0) co_return;
  HA_WARN("NET/HA: test setting HA_NCCL_TEST_ACK_DELAY_MS: holding the acknowledgement of the connection from %s "
          "on %s for %lld ms", c.peer.c_str(), ls.dev->port.id().c_str(), static_cast<long long>(ls.ack_delay.count()));
  asio::steady_timer hold(ch.socket().get_executor(), ls.ack_delay);
  auto [ec] = co_await hold.async_wait(asio::as_tuple(asio::use_awaitable));
  (void)ec;
}

// Connects the primary QP (unless the connection starts on its standby pair) and builds the flush
// QPs. A primary that does not connect although both ports say up (the link just went, a black
// hole: RoCE finds no route or neighbour) is no reason to fail while a standby pair exists: the
// connection starts there, as with its own pair down (`start.home_down` says why).
asio::awaitable<Status> connect_primary(const Device& dev, RecvComm& c, const ConnRequest& req, Start& start) {
  if (!start.home_down.empty()) set_active_slot(c, 1);  // the flush QP required is the standby's (setup_flush)
  std::string failed;
  auto work = [&c, &req, &failed]() -> Status {  // verbs work: on a reactor worker
    if (c.active() == 0) {
      Status s = connect_path(*c.paths[0], req.primary);
      if (s)
        if (int rc = post_control_recvs(*c.paths[0], kCtlRecvs); rc != 0) s = errno_error(Errc::verbs, "posting control receives", rc);
      if (!s && !c.paths[1]) return s;
      if (!s) {
        failed = s.error().message;
        set_active_slot(c, 1);
      }
    }
    return setup_flush(c);
  };
  if (auto s = co_await state()->reactor.offload(work, reactor::JobOrder::peer_waits); !s) co_return s;
  if (!failed.empty())
    start.home_down = primary_failed_reason(dev, c.peer_home, failed);
  co_return Status{};
}

// The comm, with its standby resources when `standby` is set, and the control plane's record of it.
Expected<std::shared_ptr<RecvComm>> build_recv_comm(const CommEnv& env, Device& dev, Device* standby) {
  auto c = make_recv_comm(env, dev, standby);
  if (c) comm_built(**c);
  return c;
}

// The handshake of a connector that proved the secret (`rescue_key`: the connection's, derived from
// it): every frame through `ch`, sealed.
asio::awaitable<Status> run_accept_one(ListenState* ls, Channel& ch, const net::Key& rescue_key, Millis timeout) {
  tcp::socket& sock = ch.socket();
  boost::system::error_code peer_ec;
  auto frame = co_await ch.recv_of(static_cast<std::uint16_t>(HandshakeMsg::conn_request), timeout);
  if (!frame) co_return std::move(frame).error();
  auto decoded = decode_request(frame->payload);  // nothing is created for a request that does not decode
  if (!decoded) co_return std::move(decoded).error();
  const ConnRequest& req = *decoded;
  if (req.member >= ls->ports.count)
    co_return make_error(Errc::invalid_argument, "connection to port " + std::to_string(req.member) + " of a listener on " +
                                                     std::to_string(ls->ports.count));
  Device& dev = *ls->ports.ports[req.member];  // a fused device's member i: its port i
  const Device* sibling = ls->ports.count > 1 ? ls->ports.ports[(req.member + 1u) % ls->ports.count] : nullptr;
  const std::vector<Candidate> mine = local_candidates(dev, sibling);
  const std::string from = peer_name(sock.remote_endpoint(peer_ec).address());
  ConnRequest ranked = req;  // the loads of the connector's ports as they will be, with our choices for it
  ranked.candidates = with_our_choices(req.candidates, from, req.rescue.port);
  auto decided = decide_start(dev, ranked, mine, from);
  if (!decided) co_return std::move(decided).error();
  Start& start = *decided;
  const std::optional<PortPair>& pair = start.pair;
  const ChosenOnPeer chosen(from, req.rescue.port, pair ? pair->a : -1);  // until its conn_ready (the handshake's end)
  const std::string& home_down = start.home_down;
  Device* const standby = pair ? state()->devices[static_cast<std::size_t>(pair->b)].get() : nullptr;
  // The port counts as carrying this standby from the decision on (the comm counts itself once it
  // exists): handshakes running at once - NCCL opens its channels together - spread their standbys.
  if (standby) standby->standby_comms.fetch_add(1, std::memory_order_relaxed);
  const CommEnv env = state()->comm_env();
  auto create = [env, d = &dev, standby] { return build_recv_comm(env, *d, standby); };  // verbs work: on a reactor worker
  auto comm = co_await state()->reactor.offload(create, reactor::JobOrder::peer_waits);  // the connector waits
  if (standby) standby->standby_comms.fetch_sub(1, std::memory_order_relaxed);
  if (!comm) co_return std::move(comm).error();
  std::shared_ptr<RecvComm> owned = std::move(comm).value();
  const DiscardUnclaimed<RecvComm> unclaimed{owned};
  RecvComm& c = *owned;
  name_member(c, ls->names, req.member, ls->ports.count, sibling);
  c.params = ls->params;
  c.peer = peer_name(sock.remote_endpoint(peer_ec).address());
  take_keys(c, req.fifo, c.remote_fifo, &SlotKeys::peer_fifo);
  take_keys(c, req.ctrl, c.peer_ctrl, &SlotKeys::peer_ctrl);
  take_peer(c, req.candidates);
  take_rescue_point(c, sock.remote_endpoint(peer_ec).address(), req.rescue);
  // The connector's, as NCCL does (NCCL_IB_FIFO_TC aside).
  set_qos(c, receiver_qos(state()->config, req.qos, dev.port.roce()));
  c.paths[0]->remote = req.primary;
  if (auto s = co_await connect_primary(dev, c, req, start); !s) co_return s;
  ConnReply answer = make_reply(c, pair, mine, !home_down.empty());
  answer.rescue = rescue_point(owned, rescue_key);
  const std::vector<std::uint8_t> reply = encode_reply(answer);
  if (auto s = co_await ch.send(static_cast<std::uint16_t>(HandshakeMsg::conn_reply), reply, timeout); !s) co_return s;
  auto ready_frame = co_await ch.recv_of(static_cast<std::uint16_t>(HandshakeMsg::conn_ready), timeout);
  if (!ready_frame) co_return std::move(ready_frame).error();
  auto ready = decode_ready(ready_frame->payload);
  if (!ready) co_return std::move(ready).error();
  if (ready->start_on_standby && !c.paths[1]) co_return make_error(Errc::invalid_argument, "the peer starts on a standby "
                                                                                          "that was not offered");
  if (ready->start_on_standby && home_down.empty())
    start.home_down = kPeerPrimaryFailed;
  if (c.paths[1] && ready->standby) {  // the connector built its end: the keys of its memory on its port of the pair
    c.keys[1].peer_fifo = ready->fifo_rkey;
    c.keys[1].peer_ctrl = ready->ctrl_rkey;
    c.paths[1]->peer_dev = pair->a;
  } else if (c.paths[1]) {
    start.unprotected = "the peer could not build its end of the standby";
    if (!home_down.empty()) co_return make_error(Errc::closed, home_down + ", and " + start.unprotected);
    standby_declined(c);
  }
  if (!home_down.empty())
    if (auto s = co_await start_on_standby(ch, c, *ready->standby, timeout, home_down, StandbySide::listener); !s)
      co_return s;
  log_accepted(dev, c, req, start);
  co_await hold_ack(*ls, ch, c);
  const std::shared_ptr<Path> standby_path = home_down.empty() ? c.paths[1] : nullptr;  // phase two still to run
  std::string why;
  switch (ack_and_queue(*ls, ch, owned, req.member, why)) {
    case AckResult::queued:
      break;
    case AckResult::failed:
      co_return make_error(Errc::closed, why);
    case AckResult::closed:  // the connector is told (run_acceptor), so its connect() fails instead of returning a dead comm
      co_return make_error(Errc::closed, "the listener was closed during the handshake");
  }
  if (standby_path) co_await run_standby(ch, *standby_path, *ready->standby, timeout, StandbySide::listener);
  co_return Status{};
}

// One accepted connection: admitted unproven; closed without a word unless its first frame proves
// the secret within the admission deadline; then its handshake, sealed. A proven connector that
// fails later is told why (sealed: only it can read it as ours).
asio::awaitable<void> serve_connection(std::shared_ptr<ListenState> ls, tcp::socket sock, Millis timeout) {
  Admission& adm = state()->admission;
  boost::system::error_code ec;
  const asio::ip::address from = sock.remote_endpoint(ec).address();
  Admission::Ticket ticket = adm.admit(sock, from);
  auto nc = co_await hs::read_hello(sock, ls->secret, ls->token, ls->nonces, std::min(adm.limits().deadline, timeout));
  if (!nc) {
    adm.refused("listener on " + ls->dev->port.id(), from, nc.error().message);
    co_return;
  }
  // Proven: its place is given back before the reply is written (while the reply waits, the socket
  // has nothing unread, and a burst from its host must not take it for a silent one).
  ticket.proven();
  const net::Nonce proven = *nc;
  auto keys = co_await hs::answer_hello(sock, ls->secret, ls->token, proven, timeout);
  if (!keys) {
    HA_INFO("NET/HA: listener on %s: the connector from %s went away before our answer to its proof: %s",
            ls->dev->port.id().c_str(), from.to_string().c_str(), keys.error().message.c_str());
    co_return;
  }
  Channel ch(sock, keys->session, ls->token, false);
  auto result = co_await run_accept_one(ls.get(), ch, keys->rescue, timeout);
  if (!result) {
    HA_WARN("NET/HA: rejected a connection from %s on %s: %s", from.to_string().c_str(), ls->dev->port.id().c_str(),
            result.error().message.c_str());
    // The connector's connect() fails with our reason, not "peer closed" (best effort: it also
    // fails when the socket closes).
    const std::string& why = result.error().message;
    const std::vector<std::uint8_t> reason(why.begin(), why.begin() + static_cast<std::ptrdiff_t>(std::min(why.size(), hs::kMaxSealedPayload)));
    auto sent = co_await ch.send(static_cast<std::uint16_t>(net::MsgType::error), reason, timeout);
    (void)sent;
  }
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
    st->reactor.spawn("handshake on " + ls->dev->port.id(), serve_connection(ls, std::move(sock), timeout));
  }
}

}  // namespace

ncclResult_t listen(const CommParams& params, int dev, void* handle, void** listen_comm) {
  const auto ports = members_or_warn(dev, "listen");
  if (!ports || !handle || !listen_comm) return ncclInvalidArgument;
  Device* d = &ports->first();
  State* st = state();
  auto ls = std::make_shared<ListenState>(st->reactor.context());
  ls->dev = d;
  ls->ports = *ports;
  for (int i = 0; i < ports->count; ++i) ls->names += (i ? "+" : "") + ports->ports[static_cast<std::size_t>(i)]->name;
  ls->params = params;
  ls->token = net::random_token();
  ls->secret = net::random_key();
  ls->ack_delay = Millis(st->hooks.ack_delay_ms());
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
  const std::uint32_t flags = (st->config.enable_standby && d->standby_port >= 0) ? kOfferStandby : 0;
  const Handle h =
      make_handle(tcp::endpoint(addr, ls->acceptor.local_endpoint(ec).port()), ls->token, ls->secret, flags, ports->count);
  std::memcpy(handle, &h, sizeof h);
  st->reactor.spawn("listener on " + d->port.id(), run_acceptor(ls, Millis(st->config.handshake_timeout_ms)));
  auto lc = std::make_unique<ListenComm>();
  lc->state = std::move(ls);
  *listen_comm = lc.release();
  HA_INFO("NET/HA: listening for %s on %s", d->port.id().c_str(), handle_address(h).c_str());
  return ncclSuccess;
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
  if (!listen_comm || !recv_comm) return ncclInvalidArgument;
  *recv_comm = nullptr;
  auto& ls = *static_cast<ListenComm*>(listen_comm)->state;
  std::lock_guard<std::mutex> lock(ls.mutex);
  if (ls.ports.count > 1) {  // a fused device: once every member's connection is there
    const auto n = static_cast<std::size_t>(ls.ports.count);
    if (std::all_of(ls.members.begin(), ls.members.begin() + static_cast<std::ptrdiff_t>(n), [](const auto& c) { return c != nullptr; })) {
      std::vector<std::shared_ptr<CommBase>> comms;
      for (std::size_t i = 0; i < n; ++i) {
        std::shared_ptr<RecvComm> c = std::move(ls.members[i]);
        c->self = c;  // NCCL's reference, until closeRecv
        start_control(c);
        comms.push_back(std::move(c));
      }
      *recv_comm = to_nccl(make_fused(CommKind::recv, comms).release());  // NCCL's until closeRecv
      return ncclSuccess;
    }
  } else if (!ls.ready.empty()) {
    std::shared_ptr<RecvComm> c = std::move(ls.ready.front());
    ls.ready.pop_front();
    c->self = c;  // NCCL's reference, until closeRecv
    start_control(c);
    *recv_comm = to_nccl(c.get());
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
    for (auto& c : lc->state->members)
      if (c) unaccepted.push_back(std::move(c));
  }
  for (auto& c : unaccepted) discard(*c);
  // The acceptor lives on the progress thread: close it there. Handshakes in flight keep the
  // state alive and drop their comm when they finish.
  if (State* st = state())
    st->reactor.post([ls = lc->state] {
      boost::system::error_code ignored;
      ls->acceptor.close(ignored);
    });
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
