// listen / connect / accept / closeListen. None of them waits for the peer or the network:
// each does local work and returns; the handshakes run as coroutines on the reactor. Their
// verbs work (creating the comm's CQs, QPs and registrations, the INIT->RTR->RTS transitions,
// the flush QPs) is offloaded to the reactor's workers (co_await Reactor::offload), so that a
// burst of handshakes never sits in front of port events and failovers on the progress thread.
//
//   connector (sender)                         listener (receiver)
//   TCP connect to the handle's address  --->  accept
//   conn_request {primary + standby endpoints, FIFO and control block addresses/rkeys, token}
//                                              create QPs, primary INIT->RTR->RTS
//                                        <---  conn_reply {primary + standby endpoints, control block}
//   primary INIT->RTR->RTS
//   conn_ready                           --->  the recv comm is queued for accept(), unless
//                                              closeListen() came first: then an error frame
//                                        <---  conn_ack
//   the send comm is handed to connect()       (a connect() in flight when the listener is
//                                               closed fails instead of returning a dead comm)
//   phase two, in the background on the same socket, when both sides offered a standby:
//   standby QP INIT->RTR->RTS                  standby QP INIT->RTR->RTS
//   standby_up / standby_failed          <-->  standby_up / standby_failed
//   Path::link published: the comm starts its heartbeats and may fail over to it.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "comm.hpp"
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

// conn_request: primary endpoint, flags, standby endpoint, FIFO addr + rkey per slot, control
// block addr + rkey per slot, traffic class (u8), service level (u8): the connector decides the
// connection's QoS. conn_reply: primary endpoint, flags, standby endpoint, control block.
constexpr std::size_t kRequestSize = 2 * net::kEndpointSize + 4 + 2 * (8 + 4 * kSlots) + 2;
constexpr std::size_t kReplySize = 2 * net::kEndpointSize + 4 + 8 + 4 * kSlots;
constexpr std::uint32_t kOfferStandby = 1;  // flag bit in requests, replies and handles

// The backup device connections made from `dev` get (nullptr: single path), logging why not once.
Device* backup_for(Device& dev, bool peer_offers, const char* side) {
  State* st = state();
  const char* why = nullptr;
  if (!st->config.enable_backup)
    why = "HA_NCCL_ENABLE_BACKUP=0";
  else if (dev.backup < 0)
    why = "no usable backup port";
  else if (!peer_offers)
    why = "the peer offers no standby (HA disabled there, or no backup port)";
  if (!why) return st->devices[static_cast<std::size_t>(dev.backup)].get();
  static std::mutex once_mutex;
  static std::vector<std::string> logged;
  const std::string key = dev.port.id() + side + why;
  std::lock_guard<std::mutex> lock(once_mutex);
  if (std::find(logged.begin(), logged.end(), key) == logged.end()) {
    logged.push_back(key);
    if (st->config.enable_backup)  // protection expected and not given: the operator must see it
      HA_WARN("NET/HA: %s comms on %s: single path (%s): NOT protected", side, dev.port.id().c_str(), why);
    else
      HA_INFO("NET/HA: %s comms on %s: single path (%s)", side, dev.port.id().c_str(), why);
  }
  return nullptr;
}

void write_keys(net::ByteWriter& w, std::uint64_t addr, const net::MrPtr (&mrs)[kSlots]) {
  w.u64(addr);
  for (const auto& mr : mrs) w.u32(mr ? mr->rkey : 0);
}

bool read_keys(net::ByteReader& r, std::uint64_t& addr, std::uint32_t (&rkeys)[kSlots]) {
  bool ok = r.u64(addr);
  for (auto& k : rkeys) ok = r.u32(k) && ok;
  return ok;
}

// Drops the standby of a comm whose peer did not take it.
void make_single_path(CommBase& c) {
  c.paths[1].reset();
  c.devs[1] = nullptr;
  c.standby.state = StandbyHealth::none;
}

// Phase two: connects the standby QP and agrees with the peer that both ends are up, then
// publishes Path::link. The comm may already be in NCCL's hands (and even closed: `path` is
// shared); only the Path is touched here.
asio::awaitable<void> run_standby(tcp::socket& sock, Path& path, const net::Endpoint& remote, std::uint64_t token,
                                  Millis timeout) {
  path.remote = remote;
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
  enum State { pending, ready, failed };
  std::atomic<int> state{pending};
  CommParams params;               // the connecting communicator's
  std::shared_ptr<SendComm> comm;  // valid once ready
  std::string error;               // valid once failed
};

std::mutex g_ops_mutex;
std::unordered_map<std::uint64_t, std::shared_ptr<ConnectOp>> g_ops;  // by Handle::stage

std::vector<std::uint8_t> encode_request(const SendComm& c) {
  std::vector<std::uint8_t> out = net::encode_endpoint(c.paths[0]->local);
  net::ByteWriter w(out);
  w.u32(c.paths[1] ? kOfferStandby : 0);
  const auto standby = c.paths[1] ? net::encode_endpoint(c.paths[1]->local) : std::vector<std::uint8_t>(net::kEndpointSize);
  out.insert(out.end(), standby.begin(), standby.end());
  write_keys(w, reinterpret_cast<std::uint64_t>(c.fifo), c.fifo_mr);
  write_keys(w, reinterpret_cast<std::uint64_t>(&c.ctrl), c.ctrl_mr);
  w.u8(c.qos.traffic_class);
  w.u8(c.qos.service_level);
  return out;
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
  Device* const backup = backup_for(*dev, peer_ha, "send");
  auto create = [dev, backup] { return make_send_comm(*dev, backup); };  // verbs work: on a reactor worker
  auto comm = co_await state()->reactor.offload(create);
  if (!comm) co_return std::move(comm).error();
  SendComm& c = **comm;
  c.params = op.params;
  set_qos(c, resolve_qos(state()->config, c.params.traffic_class));
  c.peer = peer_name(peer.address());
  const auto request = encode_request(c);
  if (auto s = co_await net::write_frame(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_request), token, request, timeout); !s)
    co_return s;
  auto reply = co_await net::read_frame_of(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_reply), token, timeout);
  if (!reply) co_return std::move(reply).error();
  if (reply->payload.size() != kReplySize)
    co_return make_error(Errc::bad_length, "connection reply of " + std::to_string(reply->payload.size()) + " bytes");
  const std::span<const std::uint8_t> body(reply->payload);
  auto remote = net::decode_endpoint(body.first(net::kEndpointSize));
  auto remote_standby = net::decode_endpoint(body.subspan(net::kEndpointSize + 4, net::kEndpointSize));
  net::ByteReader r(body.subspan(net::kEndpointSize));
  std::uint32_t flags = 0;
  net::ByteReader tail(body.subspan(2 * net::kEndpointSize + 4));
  if (!remote || !r.u32(flags) || !read_keys(tail, c.peer_ctrl, c.peer_ctrl_rkey))
    co_return make_error(Errc::bad_length, "malformed connection reply");
  if (!(flags & kOfferStandby) || !remote_standby) make_single_path(c);
  c.paths[0]->remote = *remote;
  auto connect_primary = [&c, &remote]() -> Status {  // verbs work: on a reactor worker
    if (auto s = net::connect_rc_qp(c.paths[0]->qp.get(), c.paths[0]->local, *remote, rc_attrs(*c.paths[0])); !s) return s;
    if (int rc = post_recvs(*c.paths[0], 0, kCtlRecvs); rc != 0) return errno_error(Errc::verbs, "posting control receives", rc);
    return {};
  };
  if (auto s = co_await state()->reactor.offload(connect_primary); !s) co_return s;
  const std::vector<std::uint8_t> none;
  if (auto s = co_await net::write_frame(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ready), token, none, timeout); !s)
    co_return s;
  auto ack = co_await net::read_frame_of(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ack), token, timeout);
  if (!ack) co_return std::move(ack).error();
  HA_INFO("NET/HA: connected %s QP %u -> %s QP %u%s%s (tc %u sl %u)", dev->port.id().c_str(), c.paths[0]->local.qpn,
          peer.address().to_string().c_str(), remote->qpn, c.paths[1] ? ", standby on " : ", single path",
          c.paths[1] ? c.devs[1]->port.id().c_str() : "", c.qos.traffic_class, c.qos.service_level);
  if (c.paths[1]) {
    plan.path = c.paths[1];
    plan.remote = *remote_standby;
    plan.sock.emplace(std::move(*sock));
  }
  op.comm = std::move(comm).value();
  co_return Status{};
}

// ------------------------------------------------------------------ listener side

struct ListenState {
  explicit ListenState(asio::io_context& io) : acceptor(io) {}
  Device* dev = nullptr;
  CommParams params;  // the listening communicator's (v11+)
  std::uint64_t token = 0;
  tcp::acceptor acceptor;  // progress thread only (after listen() returns)
  std::mutex mutex;        // guards ready / closed / error (accept() vs the progress thread)
  std::deque<std::shared_ptr<RecvComm>> ready;
  bool closed = false;
  std::string error;
};

struct ListenComm {
  std::shared_ptr<ListenState> state;
};

// The listener's address as the (validated) handle gives it.
tcp::endpoint handle_endpoint(const Handle& h) {
  if (h.family == AF_INET) return {asio::ip::address_v4({h.addr[0], h.addr[1], h.addr[2], h.addr[3]}), h.port};
  asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), h.addr, b.size());
  return {asio::ip::address_v6(b, h.scope_id), h.port};
}

asio::awaitable<Status> run_accept_one(ListenState* ls, tcp::socket& sock, Millis timeout) {
  auto req = co_await net::read_frame_of(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_request), ls->token, timeout);
  if (!req) co_return std::move(req).error();
  if (req->payload.size() != kRequestSize)
    co_return make_error(Errc::bad_length, "connection request of " + std::to_string(req->payload.size()) + " bytes");
  const std::span<const std::uint8_t> body(req->payload);
  auto remote = net::decode_endpoint(body.first(net::kEndpointSize));
  if (!remote) co_return std::move(remote).error();
  auto remote_standby = net::decode_endpoint(body.subspan(net::kEndpointSize + 4, net::kEndpointSize));
  net::ByteReader r(body.subspan(net::kEndpointSize));
  std::uint32_t flags = 0;
  r.u32(flags);
  const bool peer_offers = (flags & kOfferStandby) && remote_standby;
  Device* const backup = backup_for(*ls->dev, peer_offers, "recv");
  auto create = [ls, backup] { return make_recv_comm(*ls->dev, backup); };  // verbs work: on a reactor worker
  auto comm = co_await state()->reactor.offload(create);
  if (!comm) co_return std::move(comm).error();
  RecvComm& c = **comm;
  c.params = ls->params;
  boost::system::error_code peer_ec;
  c.peer = peer_name(sock.remote_endpoint(peer_ec).address());
  net::ByteReader keys(body.subspan(2 * net::kEndpointSize + 4));
  Qos qos;
  if (!read_keys(keys, c.remote_fifo, c.remote_fifo_rkey) || !read_keys(keys, c.peer_ctrl, c.peer_ctrl_rkey) ||
      !keys.u8(qos.traffic_class) || !keys.u8(qos.service_level) || qos.service_level > 15)
    co_return make_error(Errc::bad_length, "malformed connection request");
  set_qos(c, qos);  // the connector's, as NCCL does
  c.paths[0]->remote = *remote;
  auto connect_primary = [&c, &remote]() -> Status {  // verbs work: on a reactor worker
    if (auto s = net::connect_rc_qp(c.paths[0]->qp.get(), c.paths[0]->local, *remote, rc_attrs(*c.paths[0])); !s) return s;
    if (int rc = post_recvs(*c.paths[0], 0, kCtlRecvs); rc != 0) return errno_error(Errc::verbs, "posting control receives", rc);
    return setup_flush(c);
  };
  if (auto s = co_await state()->reactor.offload(connect_primary); !s) co_return s;
  std::vector<std::uint8_t> reply = net::encode_endpoint(c.paths[0]->local);
  net::ByteWriter w(reply);
  w.u32(c.paths[1] ? kOfferStandby : 0);
  const auto standby = c.paths[1] ? net::encode_endpoint(c.paths[1]->local) : std::vector<std::uint8_t>(net::kEndpointSize);
  reply.insert(reply.end(), standby.begin(), standby.end());
  write_keys(w, reinterpret_cast<std::uint64_t>(&c.ctrl), c.ctrl_mr);
  if (auto s = co_await net::write_frame(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_reply), ls->token, reply, timeout); !s)
    co_return s;
  auto ready = co_await net::read_frame_of(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ready), ls->token, timeout);
  if (!ready) co_return std::move(ready).error();
  HA_INFO("NET/HA: accepted on %s QP %u <- QP %u%s%s (tc %u sl %u)", ls->dev->port.id().c_str(), c.paths[0]->local.qpn,
          remote->qpn, c.paths[1] ? ", standby on " : ", single path", c.paths[1] ? c.devs[1]->port.id().c_str() : "",
          c.qos.traffic_class, c.qos.service_level);
  const std::shared_ptr<Path> standby_path = c.paths[1];
  bool closed = false;
  {
    std::lock_guard<std::mutex> lock(ls->mutex);
    closed = ls->closed;
    if (!closed) ls->ready.push_back(std::move(comm).value());  // else destroyed below
  }
  if (closed) {  // tell the connector, so its connect() fails instead of returning a dead comm
    const std::string why = "the listener was closed during the handshake";
    const std::vector<std::uint8_t> reason(why.begin(), why.end());
    auto sent = co_await net::write_frame(sock, static_cast<std::uint16_t>(net::MsgType::error), ls->token, reason, timeout);
    (void)sent;  // best effort: the connector also fails when the socket closes
    co_return make_error(Errc::closed, why);
  }
  const std::vector<std::uint8_t> none;
  if (auto s = co_await net::write_frame(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ack), ls->token, none, timeout); !s)
    co_return s;  // the comm stays queued: its peer is gone, which its data path reports
  if (standby_path) co_await run_standby(sock, *standby_path, *remote_standby, ls->token, timeout);
  co_return Status{};
}

asio::awaitable<void> run_acceptor(std::shared_ptr<ListenState> ls, Millis timeout) {
  State* st = state();
  for (;;) {
    auto [ec, sock] = co_await ls->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (ec != asio::error::operation_aborted) {
        HA_WARN("NET/HA: listener on %s stopped: %s", ls->dev->port.id().c_str(), ec.message().c_str());
        std::lock_guard<std::mutex> lock(ls->mutex);
        ls->error = ec.message();
      }
      co_return;
    }
    boost::system::error_code ignored;
    const std::string from = sock.remote_endpoint(ignored).address().to_string();
    st->reactor.spawn("handshake from " + from,
                      [](std::shared_ptr<ListenState> l, tcp::socket s, Millis t, std::string who) -> asio::awaitable<void> {
                        auto result = co_await run_accept_one(l.get(), s, t);
                        if (!result)
                          HA_WARN("NET/HA: rejected a connection from %s on %s: %s", who.c_str(),
                                  l->dev->port.id().c_str(), result.error().message.c_str());
                      }(ls, std::move(sock), timeout, from));
  }
}

}  // namespace

Status validate_handle(const Handle& h) {
  if (h.magic != kHandleMagic) return make_error(Errc::bad_magic, "not an nccl-ha handle (bad magic)");
  if (h.version != kHandleVersion)
    return make_error(Errc::bad_version, "handle version " + std::to_string(h.version) + " (this plugin speaks " +
                                             std::to_string(kHandleVersion) + ")");
  if (h.length != sizeof(Handle)) return make_error(Errc::truncated, "handle length " + std::to_string(h.length));
  if (h.family != AF_INET && h.family != AF_INET6) return make_error(Errc::invalid_argument, "handle address family");
  if (h.port == 0) return make_error(Errc::invalid_argument, "handle port 0");
  if (h.token == 0) return make_error(Errc::bad_token, "handle without token");
  return {};
}

std::string handle_address(const Handle& h) {
  const auto ep = handle_endpoint(h);
  const std::string host = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(ep.port());
}

ncclResult_t listen(const CommParams& params, int dev, void* handle, void** listen_comm) {
  Device* d = device_or_warn(dev, "listen");
  if (!d || !handle || !listen_comm) return ncclInvalidArgument;
  State* st = state();
  auto ls = std::make_shared<ListenState>(st->reactor.context());
  ls->dev = d;
  ls->params = params;
  ls->token = net::random_token();
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
  auto* h = static_cast<Handle*>(handle);
  if (auto s = validate_handle(*h); !s) {
    HA_WARN("NET/HA: connect: rejecting handle: %s", s.error().message.c_str());
    return ncclInvalidArgument;
  }
  if (h->stage == 0) {  // first call for this connection: start the handshake
    auto op = std::make_shared<ConnectOp>();
    op->params = params;
    std::uint64_t id = net::random_token();
    {
      std::lock_guard<std::mutex> lock(g_ops_mutex);
      g_ops.emplace(id, op);
    }
    h->stage = id;
    State* st = state();
    st->reactor.spawn("connect to " + handle_address(*h),
                      [](std::shared_ptr<ConnectOp> o, Device* dv, tcp::endpoint peer, std::uint64_t token,
                         bool peer_ha, Millis timeout) -> asio::awaitable<void> {
                        StandbyPlan plan;
                        auto s = co_await run_connect(*o, dv, peer, token, peer_ha, timeout, plan);
                        if (!s) o->error = s.error().message;
                        o->state.store(s ? ConnectOp::ready : ConnectOp::failed, std::memory_order_release);
                        if (s && plan.path) co_await run_standby(*plan.sock, *plan.path, plan.remote, token, timeout);
                      }(op, d, handle_endpoint(*h), h->token, (h->flags & kOfferStandby) != 0,
                        Millis(st->config.handshake_timeout_ms)));
    return ncclSuccess;
  }
  std::shared_ptr<ConnectOp> op;
  {
    std::lock_guard<std::mutex> lock(g_ops_mutex);
    auto it = g_ops.find(h->stage);
    if (it == g_ops.end()) {
      HA_WARN("NET/HA: connect: the handle names no connection in progress (reused or corrupted handle)");
      return ncclInvalidUsage;
    }
    op = it->second;
    if (op->state.load(std::memory_order_acquire) == ConnectOp::pending) return ncclSuccess;
    g_ops.erase(it);
  }
  h->stage = 0;
  if (op->state.load(std::memory_order_acquire) == ConnectOp::failed) {
    HA_WARN("NET/HA: connect to %s on %s failed: %s", handle_address(*h).c_str(), d->port.id().c_str(), op->error.c_str());
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
  {
    std::lock_guard<std::mutex> lock(lc->state->mutex);
    lc->state->closed = true;
    lc->state->ready.clear();  // handshakes completed but never accepted
  }
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
