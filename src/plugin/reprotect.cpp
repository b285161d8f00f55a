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
// A request with a newer gen replaces whatever the receive side built for an older one. Every
// message is a write with immediate data: its completion wakes the peer's control plane.
// The verbs work ([reactor]: QP creation and state transitions, tens of milliseconds under
// emulation) runs as a PathJob (path_job.hpp) on the reactor's worker threads, never on the
// progress thread; the comm is woken when it is done. On a receive comm with flush QPs
// (flush.cpp) the same job builds a new loopback QP on the standby's device, installed with the
// standby: a flush QP never outlives the port state it was built in.
// A PORT_ACTIVE or GID-change event of the standby's device starts the next attempt at once;
// the backoff only paces attempts that failed.
#include <cstring>
#include <functional>

#include "datapath.hpp"
#include "path_job.hpp"
#include "reaper.hpp"
#include "nccl_ha/net/discovery.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {

namespace {

constexpr std::uint64_t kFirstBackoffNs = 100'000'000;
constexpr std::uint64_t kMaxBackoffNs = 5'000'000'000;

// A fresh path on `dev`, with the port (and its GID) queried again.
Status build_path(PathJob& job, Device& d, int slot, int send_depth, int recv_depth, std::weak_ptr<CommBase> owner) {
  if (!d.port_up.load(std::memory_order_relaxed)) return make_error(Errc::unsupported, d.port.id() + " is not active");
  auto port = net::query_port(d.ctx.get(), d.port.device, d.port.port);
  if (!port) return std::move(port).error();
  if (!port->active()) return make_error(Errc::unsupported, d.port.id() + " is " + net::port_state_name(port->state));
  auto p = make_path(d, slot, send_depth, recv_depth, std::move(owner));
  if (!p) return std::move(p).error();
  (*p)->local = net::local_endpoint((*p)->qp.get(), *port, (*p)->local.psn);
  job.path = std::move(p).value();
  return {};
}

// Connects the job's path and posts its control receives.
Status connect_path(PathJob& job, const net::Endpoint& remote) {
  Path& p = *job.path;
  p.remote = remote;
  if (auto s = net::connect_rc_qp(p.qp.get(), p.local, remote, rc_attrs(p)); !s) return s;
  if (int rc = post_recvs(p, 0, kCtlRecvs); rc != 0) return errno_error(Errc::verbs, "posting control receives", rc);
  return {};
}

std::shared_ptr<PathJob> start_build(CommBase& c, int slot, const net::Endpoint* remote_to_connect) {
  Device* d = c.devs[slot];
  const int sd = c.kind == CommKind::send ? kSendQueueDepth : kRecvSendQueueDepth;
  const int rd = c.kind == CommKind::send ? kSendRecvQueueDepth : kRecvQueueDepth;
  const bool connect = remote_to_connect != nullptr;
  const net::Endpoint remote = connect ? *remote_to_connect : net::Endpoint{};
  const bool flush = c.kind == CommKind::recv && flush_rebuilt_with_standby(static_cast<RecvComm&>(c), slot);
  const std::uint32_t gen = d->recover_gen.load(std::memory_order_relaxed);  // before the port is queried
  return start_job(c, nullptr, [d, slot, sd, rd, connect, remote, flush, gen, qos = c.qos,
                                owner = c.weak_from_this()](PathJob& job) {
    Status s = build_path(job, *d, slot, sd, rd, owner);
    if (s) job.path->qos = qos;  // a rebuilt standby keeps the connection's QoS
    if (s && connect) s = connect_path(job, remote);
    if (s && flush) {  // the device's flush QP too; its failure does not fail the standby
      auto f = build_flush_path(*d, slot);
      if (f) {
        job.flush = std::move(f).value();
        job.flush_gen = gen;
      } else {
        job.flush_why = f.error().message;
      }
    }
    return s;
  });
}

// Installs the job's path as the standby (and, on a receive comm, its flush path).
void install(CommBase& c, PathJob& job, std::uint64_t now) {
  std::shared_ptr<Path> p = job.path;
  if (c.kind == CommKind::recv) offer_flush_path(static_cast<RecvComm&>(c), p->slot, job);
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

// The peer's ReprotectMsg, once one arrived (its completion was seen) and reads whole.
bool read_reprotect(CommBase& c, ReprotectMsg& out) {
  if (!c.inbox.reprotect || !read_record(c.ctrl.reprotect, out)) return false;
  c.inbox.reprotect = false;
  return true;
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
  seal(m);
  return post_control(c, c.path(), WrKind::reprotect, offsetof(ControlBlock, reprotect), sizeof(ReprotectMsg),
                      CtlKind::reprotect);
}

// ---- send side: drives the attempts. Returns when it wants to run again (0: when woken).
std::uint64_t drive(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = c.rp;
  const int slot = c.standby_slot();
  const std::string dev = c.devs[slot]->port.id();
  switch (rp.step) {
    case ReprotectState::idle:
      if (now < rp.next_try_ns) return rp.next_try_ns;
      if (!c.devs[slot]->port_up.load(std::memory_order_relaxed)) {
        back_off(c, now, "re-protection on " + dev + ": the port is not active");
        return rp.next_try_ns;
      }
      ++rp.attempts;
      rp.job = start_build(c, slot, nullptr);
      rp.step = ReprotectState::building;
      set_standby(c, StandbyHealth::connecting, "re-protecting on " + dev);
      return 0;  // the job wakes us
    case ReprotectState::building:
      if (const int o = job_outcome(*rp.job); o == 0) {
        return 0;
      } else if (o < 0) {
        back_off(c, now, "re-protection on " + dev + ": " + rp.job->why);
        return rp.next_try_ns;
      }
      c.inbox.reprotect = false;  // answers to older attempts are of no interest
      if (post_reprotect(c, rp.job->path.get(), 1, ++rp.gen) != 0) {
        back_off(c, now, "re-protection: the request could not be posted");
        return rp.next_try_ns;
      }
      rp.step = ReprotectState::requested;
      rp.deadline_ns = now + c.failover_timeout_ns;
      return rp.deadline_ns;
    case ReprotectState::requested: {
      ReprotectMsg answer;
      if (!read_reprotect(c, answer) || answer.gen != rp.gen) {
        if (now > rp.deadline_ns) {
          back_off(c, now, "re-protection: the peer did not answer");
          return rp.next_try_ns;
        }
        return rp.deadline_ns + 1;  // its completion wakes us before
      }
      if (!answer.ok) {
        back_off(c, now, "re-protection: the peer cannot build its side");
        return rp.next_try_ns;
      }
      auto remote = net::decode_endpoint(std::span<const std::uint8_t>(answer.endpoint, sizeof answer.endpoint));
      if (!remote) {
        back_off(c, now, "re-protection: " + remote.error().message);
        return rp.next_try_ns;
      }
      const net::Endpoint r = *remote;
      rp.job = start_job(c, rp.job->path, [r](PathJob& job) { return connect_path(job, r); });
      rp.step = ReprotectState::connecting;
      return 0;
    }
    case ReprotectState::connecting: {
      if (const int o = job_outcome(*rp.job); o == 0) {
        return 0;
      } else if (o < 0) {
        back_off(c, now, "re-protection: " + rp.job->why);
        return rp.next_try_ns;
      }
      c.ctrl_out.hello.gen = rp.gen;
      seal(c.ctrl_out.hello);
      if (post_control(c, *rp.job->path, WrKind::hello, offsetof(ControlBlock, hello), sizeof(HelloMsg),
                       CtlKind::hello) != 0) {
        back_off(c, now, "re-protection: the hello could not be posted");
        return rp.next_try_ns;
      }
      rp.step = ReprotectState::hello;
      rp.deadline_ns = now + c.failover_timeout_ns;
      [[fallthrough]];
    }
    case ReprotectState::hello: {
      Path& p = *rp.job->path;
      ibv_wc err{};
      err.status = IBV_WC_SUCCESS;
      poll_and_arm(c, p, 4, &err);
      if (err.status != IBV_WC_SUCCESS) {
        back_off(c, now, std::string("re-protection: hello failed: ") + ibv_wc_status_str(err.status));
        return rp.next_try_ns;
      }
      if (p.sends_out == 0) {
        const auto job = rp.job;
        install(c, *job, now);
        return now + 1;
      }
      if (now > rp.deadline_ns) {
        back_off(c, now, "re-protection: hello unanswered");
        return rp.next_try_ns;
      }
      return rp.deadline_ns + 1;
    }
  }
  return 0;
}

// ---- receive side: answers requests, installs on the hello
std::uint64_t answer(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = c.rp;
  const int slot = c.standby_slot();
  ReprotectMsg req;
  if (read_reprotect(c, req) && req.gen != rp.gen) {  // a new request: whatever was under way for an older one is dropped
    const std::uint32_t gen = req.gen;
    rp.gen = gen;
    ++rp.attempts;
    auto remote = net::decode_endpoint(std::span<const std::uint8_t>(req.endpoint, sizeof req.endpoint));
    if (!remote || !c.devs[slot]->port_up.load(std::memory_order_relaxed)) {
      retire_job(c);
      rp.step = ReprotectState::idle;
      post_reprotect(c, nullptr, 0, gen);
      set_standby(c, StandbyHealth::down, "re-protection on " + c.devs[slot]->port.id() + ": " +
                                              (remote ? "the port is not active" : remote.error().message));
      return 0;
    }
    retire_job(c);
    rp.job = start_build(c, slot, &*remote);
    rp.step = ReprotectState::building;
    c.inbox.hello = false;
    set_standby(c, StandbyHealth::connecting, "re-protecting on " + c.devs[slot]->port.id());
    return 0;
  }
  if (rp.step == ReprotectState::building) {
    const int o = job_outcome(*rp.job);
    if (o == 0) return 0;
    post_reprotect(c, o > 0 ? rp.job->path.get() : nullptr, o > 0 ? 1 : 0, rp.gen);
    if (o < 0) {
      set_standby(c, StandbyHealth::down, "re-protection on " + c.devs[slot]->port.id() + ": " + rp.job->why);
      retire_job(c);
      rp.step = ReprotectState::idle;
      return 0;
    }
    rp.step = ReprotectState::hello;
  }
  if (rp.step == ReprotectState::hello) {
    ibv_wc err{};
    err.status = IBV_WC_SUCCESS;
    poll_and_arm(c, *rp.job->path, 4, &err);  // the hello comes over the new path
    HelloMsg hello;
    if (c.inbox.hello && read_record(c.ctrl.hello, hello) && hello.gen == rp.gen) {
      c.inbox.hello = false;
      const auto job = rp.job;
      install(c, *job, now);
      return now + 1;
    }
  }
  return 0;
}

}  // namespace

bool adopt_job_path(CommBase& c, const Path* via, std::uint64_t now) {
  if (!via || !c.rp.job || c.rp.job->path.get() != via || job_outcome(*c.rp.job) <= 0) return false;
  const auto job = c.rp.job;
  install(c, *job, now);
  return true;
}

void retire_job(CommBase& c) {
  // A job still queued does nothing; one running finishes and its paths go to the reaper with the
  // last reference (~PathJob), whichever thread drops it.
  if (c.rp.job) c.rp.job->cancelled.store(true, std::memory_order_relaxed);
  c.rp.job.reset();
}

std::uint64_t reprotect(CommBase& c, std::uint64_t now) {
  Device* d = c.devs[c.standby_slot()];
  if (!d) return 0;  // single path
  if (const auto g = d->recover_gen.load(std::memory_order_relaxed); g != c.rp.recover_gen) {
    c.rp.recover_gen = g;  // the port came back (or its GID changed): try now, not after the backoff
    if (c.kind == CommKind::send && c.rp.step == ReprotectState::idle && c.standby.state == StandbyHealth::down) {
      HA_INFO("NET/HA: %s: %s is active again: re-protecting now (the backoff had %lld ms left)", c.id.c_str(),
              d->port.id().c_str(), static_cast<long long>(c.rp.next_try_ns > now ? (c.rp.next_try_ns - now) / 1000000 : 0));
      c.rp.next_try_ns = now;
    }
  }
  if (c.kind == CommKind::send) {
    const Path* sb = c.paths[c.standby_slot()].get();
    const bool dead = !sb || sb->link.load(std::memory_order_relaxed) == Path::failed;
    if (dead || c.rp.step != ReprotectState::idle) return drive(c, now);
    return 0;
  }
  return answer(c, now);
}

}  // namespace nccl_ha::plugin
