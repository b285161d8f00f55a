// Re-protection: after a failover (or when the standby died), a new standby path is built so a
// second failure is survived too - on the old device once its port is ACTIVE again (its GID is
// resolved afresh: it can change after a RoCE flap). Retried with exponential backoff
// (100 ms .. 5 s), never given up while the comm lives.
//
//   send side                                   receive side
//   new QP on devs[slot]
//   ReprotectMsg{endpoint, gen} -- active -->   new QP, INIT->RTR->RTS
//                                <-- active --  ReprotectMsg{endpoint, ok, gen}
//   INIT->RTR->RTS
//   hello = gen ----------- new path ------->   sees hello == gen: standby up
//   the write completed: standby up
// A request with a newer gen replaces whatever the receive side built for an older one.
#include "nccl_ha/net/discovery.hpp"

#include "datapath.hpp"

namespace nccl_ha::plugin {
namespace {

constexpr std::uint64_t kFirstBackoffNs = 100'000'000;
constexpr std::uint64_t kMaxBackoffNs = 5'000'000'000;

int send_depth(const CommBase& c) { return c.kind == CommKind::send ? kSendQueueDepth : kRecvSendQueueDepth; }
int recv_depth(const CommBase& c) { return c.kind == CommKind::send ? 1 : kRecvQueueDepth; }

// A fresh path on the standby slot's device, with the port (and its GID) queried again.
Expected<std::shared_ptr<Path>> fresh_path(CommBase& c, int slot) {
  Device& d = *c.devs[slot];
  if (!d.port_up.load(std::memory_order_relaxed))
    return make_error(Errc::unsupported, d.port.id() + " is not active");
  auto port = net::query_port(d.ctx.get(), d.port.device, d.port.port);
  if (!port) return std::move(port).error();
  if (!port->active()) return make_error(Errc::unsupported, d.port.id() + " is " + net::port_state_name(port->state));
  auto p = make_path(d, slot, send_depth(c), recv_depth(c));
  if (!p) return p;
  (*p)->local = net::local_endpoint((*p)->qp.get(), *port, (*p)->local.psn);
  return p;
}

// Installs `p` as the standby.
void install(CommBase& c, std::shared_ptr<Path> p, std::uint64_t now) {
  p->link.store(Path::up, std::memory_order_relaxed);
  const std::string dev = p->dev->port.id();
  c.paths[p->slot] = std::move(p);
  c.standby.outstanding = false;
  c.standby.misses = 0;
  c.standby.next_ns = now;
  ++c.rp.done;
  c.rp.step = ReprotectState::idle;
  c.rp.backoff_ns = 0;
  set_standby(c, StandbyHealth::up, "re-protected on " + dev);
}

void back_off(CommBase& c, std::uint64_t now, const std::string& why) {
  c.rp.pending.reset();
  c.rp.step = ReprotectState::idle;
  c.rp.backoff_ns = c.rp.backoff_ns ? std::min(c.rp.backoff_ns * 2, kMaxBackoffNs) : kFirstBackoffNs;
  c.rp.next_try_ns = now + c.rp.backoff_ns;
  set_standby(c, StandbyHealth::down, why + "; next re-protection attempt in " +
                                          std::to_string(c.rp.backoff_ns / 1000000) + " ms");
}

// Reads the peer's ReprotectMsg if it is for `gen` (epoch-style: gen last, checked again).
bool read_reprotect(const CommBase& c, std::uint32_t gen, ReprotectMsg& out) {
  if (__atomic_load_n(&c.ctrl.reprotect.gen, __ATOMIC_ACQUIRE) != gen) return false;
  std::memcpy(&out, const_cast<const ReprotectMsg*>(&c.ctrl.reprotect), sizeof out);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&c.ctrl.reprotect.gen, __ATOMIC_ACQUIRE) == gen;
}

void write_reprotect(CommBase& c, const Path& mine, std::uint32_t ok, std::uint32_t gen) {
  ReprotectMsg& m = c.ctrl_out.reprotect;
  const auto bytes = net::encode_endpoint(mine.local);
  std::memcpy(m.endpoint, bytes.data(), sizeof m.endpoint);
  m.ok = ok;
  m.gen = gen;
}

// ---- send side: drives the attempts
void drive(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = c.rp;
  const int slot = c.standby_slot();
  switch (rp.step) {
    case ReprotectState::idle: {
      if (now < rp.next_try_ns) return;
      ++rp.attempts;
      auto p = fresh_path(c, slot);
      if (!p) return back_off(c, now, "re-protection on " + c.devs[slot]->port.id() + ": " + p.error().message);
      rp.pending = std::move(p).value();
      write_reprotect(c, *rp.pending, 1, ++rp.gen);
      if (post_control(c, c.path(), WrKind::reprotect, offsetof(ControlBlock, reprotect), sizeof(ReprotectMsg)) != 0)
        return back_off(c, now, "re-protection: the request could not be posted");
      rp.step = ReprotectState::requested;
      rp.deadline_ns = now + c.failover_timeout_ns;
      set_standby(c, StandbyHealth::connecting, "re-protecting on " + c.devs[slot]->port.id());
      return;
    }
    case ReprotectState::requested: {
      ReprotectMsg answer;
      if (!read_reprotect(c, rp.gen, answer)) {
        if (now > rp.deadline_ns) back_off(c, now, "re-protection: the peer did not answer");
        return;
      }
      if (!answer.ok) return back_off(c, now, "re-protection: the peer cannot build its side");
      auto remote = net::decode_endpoint(std::span<const std::uint8_t>(answer.endpoint, sizeof answer.endpoint));
      if (!remote) return back_off(c, now, "re-protection: " + remote.error().message);
      Path& p = *rp.pending;
      p.remote = *remote;
      if (auto s = net::connect_rc_qp(p.qp.get(), p.local, *remote, p.dev->timeouts); !s)
        return back_off(c, now, "re-protection: " + s.error().message);
      c.ctrl_out.hello = rp.gen;
      if (post_control(c, p, WrKind::hello, offsetof(ControlBlock, hello), sizeof(std::uint64_t)) != 0)
        return back_off(c, now, "re-protection: the hello could not be posted");
      rp.step = ReprotectState::hello;
      rp.deadline_ns = now + c.failover_timeout_ns;
      return;
    }
    case ReprotectState::hello: {
      Path& p = *rp.pending;
      ibv_wc err{};
      err.status = IBV_WC_SUCCESS;
      poll_path(c, p, 4, &err);
      if (err.status != IBV_WC_SUCCESS)
        return back_off(c, now, std::string("re-protection: hello failed: ") + ibv_wc_status_str(err.status));
      if (p.sends_out == 0) return install(c, std::move(rp.pending), now);
      if (now > rp.deadline_ns) back_off(c, now, "re-protection: hello unanswered");
      return;
    }
  }
}

// ---- receive side: answers requests, installs on the hello
void answer(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = c.rp;
  const std::uint32_t gen = __atomic_load_n(&c.ctrl.reprotect.gen, __ATOMIC_ACQUIRE);
  if (gen != rp.gen) {
    ReprotectMsg req;
    if (!read_reprotect(c, gen, req)) return;
    rp.gen = gen;
    ++rp.attempts;
    rp.pending.reset();
    const int slot = c.standby_slot();
    std::uint32_t ok = 0;
    std::string why;
    auto remote = net::decode_endpoint(std::span<const std::uint8_t>(req.endpoint, sizeof req.endpoint));
    auto p = fresh_path(c, slot);
    if (!remote) {
      why = remote.error().message;
    } else if (!p) {
      why = p.error().message;
    } else if (auto s = net::connect_rc_qp((*p)->qp.get(), (*p)->local, *remote, (*p)->dev->timeouts); !s) {
      why = s.error().message;
    } else {
      (*p)->remote = *remote;
      rp.pending = std::move(p).value();
      ok = 1;
    }
    Path dummy;
    write_reprotect(c, rp.pending ? *rp.pending : dummy, ok, gen);
    post_control(c, c.path(), WrKind::reprotect, offsetof(ControlBlock, reprotect), sizeof(ReprotectMsg));
    if (ok) {
      rp.step = ReprotectState::hello;
      set_standby(c, StandbyHealth::connecting, "re-protecting on " + c.devs[slot]->port.id());
    } else {
      set_standby(c, StandbyHealth::down, "re-protection on " + c.devs[slot]->port.id() + ": " + why);
    }
    return;
  }
  if (rp.step == ReprotectState::hello && __atomic_load_n(&c.ctrl.hello, __ATOMIC_ACQUIRE) == rp.gen)
    install(c, std::move(rp.pending), now);
}

}  // namespace

void reprotect(CommBase& c, std::uint64_t now) {
  if (!c.devs[c.standby_slot()]) return;  // single path
  if (c.kind == CommKind::send) {
    const Path* sb = c.paths[c.standby_slot()].get();
    const bool dead = !sb || sb->link.load(std::memory_order_relaxed) == Path::failed;
    if (dead || c.rp.step != ReprotectState::idle) drive(c, now);
  } else {
    answer(c, now);
  }
}

}  // namespace nccl_ha::plugin
