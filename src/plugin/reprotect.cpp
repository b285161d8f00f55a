// Re-protection: after a failover (or when the standby died), a new standby path is built so a
// second failure is survived too - on the old device once its port is ACTIVE again (its GID is
// resolved afresh: it can change after a RoCE flap). Retried with exponential backoff
// (100 ms .. 5 s), never given up while the comm lives.
//
//   send side                                   receive side
//   [reactor] new QP on devs[slot]
//   ReprotectMsg{endpoint, gen} -- active -->   [reactor] new QP, INIT->RTR->RTS
//                                <-- active --  ReprotectMsg{endpoint, ok, gen}
//   [reactor] INIT->RTR->RTS
//   hello = gen ----------- new path ------->   sees hello == gen: standby up
//   the write completed: standby up
// A request with a newer gen replaces whatever the receive side built for an older one.
// The verbs work ([reactor]: QP creation and state transitions, tens of milliseconds under
// emulation) runs as a PathJob on the progress thread; the data path only looks at its state.
#include <cstring>
#include <functional>

#include "datapath.hpp"
#include "reaper.hpp"
#include "nccl_ha/net/discovery.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {

// Verbs work done on the progress thread for the comm. The comm may be closed meanwhile: the
// job (and its Path) lives as long as either side holds it.
struct PathJob {
  enum : int { running, done, failed };
  std::atomic<int> state{running};
  std::shared_ptr<Path> path;
  std::string why;
};

namespace {

constexpr std::uint64_t kFirstBackoffNs = 100'000'000;
constexpr std::uint64_t kMaxBackoffNs = 5'000'000'000;

std::shared_ptr<PathJob> start_job(std::shared_ptr<Path> path, std::function<Status(PathJob&)> work) {
  auto job = std::make_shared<PathJob>();
  job->path = std::move(path);
  State* st = state();
  st->reactor.post([job, work = std::move(work)] {
    Status s = work(*job);
    if (!s) job->why = s.error().message;
    job->state.store(s ? PathJob::done : PathJob::failed, std::memory_order_release);
  });
  return job;
}

// A fresh path on `dev`, with the port (and its GID) queried again.
Status build_path(PathJob& job, Device& d, int slot, int send_depth, int recv_depth) {
  if (!d.port_up.load(std::memory_order_relaxed)) return make_error(Errc::unsupported, d.port.id() + " is not active");
  auto port = net::query_port(d.ctx.get(), d.port.device, d.port.port);
  if (!port) return std::move(port).error();
  if (!port->active()) return make_error(Errc::unsupported, d.port.id() + " is " + net::port_state_name(port->state));
  auto p = make_path(d, slot, send_depth, recv_depth);
  if (!p) return std::move(p).error();
  (*p)->local = net::local_endpoint((*p)->qp.get(), *port, (*p)->local.psn);
  job.path = std::move(p).value();
  return {};
}

Status connect_path(PathJob& job, const net::Endpoint& remote) {
  Path& p = *job.path;
  p.remote = remote;
  return net::connect_rc_qp(p.qp.get(), p.local, remote, p.dev->timeouts);
}

std::shared_ptr<PathJob> start_build(CommBase& c, int slot, const net::Endpoint* remote_to_connect) {
  Device* d = c.devs[slot];
  const int sd = c.kind == CommKind::send ? kSendQueueDepth : kRecvSendQueueDepth;
  const int rd = c.kind == CommKind::send ? 1 : kRecvQueueDepth;
  const bool connect = remote_to_connect != nullptr;
  const net::Endpoint remote = connect ? *remote_to_connect : net::Endpoint{};
  return start_job(nullptr, [d, slot, sd, rd, connect, remote](PathJob& job) {
    Status s = build_path(job, *d, slot, sd, rd);
    if (s && connect) s = connect_path(job, remote);
    return s;
  });
}

// The job's outcome once finished: 1 done, -1 failed (job->why), 0 still running.
int job_outcome(const PathJob& job) {
  const int s = job.state.load(std::memory_order_acquire);
  return s == PathJob::done ? 1 : s == PathJob::failed ? -1 : 0;
}

// Installs `p` as the standby.
void install(CommBase& c, std::shared_ptr<Path> p, std::uint64_t now) {
  c.rp.job.reset();
  p->link.store(Path::up, std::memory_order_relaxed);
  const std::string dev = p->dev->port.id();
  retire(std::move(c.paths[p->slot]));  // the standby it replaces
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
  retire_job(c);
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

// Writes our ReprotectMsg {endpoint of `mine` (none: zeros), ok, gen} to the peer over the active path.
int post_reprotect(CommBase& c, const Path* mine, std::uint32_t ok, std::uint32_t gen) {
  ReprotectMsg& m = c.ctrl_out.reprotect;
  std::memset(m.endpoint, 0, sizeof m.endpoint);
  if (mine) {
    const auto bytes = net::encode_endpoint(mine->local);
    std::memcpy(m.endpoint, bytes.data(), sizeof m.endpoint);
  }
  m.ok = ok;
  m.gen = gen;
  return post_control(c, c.path(), WrKind::reprotect, offsetof(ControlBlock, reprotect), sizeof(ReprotectMsg));
}

// ---- send side: drives the attempts
void drive(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = c.rp;
  const int slot = c.standby_slot();
  const std::string dev = c.devs[slot]->port.id();
  switch (rp.step) {
    case ReprotectState::idle:
      if (now < rp.next_try_ns) return;
      if (!c.devs[slot]->port_up.load(std::memory_order_relaxed))
        return back_off(c, now, "re-protection on " + dev + ": the port is not active");
      ++rp.attempts;
      rp.job = start_build(c, slot, nullptr);
      rp.step = ReprotectState::building;
      set_standby(c, StandbyHealth::connecting, "re-protecting on " + dev);
      return;
    case ReprotectState::building:
      if (const int o = job_outcome(*rp.job); o == 0) {
        return;
      } else if (o < 0) {
        return back_off(c, now, "re-protection on " + dev + ": " + rp.job->why);
      }
      if (post_reprotect(c, rp.job->path.get(), 1, ++rp.gen) != 0)
        return back_off(c, now, "re-protection: the request could not be posted");
      rp.step = ReprotectState::requested;
      rp.deadline_ns = now + c.failover_timeout_ns;
      return;
    case ReprotectState::requested: {
      ReprotectMsg answer;
      if (!read_reprotect(c, rp.gen, answer)) {
        if (now > rp.deadline_ns) back_off(c, now, "re-protection: the peer did not answer");
        return;
      }
      if (!answer.ok) return back_off(c, now, "re-protection: the peer cannot build its side");
      auto remote = net::decode_endpoint(std::span<const std::uint8_t>(answer.endpoint, sizeof answer.endpoint));
      if (!remote) return back_off(c, now, "re-protection: " + remote.error().message);
      const net::Endpoint r = *remote;
      rp.job = start_job(rp.job->path, [r](PathJob& job) { return connect_path(job, r); });
      rp.step = ReprotectState::connecting;
      return;
    }
    case ReprotectState::connecting: {
      if (const int o = job_outcome(*rp.job); o == 0) {
        return;
      } else if (o < 0) {
        return back_off(c, now, "re-protection: " + rp.job->why);
      }
      c.ctrl_out.hello = rp.gen;
      if (post_control(c, *rp.job->path, WrKind::hello, offsetof(ControlBlock, hello), sizeof(std::uint64_t)) != 0)
        return back_off(c, now, "re-protection: the hello could not be posted");
      rp.step = ReprotectState::hello;
      rp.deadline_ns = now + c.failover_timeout_ns;
      return;
    }
    case ReprotectState::hello: {
      Path& p = *rp.job->path;
      ibv_wc err{};
      err.status = IBV_WC_SUCCESS;
      poll_path(c, p, 4, &err);
      if (err.status != IBV_WC_SUCCESS)
        return back_off(c, now, std::string("re-protection: hello failed: ") + ibv_wc_status_str(err.status));
      if (p.sends_out == 0) return install(c, rp.job->path, now);
      if (now > rp.deadline_ns) back_off(c, now, "re-protection: hello unanswered");
      return;
    }
  }
}

// ---- receive side: answers requests, installs on the hello
void answer(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = c.rp;
  const int slot = c.standby_slot();
  const std::uint32_t gen = __atomic_load_n(&c.ctrl.reprotect.gen, __ATOMIC_ACQUIRE);
  if (gen != rp.gen) {  // a new request: whatever was under way for an older one is dropped
    ReprotectMsg req;
    if (!read_reprotect(c, gen, req)) return;
    rp.gen = gen;
    ++rp.attempts;
    auto remote = net::decode_endpoint(std::span<const std::uint8_t>(req.endpoint, sizeof req.endpoint));
    if (!remote || !c.devs[slot]->port_up.load(std::memory_order_relaxed)) {
      rp.job.reset();
      rp.step = ReprotectState::idle;
      post_reprotect(c, nullptr, 0, gen);
      set_standby(c, StandbyHealth::down, "re-protection on " + c.devs[slot]->port.id() + ": " +
                                              (remote ? "the port is not active" : remote.error().message));
      return;
    }
    rp.job = start_build(c, slot, &*remote);
    rp.step = ReprotectState::building;
    set_standby(c, StandbyHealth::connecting, "re-protecting on " + c.devs[slot]->port.id());
    return;
  }
  if (rp.step == ReprotectState::building) {
    const int o = job_outcome(*rp.job);
    if (o == 0) return;
    post_reprotect(c, o > 0 ? rp.job->path.get() : nullptr, o > 0 ? 1 : 0, gen);
    if (o < 0) {
      set_standby(c, StandbyHealth::down, "re-protection on " + c.devs[slot]->port.id() + ": " + rp.job->why);
      rp.job.reset();
      rp.step = ReprotectState::idle;
      return;
    }
    rp.step = ReprotectState::hello;
    return;
  }
  if (rp.step == ReprotectState::hello && __atomic_load_n(&c.ctrl.hello, __ATOMIC_ACQUIRE) == rp.gen) {
    auto path = rp.job->path;
    install(c, std::move(path), now);
    rp.job.reset();
  }
}

}  // namespace

void retire_job(CommBase& c) {
  if (c.rp.job && job_outcome(*c.rp.job) != 0) retire(std::move(c.rp.job->path));
  c.rp.job.reset();
}

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
