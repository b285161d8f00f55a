// listen / connect / accept / closeListen. None of them waits for the peer or the network:
// each does local work and returns; the handshakes run as coroutines on the reactor.
//
//   connector (sender)                         listener (receiver)
//   TCP connect to the handle's address  --->  accept
//   conn_request {QP endpoint, FIFO addr/rkey, token}
//                                              create QP, INIT->RTR->RTS
//                                        <---  conn_reply {QP endpoint}
//   INIT->RTR->RTS
//   conn_ready                           --->  the recv comm is queued for accept(), unless
//                                              closeListen() came first: then an error frame
//                                        <---  conn_ack
//   the send comm is handed to connect()       (a connect() in flight when the listener is
//                                               closed fails instead of returning a dead comm)
#include <arpa/inet.h>
#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "comm.hpp"
#include "core.hpp"
#include "handle.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Millis = std::chrono::milliseconds;

constexpr std::size_t kRequestSize = net::kEndpointSize + 8 + 4 + 4;

// ------------------------------------------------------------------ connector side

struct ConnectOp {
  enum State { pending, ready, failed };
  std::atomic<int> state{pending};
  std::unique_ptr<SendComm> comm;  // valid once ready
  std::string error;               // valid once failed
};

std::mutex g_ops_mutex;
std::unordered_map<std::uint64_t, std::shared_ptr<ConnectOp>> g_ops;  // by Handle::stage

std::vector<std::uint8_t> encode_request(const SendComm& c) {
  std::vector<std::uint8_t> out = net::encode_endpoint(c.local);
  net::ByteWriter w(out);
  w.u64(reinterpret_cast<std::uint64_t>(c.fifo));
  w.u32(c.fifo_mr->rkey);
  w.u32(0);
  return out;
}

// Coroutine parameters are references or trivially destructible values: GCC 12 may destroy
// by-value temporaries of a co_await expression twice.
asio::awaitable<Status> run_connect(ConnectOp& op, Device* dev, tcp::endpoint peer, std::uint64_t token,
                                    Millis timeout) {
  auto sock = co_await net::connect_with_retry(peer, timeout);
  if (!sock) co_return std::move(sock).error();
  auto comm = make_send_comm(*dev);
  if (!comm) co_return std::move(comm).error();
  const auto request = encode_request(**comm);
  if (auto s = co_await net::write_frame(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_request), token, request, timeout); !s)
    co_return s;
  auto reply = co_await net::read_frame_of(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_reply), token, timeout);
  if (!reply) co_return std::move(reply).error();
  auto remote = net::decode_endpoint(reply->payload);
  if (!remote) co_return std::move(remote).error();
  if (auto s = net::connect_rc_qp((*comm)->qp.get(), (*comm)->local, *remote, dev->timeouts); !s) co_return s;
  const std::vector<std::uint8_t> none;
  if (auto s = co_await net::write_frame(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ready), token, none, timeout); !s)
    co_return s;
  auto ack = co_await net::read_frame_of(*sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ack), token, timeout);
  if (!ack) co_return std::move(ack).error();
  HA_INFO("NET/HA: connected %s QP %u -> %s QP %u", dev->port.id().c_str(), (*comm)->local.qpn,
          peer.address().to_string().c_str(), remote->qpn);
  op.comm = std::move(comm).value();
  co_return Status{};
}

// ------------------------------------------------------------------ listener side

struct ListenState {
  explicit ListenState(asio::io_context& io) : acceptor(io) {}
  Device* dev = nullptr;
  std::uint64_t token = 0;
  tcp::acceptor acceptor;  // progress thread only (after listen() returns)
  std::mutex mutex;        // guards ready / closed / error (accept() vs the progress thread)
  std::deque<std::unique_ptr<RecvComm>> ready;
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
  return {asio::ip::address_v6(b), h.port};
}

asio::awaitable<Status> run_accept_one(ListenState* ls, tcp::socket& sock, Millis timeout) {
  auto req = co_await net::read_frame_of(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_request), ls->token, timeout);
  if (!req) co_return std::move(req).error();
  if (req->payload.size() != kRequestSize)
    co_return make_error(Errc::bad_length, "connection request of " + std::to_string(req->payload.size()) + " bytes");
  auto remote = net::decode_endpoint(std::span(req->payload).first(net::kEndpointSize));
  if (!remote) co_return std::move(remote).error();
  net::ByteReader r(std::span(req->payload).subspan(net::kEndpointSize));
  auto comm = make_recv_comm(*ls->dev);
  if (!comm) co_return std::move(comm).error();
  std::uint32_t reserved = 0;
  r.u64((*comm)->remote_fifo);
  r.u32((*comm)->remote_fifo_rkey);
  r.u32(reserved);
  if (auto s = net::connect_rc_qp((*comm)->qp.get(), (*comm)->local, *remote, ls->dev->timeouts); !s) co_return s;
  const auto reply = net::encode_endpoint((*comm)->local);
  if (auto s = co_await net::write_frame(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_reply), ls->token, reply, timeout); !s)
    co_return s;
  auto ready = co_await net::read_frame_of(sock, static_cast<std::uint16_t>(HandshakeMsg::conn_ready), ls->token, timeout);
  if (!ready) co_return std::move(ready).error();
  HA_INFO("NET/HA: accepted on %s QP %u <- QP %u", ls->dev->port.id().c_str(), (*comm)->local.qpn, remote->qpn);
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
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

ncclResult_t listen(int dev, void* handle, void** listen_comm) {
  Device* d = device_or_warn(dev, "listen");
  if (!d || !handle || !listen_comm) return ncclInvalidArgument;
  State* st = state();
  auto ls = std::make_shared<ListenState>(st->reactor.context());
  ls->dev = d;
  ls->token = net::random_token();
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(st->handshake_ip, ec);
  tcp::endpoint ep(addr, 0);
  if (!ec) ls->acceptor.open(ep.protocol(), ec);
  if (!ec) ls->acceptor.bind(ep, ec);
  if (!ec) ls->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    HA_WARN("NET/HA: listen on %s failed: %s", st->handshake_ip.c_str(), ec.message().c_str());
    return ncclSystemError;
  }
  Handle h{};
  h.magic = kHandleMagic;
  h.version = kHandleVersion;
  h.length = sizeof(Handle);
  h.flags = 0;
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

ncclResult_t connect(int dev, int /*traffic_class*/, void* handle, void** send_comm) {
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
    std::uint64_t id = net::random_token();
    {
      std::lock_guard<std::mutex> lock(g_ops_mutex);
      g_ops.emplace(id, op);
    }
    h->stage = id;
    State* st = state();
    st->reactor.spawn("connect to " + handle_address(*h),
                      [](std::shared_ptr<ConnectOp> o, Device* dv, tcp::endpoint peer, std::uint64_t token,
                         Millis timeout) -> asio::awaitable<void> {
                        auto s = co_await run_connect(*o, dv, peer, token, timeout);
                        if (!s) o->error = s.error().message;
                        o->state.store(s ? ConnectOp::ready : ConnectOp::failed, std::memory_order_release);
                      }(op, d, handle_endpoint(*h), h->token, Millis(st->config.handshake_timeout_ms)));
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
  *send_comm = op->comm.release();
  return ncclSuccess;
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
  if (!listen_comm || !recv_comm) return ncclInvalidArgument;
  *recv_comm = nullptr;
  auto& ls = *static_cast<ListenComm*>(listen_comm)->state;
  std::lock_guard<std::mutex> lock(ls.mutex);
  if (!ls.ready.empty()) {
    *recv_comm = ls.ready.front().release();
    ls.ready.pop_front();
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
