// Comm and path creation (local work only: CQs, QPs in RESET, the comm's own registrations).
#include "core/comm.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/reaper.hpp"

namespace nccl_ha::plugin {
namespace {

constexpr int kRemoteWritable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

Status init_base(const std::shared_ptr<CommBase>& comm, const CommEnv& env, Device& primary, Device* standby) {
  CommBase& c = *comm;
  c.reaper = env.reaper;
  c.devs[0] = &primary;
  c.devs[1] = standby;
  c.home = &primary;
  for (int s = 0; s < kSlots; ++s) {
    if (!c.devs[s]) continue;
    const QueueDepths q = queue_depths(c.kind, *c.devs[s]);
    auto p = make_path(c.reaper, *c.devs[s], s, q.send, q.recv, comm, c.devs[s]->qp_plan);
    if (!p) return std::move(p).error();
    c.paths[s] = std::move(p).value();
  }
  c.paths[0]->link.store(Path::up, std::memory_order_relaxed);  // connected by the handshake itself
  for (int s = 0; s < kSlots; ++s)
    if (c.devs[s])
      if (auto k = register_slot_keys(c, *c.devs[s], s, c.keys[s]); !k) return k;
  if (env.config) {
    const Config& cfg = *env.config;
    c.max_poll = cfg.max_poll;
    c.rto_ns = static_cast<std::uint64_t>(cfg.rto_ms) * 1000000ull;
    c.heartbeat_ns = static_cast<std::uint64_t>(cfg.heartbeat_ms) * 1000000ull;
    c.failover_timeout_ns = static_cast<std::uint64_t>(cfg.failover_timeout_ms) * 1000000ull;
    c.rescue_timeout_ns = static_cast<std::uint64_t>(cfg.rescue_timeout_ms) * 1000000ull;
    c.max_retries = static_cast<std::uint32_t>(cfg.max_retries);
    c.retry_window_ns = static_cast<std::uint64_t>(cfg.retry_window_ms) * 1000000ull;
    c.failback = cfg.enable_failback;
    c.watch_pairs = cfg.enable_standby;
    c.failback_hold_ns = static_cast<std::uint64_t>(cfg.failback_hold_ms) * 1000000ull;
  }
  if (env.hooks) {
    c.hooks.failback_stall_ns = static_cast<std::uint64_t>(env.hooks->failback_stall_ms()) * 1000000ull;
    c.hooks.failback_stall_at = env.hooks->failback_stall_at();
  }
  char id[64];
  std::snprintf(id, sizeof id, "%s comm %p", c.kind == CommKind::send ? "send" : "recv", static_cast<void*>(&c));
  c.id = id;
  return {};
}

}  // namespace

// The comm's own memory is registered without IBV_ACCESS_RELAXED_ORDERING, whatever the rule says
// for NCCL's buffers (rebind.hpp buffer_access). The peer RDMA-writes the control block and the
// FIFO while the CPU here polls them: a clear-to-send entry is read once its `seq` (near its end)
// shows, and then must hold the addresses and keys written before it. With relaxed ordering the
// NIC may let the PCIe writes of one RDMA write pass each other, so `seq` could show first; the
// entry's checksum (read_record) would catch that as "still landing", but strict ordering keeps
// that the exception rather than the rule, and these few hundred bytes gain nothing from RO.
Status register_slot_keys(CommBase& c, Device& d, int slot, SlotKeys& out) {
  auto reg = [&d](void* addr, std::size_t len, int access, net::MrPtr& mr) -> Status {
    auto r = net::register_mr(d.pd.get(), addr, len, access);
    if (!r) return std::move(r).error();
    mr = std::move(r).value();
    return {};
  };
  if (auto s = reg(&c.ctrl, sizeof c.ctrl, kRemoteWritable, out.ctrl); !s) return s;
  if (auto s = reg(&c.ctrl_out, sizeof c.ctrl_out, IBV_ACCESS_LOCAL_WRITE, out.ctrl_out); !s) return s;
  if (c.kind == CommKind::send) {
    auto& sc = static_cast<SendComm&>(c);
    return reg(sc.fifo, sizeof sc.fifo, kRemoteWritable, out.ring);
  }
  auto& rc = static_cast<RecvComm&>(c);
  if (auto s = reg(rc.outbox, sizeof rc.outbox, IBV_ACCESS_LOCAL_WRITE, out.ring); !s) return s;
  if (rc.flush_on) return reg(&rc.flush_sink[slot], sizeof rc.flush_sink[slot], IBV_ACCESS_LOCAL_WRITE, out.flush_sink);
  return {};
}

std::uint64_t record_check(const void* data, std::size_t len) noexcept {
  const auto* b = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  for (; i < len; ++i) {
    h = (h ^ b[i]) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 31;
  }
  h ^= h >> 33;
  return h ? h : 1;  // never 0: an all-zero (never written) record does not check
}

std::uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

net::QpTimeouts rc_attrs(const Path& p) {
  net::QpTimeouts t = p.dev->timeouts;
  t.traffic_class = p.qos.traffic_class;
  t.service_level = p.qos.service_level;
  return t;
}

Expected<std::shared_ptr<Path>> make_path(Reaper* reaper, Device& dev, int slot, int send_depth, int recv_depth,
                                          std::weak_ptr<CommBase> owner, QpPlan qps) {
  // Whoever drops its last reference, the path goes to the reaper (never destroyed on NCCL's
  // thread or the progress thread); without one (tests) it is an ordinary object.
  std::shared_ptr<Path> p = reaper ? reaper->new_path(dev) : std::make_shared<Path>();
  p->dev = &dev;
  p->slot = slot;
  p->nqps = std::clamp(qps.count, 1, net::kMaxEndpointQps);
  const bool wakes = !owner.expired() && dev.channel;
  p->owner = std::move(owner);
  // Unsplit, the QPs share what one QP would carry (each message on one of them); split, each
  // carries a part of every message.
  const int depth = (send_depth + recv_depth) * (qps.split ? p->nqps : 1) + 8;
  p->cq.reset(ibv_create_cq(dev.ctx.get(), depth, wakes ? &p->owner : nullptr, wakes ? dev.channel.get() : nullptr, 0));
  if (!p->cq) return errno_error(Errc::verbs, "ibv_create_cq(" + std::to_string(depth) + ")", errno);
  net::QpCaps caps;
  caps.max_send_wr = static_cast<std::uint32_t>(send_depth);
  caps.max_recv_wr = static_cast<std::uint32_t>(recv_depth);
  for (int i = 0; i < p->nqps; ++i) {
    auto qp = net::create_rc_qp(dev.pd.get(), p->cq.get(), p->cq.get(), caps);
    if (!qp) return std::move(qp).error();
    p->qps[static_cast<std::size_t>(i)] = std::move(qp).value();
  }
  net::PortInfo port = dev.port;  // its address as it is now, not as discovery saw it
  if (auto s = net::refresh_address(dev.ctx.get(), port); !s)
    HA_DEBUG("NET/HA: %s: %s (its address as discovered is used)", dev.port.id().c_str(), s.error().message.c_str());
  p->local = net::local_endpoint(p->qp(), port, net::random_psn());
  p->local.qpns = static_cast<std::uint8_t>(p->nqps);
  p->local.split = qps.split && p->nqps > 1;
  for (int i = 1; i < p->nqps; ++i) p->local.more_qpn[static_cast<std::size_t>(i - 1)] = p->qp(i)->qp_num;
  if (dev.offer_ece) {  // what this QP offers the peer (net/ece.hpp): nothing where ECE is unsupported
    auto ece = net::query_ece(p->qp());
    if (!ece) return std::move(ece).error();
    p->local.ece = *ece;
  }
  p->fault_gen = dev.fault_gen.load(std::memory_order_relaxed);
  return p;
}

// The peer's QP i to ours, each with the same ECE: QP 0's exchange (connect_rc_qp) decides it, the
// others get the same (one device, one offer: the same reduction).
Status connect_path(Path& p, const net::Endpoint& remote) {
  const int n = std::min(p.nqps, static_cast<int>(remote.qpns));
  const net::QpTimeouts t = rc_attrs(p);
  net::Ece agreed;
  for (int i = 0; i < n; ++i) {
    net::Endpoint mine = p.local.single(i);
    if (auto s = net::connect_rc_qp(p.qp(i), mine, remote.single(i), t); !s) return s;
    if (i == 0) agreed = mine.ece;
  }
  for (int i = n; i < p.nqps; ++i) {  // still in RESET: never used
    p.qps[static_cast<std::size_t>(i)].reset();
    p.local.more_qpn[static_cast<std::size_t>(i - 1)] = 0;
  }
  p.nqps = n;
  p.local.qpns = static_cast<std::uint8_t>(n);
  p.local.ece = agreed;
  p.local.split = p.local.split && n > 1;  // what this side asks for, as it asked
  p.split = p.local.split && remote.split;
  return {};
}

Status path_to_error(Path& p) {
  Status first;
  for (int i = 0; i < p.nqps; ++i)
    if (p.qp(i))
      if (auto s = net::qp_to_error(p.qp(i)); !s && first) first = std::move(s);
  return first;
}

Status attach_standby(CommBase& c, Device& standby) {
  const QueueDepths q = queue_depths(c.kind, standby);
  auto p = make_path(c.reaper, standby, 1, q.send, q.recv, c.weak_from_this(), standby.qp_plan);
  if (!p) return std::move(p).error();
  SlotKeys keys;
  if (auto s = register_slot_keys(c, standby, 1, keys); !s) return s;
  (*p)->qos = c.qos;
  c.devs[1] = &standby;
  c.paths[1] = std::move(p).value();
  c.keys[1] = std::move(keys);
  return {};
}

Expected<std::shared_ptr<SendComm>> make_send_comm(const CommEnv& env, Device& primary, Device* standby) {
  auto c = std::make_shared<SendComm>();
  if (auto s = init_base(c, env, primary, standby); !s) return std::move(s).error();
  c->nfree = static_cast<int>(c->reqs.size());
  for (std::size_t i = 0; i < c->reqs.size(); ++i) {
    c->free_list[i] = static_cast<std::uint16_t>(c->reqs.size() - 1 - i);
    c->reqs[i].comm = c.get();
  }
  return c;
}

Expected<std::shared_ptr<RecvComm>> make_recv_comm(const CommEnv& env, Device& primary, Device* standby) {
  auto c = std::make_shared<RecvComm>();
  if (auto s = init_base(c, env, primary, standby); !s)
    return std::move(s).error();
  for (auto& r : c->reqs) r.comm = c.get();
  c->flushed.comm = c.get();
  for (auto& r : c->flushes) r.comm = c.get();  // bound from the start: test() of any flush finds its comm
  return c;
}

}  // namespace nccl_ha::plugin
