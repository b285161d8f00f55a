// connect(): the connector's side of the handshake (the listener's is listen.cpp; the protocol and
// what both sides share: handshake_common.hpp). connect() never waits for the peer or the
// network: the first call starts the handshake as a coroutine on the reactor and keeps its stage
// in NCCL's handle buffer; later calls answer NULL until it ended, then hand over the comm (or
// fail). The verbs work (creating the comm's CQs, QPs and registrations, INIT->RTR->RTS) is
// offloaded to the reactor's workers. Comms made by a connect() that is never called again
// before finalize are discarded by drop_connect_ops().
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>

#include "core/comm.hpp"
#include "core/conn_msg.hpp"
#include "core/path_ops.hpp"
#include "core/state.hpp"
#include "datapath/fused.hpp"
#include "ha/face.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "setup/handle.hpp"
#include "setup/handshake_auth.hpp"
#include "setup/handshake_common.hpp"
#include "setup/setup.hpp"

namespace nccl_ha::plugin {
namespace {

namespace asio = boost::asio;
using namespace hs;

struct ConnectOp {
  enum State {
    pending,  // the handshake runs: connect() answers with a NULL comm
    ready,    // acknowledged by the listener: the next connect() hands `comm` to NCCL
    failed    // the handshake failed (`error`): the next connect() returns ncclSystemError
  };
  std::atomic<int> state{pending};
  CommParams params;               // the connecting communicator's
  int member = 0;                  // which of the listener's ports (Handle::members) it connects to
  int members = 1;                 // of how many
  std::string fused;               // our ports' names joined by '+' (a fused device's: name_member)
  const Device* sibling = nullptr; // a fused device's: our port of the next member (name_member)
  std::shared_ptr<SendComm> comm;  // valid once ready
  std::string error;               // valid once failed
  bool dropped = false;            // ConnectOps::mutex: finalize dropped it (drop_connect_ops)
};

// One connect() of NCCL: a connection to each of the listener's ports (one, or a fused device's
// members), each its own handshake; NCCL gets them as one comm once all are ready (fused.hpp).
struct ConnectGroup {
  std::vector<std::shared_ptr<ConnectOp>> ops;
  std::string ports;  // ours, for log lines (port ids joined by '+')
};

// The connects in progress, by Handle::stage. Never destroyed: drop_connect_ops() runs from
// destroy_state(), also at unload from a static destructor in another translation unit, whose
// order against this one's statics is not defined. It is empty once the state is gone.
struct ConnectOps {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::shared_ptr<ConnectGroup>> by_stage;
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
  r.candidates = local_candidates(*c.devs[0], c.sibling);
  return r;
}

// The connector's side of the standby the listener offers: its port of the pair, if the offer is
// one it can take ("" then, else why not).
std::string check_offer(const ConnRequest& sent, const ConnReply& rep) {
  if (!rep.standby) return "the peer offers no standby (HA disabled there, or no standby pair both ends can reach)";
  if (auto s = check_standby_offer(sent, rep); !s) return "the peer's standby offer: " + s.error().message;
  return {};
}

// What phase two needs after the comm was handed over: the handshake's socket and channel.
struct StandbyPlan {
  std::optional<tcp::socket> sock;
  std::optional<Channel> channel;  // on `sock`
  std::shared_ptr<Path> path;      // null: single path
  net::Endpoint remote{};
};

// The comm (its standby comes later: attach_counted), and the control plane's record of it.
Expected<std::shared_ptr<SendComm>> build_send_comm(const CommEnv& env, Device& dev) {
  auto c = make_send_comm(env, dev, nullptr);
  if (c) comm_built(**c);
  return c;
}

// The comm's standby resources on `standby`, and the control plane's record of them.
Status attach_counted(SendComm& c, Device& standby) {
  auto s = attach_standby(c, standby);
  if (s) comm_built(c);
  return s;
}

// Our end of the standby pair the listener chose: a QP and the comm's memory there; conn_ready
// carries its endpoint and keys. "" or why not.
asio::awaitable<std::string> attach_offered(SendComm& c, const ConnReply& rep, ConnReady& ready) {
  Device* standby = state()->devices[static_cast<std::size_t>(rep.standby->pair.a)].get();
  auto attach = [&c, standby] { return attach_counted(c, *standby); };  // verbs work: on a reactor worker
  if (auto s = co_await state()->reactor.offload(attach, reactor::JobOrder::peer_waits); !s)
    co_return "building the standby on " + standby->port.id() + ": " + s.error().message;
  c.keys[1].peer_ctrl = rep.standby->ctrl_rkey;
  c.paths[1]->peer_dev = rep.standby->pair.b;
  ready.standby = c.paths[1]->local;
  ready.fifo_rkey = c.keys[1].ring->rkey;
  ready.ctrl_rkey = c.keys[1].ctrl->rkey;
  co_return std::string();
}

void log_connected(const SendComm& c, const Device& dev, const tcp::endpoint& peer, const net::Endpoint& remote,
                   const std::string& home_down) {
  if (!home_down.empty())
    HA_INFO("NET/HA: connected %s -> %s on the pair through %s QP %u: %s (tc %u sl %u)%s", dev.port.id().c_str(),
            peer.address().to_string().c_str(), c.devs[1]->port.id().c_str(), c.paths[1]->local.qpn, home_down.c_str(),
            c.qos.traffic_class, c.qos.service_level, path_note(*c.paths[1]).c_str());
  else
    HA_INFO("NET/HA: connected %s QP %u -> %s QP %u%s%s (tc %u sl %u)%s", dev.port.id().c_str(), c.paths[0]->local.qpn,
            peer.address().to_string().c_str(), remote.qpn, c.paths[1] ? ", standby on " : ", single path",
            c.paths[1] ? c.devs[1]->port.id().c_str() : "", c.qos.traffic_class, c.qos.service_level,
            path_note(*c.paths[0]).c_str());
}

// Coroutine parameters are references or trivially destructible values: GCC 12 may destroy
// by-value temporaries of a co_await expression twice.
asio::awaitable<Status> run_connect(ConnectOp& op, Device* dev, tcp::endpoint peer, std::uint64_t token, net::Key secret,
                                    bool peer_ha, Millis timeout, StandbyPlan& plan) {
  std::string unprotected = no_standby_here(*dev);
  if (unprotected.empty() && !peer_ha) unprotected = "the peer offers no standby (HA disabled there, or no standby port)";
  // The comm first, the connection to the listener then: nobody waits for this job, which may
  // queue behind thousands of others when NCCL opens its connections together, while the
  // listener reads our request under HA_NCCL_HANDSHAKE_TIMEOUT_MS from the moment we connect.
  // Every later job of the handshake has the peer waiting: JobOrder::peer_waits.
  const CommEnv env = state()->comm_env();
  auto create = [env, dev] { return build_send_comm(env, *dev); };  // verbs work: on a reactor worker
  auto comm = co_await state()->reactor.offload(create);
  if (!comm) co_return std::move(comm).error();
  std::shared_ptr<SendComm> owned = std::move(comm).value();
  const DiscardUnclaimed<SendComm> unclaimed{owned};
  auto keys = co_await hs::connect_and_prove(plan.sock, peer, secret, token, timeout);  // we prove the secret first
  if (!keys) co_return std::move(keys).error();
  tcp::socket& sock = *plan.sock;
  Channel& ch = plan.channel.emplace(sock, keys->session, token, true);
  SendComm& c = *owned;
  name_member(c, op.fused, op.member, op.members, op.sibling);
  c.params = op.params;
  set_qos(c, resolve_qos(state()->config, c.params.traffic_class));
  c.peer = peer_name(peer.address());
  ConnRequest request = make_request(c, unprotected.empty());
  request.member = static_cast<std::uint8_t>(op.member);
  request.rescue = rescue_point(owned, keys->rescue);
  const ConnRequest& sent = request;
  if (auto s = co_await ch.send(static_cast<std::uint16_t>(HandshakeMsg::conn_request), encode_request(sent), timeout); !s)
    co_return s;
  auto reply = co_await ch.recv_of(static_cast<std::uint16_t>(HandshakeMsg::conn_reply), timeout);
  if (!reply) co_return std::move(reply).error();
  auto decoded = decode_reply(reply->payload);
  if (!decoded) co_return std::move(decoded).error();
  const ConnReply& rep = *decoded;
  take_keys(c, rep.ctrl, c.peer_ctrl, &SlotKeys::peer_ctrl);
  take_peer(c, rep.candidates);
  take_rescue_point(c, peer.address(), rep.rescue);
  if (unprotected.empty()) unprotected = check_offer(sent, rep);
  // The connection's own pair down at either end or across islands (the listener decided the same
  // from the same lists and its offer), or the listener's primary did not connect: it starts on the
  // standby pair.
  std::string home_down = home_usable(sent.candidates, rep.candidates, rep.standby.has_value())
                              ? std::string()
                              : home_down_reason(*dev, sent.candidates, rep.candidates);
  if (rep.start_on_standby && home_down.empty()) home_down = kPeerPrimaryFailed;
  if (!rep.start_on_standby && !home_down.empty())
    co_return make_error(Errc::invalid_argument, home_down + ", and the peer does not start on the standby pair");
  if (!home_down.empty() && !unprotected.empty()) co_return make_error(Errc::not_found, home_down + ", and " + unprotected);
  ConnReady ready;
  if (unprotected.empty()) unprotected = co_await attach_offered(c, rep, ready);
  if (!home_down.empty() && !ready.standby) co_return make_error(Errc::closed, home_down + ", and " + unprotected);
  if (!unprotected.empty()) note_unprotected(*dev, "send", unprotected);
  const net::Endpoint* remote = &rep.primary;
  c.paths[0]->remote = *remote;
  auto connect_primary = [&c, &remote]() -> Status {  // verbs work: on a reactor worker
    if (auto s = connect_path(*c.paths[0], *remote); !s) return s;
    if (int rc = post_control_recvs(*c.paths[0], kCtlRecvs); rc != 0) return errno_error(Errc::verbs, "posting control receives", rc);
    return {};
  };
  if (home_down.empty()) {
    // A primary that does not connect although both ports say up: the standby pair, if there is one.
    if (auto s = co_await state()->reactor.offload(connect_primary, reactor::JobOrder::peer_waits); !s && !ready.standby) {
      co_return s;
    } else if (!s) {
      home_down = primary_failed_reason(*dev, c.peer_home, s.error().message);
    }
  }
  ready.start_on_standby = !home_down.empty();
  if (auto s = co_await ch.send(static_cast<std::uint16_t>(HandshakeMsg::conn_ready), encode_ready(ready), timeout); !s)
    co_return s;
  if (!home_down.empty())
    if (auto s = co_await start_on_standby(ch, c, rep.standby->endpoint, timeout, home_down, StandbySide::connector);
        !s)
      co_return s;
  auto ack = co_await ch.recv_of(static_cast<std::uint16_t>(HandshakeMsg::conn_ack), timeout);
  if (!ack) co_return std::move(ack).error();
  log_connected(c, *dev, peer, *remote, home_down);
  if (c.paths[1] && home_down.empty()) {  // phase two, after the hand-over, on the same channel
    plan.path = c.paths[1];
    plan.remote = rep.standby->endpoint;
  }
  op.comm = std::move(owned);
  co_return Status{};
}

}  // namespace

void drop_connect_ops() {
  std::vector<std::shared_ptr<SendComm>> orphans;
  {
    std::lock_guard<std::mutex> lock(connect_ops().mutex);
    for (auto& [id, group] : connect_ops().by_stage)
      for (auto& op : group->ops) {
        op->dropped = true;  // a handshake still running discards its comm itself
        if (op->comm) orphans.push_back(std::move(op->comm));
      }
    connect_ops().by_stage.clear();
  }
  for (auto& c : orphans) discard(*c);
  if (!orphans.empty())
    HA_INFO("NET/HA: finalize: %zu connection(s) that connect() never returned closed", orphans.size());
}

namespace {

// The handshake of one member connection, on the reactor.
void spawn_connect(const std::shared_ptr<ConnectOp>& op, Device* dev, const Handle& h) {
  State* st = state();
  st->reactor.spawn("connect to " + handle_address(h),
                    [](std::shared_ptr<ConnectOp> o, Device* dv, tcp::endpoint peer, std::uint64_t token,
                       net::Key secret, bool peer_ha, Millis timeout) -> asio::awaitable<void> {
                      StandbyPlan plan;
                      auto s = co_await run_connect(*o, dv, peer, token, secret, peer_ha, timeout, plan);
                      std::shared_ptr<SendComm> orphan;
                      {
                        std::lock_guard<std::mutex> lock(connect_ops().mutex);
                        if (!s) o->error = s.error().message;
                        if (o->dropped) orphan = std::move(o->comm);  // finalize came first
                        o->state.store(s ? ConnectOp::ready : ConnectOp::failed, std::memory_order_release);
                      }
                      if (orphan) discard(*orphan);
                      if (s && plan.path)
                        co_await run_standby(*plan.channel, *plan.path, plan.remote, timeout, StandbySide::connector);
                    }(op, dev, handle_endpoint(h), h.token, handle_secret(h), (h.flags & kOfferStandby) != 0,
                      Millis(st->config.handshake_timeout_ms)));
}

// What NCCL gets from a group whose handshakes all ended well: its one comm, or the fused comm over
// its members' (each handed to its control plane).
void* hand_over(ConnectGroup& group) {
  std::vector<std::shared_ptr<CommBase>> comms;
  for (auto& op : group.ops) {
    std::shared_ptr<SendComm> c = std::move(op->comm);
    c->self = c;  // NCCL's reference, until closeSend
    start_control(c);
    comms.push_back(std::move(c));
  }
  if (comms.size() == 1) return to_nccl(comms.front().get());
  return to_nccl(make_fused(CommKind::send, comms).release());  // NCCL's until closeSend
}

}  // namespace

ncclResult_t connect(const CommParams& params, int dev, void* handle, void** send_comm) {
  if (!send_comm || !handle) return ncclInvalidArgument;
  *send_comm = nullptr;
  const auto ours = members_or_warn(dev, "connect");
  if (!ours) return ncclInvalidArgument;
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
  if (h.stage == 0) {  // first call for this connection: start the handshakes, one per listener port
    auto group = std::make_shared<ConnectGroup>();
    std::string names;
    for (int i = 0; i < ours->count; ++i) {
      const Device& d = *ours->ports[static_cast<std::size_t>(i)];
      group->ports += (i ? "+" : "") + d.port.id();
      names += (i ? "+" : "") + d.name;
    }
    for (int i = 0; i < h.members; ++i) {
      auto op = std::make_shared<ConnectOp>();
      op->params = params;
      op->member = i;
      op->members = h.members;
      op->fused = names;
      op->sibling = ours->ports[static_cast<std::size_t>((i + 1) % ours->count)];  // member i runs on our port i % count
      if (op->sibling == ours->ports[static_cast<std::size_t>(i % ours->count)]) op->sibling = nullptr;
      group->ops.push_back(std::move(op));
    }
    std::uint64_t id = net::random_token();
    {
      std::lock_guard<std::mutex> lock(connect_ops().mutex);
      connect_ops().by_stage.emplace(id, group);
    }
    set_stage(id);
    // Member i of the listener's from our port i (net_ib pairs a fused device's QPs the same way).
    for (int i = 0; i < h.members; ++i)
      spawn_connect(group->ops[static_cast<std::size_t>(i)], ours->ports[static_cast<std::size_t>(i % ours->count)], h);
    return ncclSuccess;
  }
  std::shared_ptr<ConnectGroup> group;
  {
    std::lock_guard<std::mutex> lock(connect_ops().mutex);
    auto& ops = connect_ops().by_stage;
    auto it = ops.find(h.stage);
    if (it == ops.end()) {
      HA_WARN("NET/HA: connect: the handle names no connection in progress (reused or corrupted handle)");
      return ncclInvalidUsage;
    }
    group = it->second;
    for (const auto& op : group->ops)
      if (op->state.load(std::memory_order_acquire) == ConnectOp::pending) return ncclSuccess;
    ops.erase(it);
  }
  set_stage(0);
  for (const auto& op : group->ops) {
    if (op->state.load(std::memory_order_acquire) != ConnectOp::failed) continue;
    if (group->ops.size() == 1)
      HA_WARN("NET/HA: connect to %s on %s failed: %s", handle_address(h).c_str(), group->ports.c_str(), op->error.c_str());
    else
      HA_WARN("NET/HA: connect to %s on %s failed: its member %d/%zu: %s", handle_address(h).c_str(),
              group->ports.c_str(), op->member + 1, group->ops.size(), op->error.c_str());
    for (auto& other : group->ops)  // the members that did connect go: NCCL gets no comm
      if (other->comm) discard(*other->comm);
    return ncclSystemError;
  }
  *send_comm = hand_over(*group);
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
