// Re-protection: after a failover (or when the standby died, or never came up), a new standby path
// is built so a second failure is survived too. The send side chooses the attempt's pair of ports
// (standby.cpp: a pair both ends can reach, preferring the old one once its port is ACTIVE again -
// its GID is resolved afresh: it can change after a RoCE flap - else the next best, e.g. a third
// port when the failed one stays down); when a pair fails, the next one is tried at once, and only
// when every pair failed does it wait (exponential backoff, 100 ms .. 5 s). Never given up while
// the comm lives.
//
//   send side                                   receive side
//   [worker] new QP on its device; on another
//   device than the slot's, the comm's memory
//   registered there too (rebind.hpp)
//   ReprotectMsg{endpoint, gen, the receiver's
//   device, our rkeys there} -- active -->      [worker] new QP on that device (+ registrations
//                                               there), INIT->RTR->RTS
//                                <-- active --  ReprotectMsg{endpoint, ok, gen, its ctrl rkey}
//   [worker] INIT->RTR->RTS
//   hello = gen ----------- new path ------->   sees hello == gen: standby up (the slot moved)
//   the write completed: standby up (the slot moved)
// A request with a newer gen replaces whatever the receive side built for an older one. Every
// message is a write with immediate data: its completion wakes the peer's control plane.
// The verbs work ([worker]: QP creation and state transitions, registrations, tens of
// milliseconds under emulation) runs as a PathJob (path_job.hpp) on the reactor's worker threads,
// never on the progress thread; the comm is woken when it is done. On a receive comm with flush QPs
// (flush_paths.cpp) the same job builds a new loopback QP on the standby's device, installed with the
// standby: a flush QP never outlives the port state it was built in.
// A PORT_ACTIVE or GID-change event of one of the comm's candidate ports starts the next attempt
// at once; the backoff only paces attempts that failed. A receiver whose device the request names
// is down refuses with kPortDown: the sender leaves that device out (no QP built only to be refused)
// until the receiver's kPortBack note that a port came back, or kPeerPortDownNs.
// With failback, a standby that is up but not on the connection's own pair is moved there once that
// pair is usable (a move: the same steps, the request's ok = kMove): make-before-break, the old
// standby serves until the install and stays if the move fails; the failback then follows.
// A failover during a move gives it up, except in the hello step, where the peer may already have
// installed the new path: the failover waits for the hello's outcome (failover_waits_for_move).
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/reaper.hpp"
#include "core/state.hpp"
#include "ha/attempt_gate.hpp"
#include "ha/control_ops.hpp"
#include "ha/liveness.hpp"
#include "ha/path_job.hpp"
#include "ha/rebind.hpp"
#include "ha/rescue.hpp"
#include "nccl_ha/net/wire.hpp"

namespace nccl_ha::plugin {

// The writer of re-protection's state machine and of the inbox's reprotect and hello marks
// (ControlPlane): defined here only.
struct ReprotectWriter {
  static ReprotectState& rp(CommBase& c) noexcept { return c.cp.rp_; }
  static Inbox& inbox(CommBase& c) noexcept { return c.cp.inbox_; }
};
namespace {
ReprotectState& rp_of(CommBase& c) noexcept { return ReprotectWriter::rp(c); }
Inbox& rp_inbox(CommBase& c) noexcept { return ReprotectWriter::inbox(c); }
}  // namespace

namespace {

constexpr std::uint64_t kFirstBackoffNs = 100'000'000;
constexpr std::uint64_t kMaxBackoffNs = 5'000'000'000;
constexpr std::uint64_t kMoveRetryNs = 1'000'000'000;  // after a failed move
// How long a peer's device it said is down (kPortDown) is left out without its kPortBack note.
constexpr std::uint64_t kPeerPortDownNs = kMaxBackoffNs;

// The attempt's job on `d` (path_job.hpp: start_build); on another device than the standby slot's,
// the slot's move there begins (rebind.hpp).
std::shared_ptr<PathJob> start_attempt_job(CommBase& c, Device& d, const net::Endpoint* remote_to_connect) {
  rp_of(c).rebind = &d != c.devs[c.standby_slot()] ? begin_rebind(c, d) : 0;
  return start_build(c, d, remote_to_connect, rp_of(c).rebind);
}

// Installs the job's path as the standby (and, on a receive comm, its flush path); when it is on
// another device than the slot's, the slot moves there first (rebind.hpp). False (nothing
// installed) when the move cannot be made.
bool install(CommBase& c, PathJob& job, std::uint64_t now) {
  std::shared_ptr<Path> p = job.path;
  const int slot = p->slot;
  if (rp_of(c).rebind) {
    if (auto s = commit_rebind(c, slot, rp_of(c).rebind, job.keys); !s) {
      if (!rp_of(c).move) set_standby(c, StandbyHealth::down, "re-protection on " + p->dev->port.id() + ": " + s.error().message);
      return false;
    }
    rp_of(c).rebind = 0;
    watch_device(c, *p->dev);
    account_ports(c);
  }
  c.keys[slot].peer_ctrl = rp_of(c).peer_ctrl;
  if (c.kind == CommKind::recv) c.keys[slot].peer_fifo = rp_of(c).peer_fifo;
  p->peer_dev = rp_of(c).peer_dev;
  if (c.kind == CommKind::recv) offer_flush_path(static_cast<RecvComm&>(c), slot, job);
  rp_of(c).job.reset();
  p->link.store(Path::up, std::memory_order_relaxed);
  const std::string dev = p->dev->port.id();
  retire(std::move(c.paths[slot]));  // the standby it replaces
  c.paths[slot] = std::move(p);
  ++rp_of(c).done;
  rp_of(c).step = ReprotectState::idle;
  rp_of(c).backoff_ns = 0;
  if (rp_of(c).move) {
    rp_of(c).move = false;
    restart_failback_hold(c, now);  // a failback's hold counts from here
    set_standby(c, StandbyHealth::up, "moved to " + dev + ", its own pair");
  } else {
    set_standby(c, StandbyHealth::up, "re-protected on " + dev);
  }
  return true;
}

// With failback: the standby is up, but neither it nor the active path runs on the connection's own
// pair (a move would bring it there).
bool standby_away(CommBase& c) {
  const Path* sb = c.paths[c.standby_slot()].get();
  return c.failback && sb && c.cp.standby().state == StandbyHealth::up && !c.at_home(*sb) && !c.at_home(c.path());
}

// A move that failed (or was given up): the standby stays where it is, the pair is skipped until a
// port comes back, and no move is tried for a second.
void end_move(CommBase& c, std::uint64_t now, const std::string& why) {
  HA_INFO("NET/HA: %s: its standby stays on %s: moving it to %s: %s", c.id.c_str(),
          c.devs[c.standby_slot()] ? c.devs[c.standby_slot()]->port.id().c_str() : "-",
          rp_of(c).port.empty() ? "its own pair" : rp_of(c).port.c_str(), why.c_str());
  if (c.kind == CommKind::send) standby_ports_failed(c, rp_of(c).dev, rp_of(c).peer_dev);
  retire_job(c);
  rp_of(c).step = ReprotectState::idle;
  rp_of(c).move = false;
  rp_of(c).next_move_ns = now + kMoveRetryNs;
}

// Drops the attempt (its job, a move it prepared) and waits: every pair failed. In a rescue, the
// failover waiting for it gives up (rescue.hpp).
void back_off(CommBase& c, std::uint64_t now, const std::string& why) {
  if (rp_of(c).move) return end_move(c, now, why);
  rescue_hopeless(c, "no pair took a new path (" + why + ")");
  retire_job(c);
  standby_ports_reset(c);
  rp_of(c).step = ReprotectState::idle;
  rp_of(c).backoff_ns = rp_of(c).backoff_ns ? std::min(rp_of(c).backoff_ns * 2, kMaxBackoffNs) : kFirstBackoffNs;
  rp_of(c).next_try_ns = now + rp_of(c).backoff_ns;
  set_standby(c, StandbyHealth::down, why + "; next re-protection attempt in " +
                                          std::to_string(rp_of(c).backoff_ns / 1000000) + " ms");
}

// Send side: the attempt's pair of ports failed: the next pair at once, or the backoff when none is left.
std::uint64_t attempt_failed(CommBase& c, std::uint64_t now, const std::string& why) {
  if (rp_of(c).move) {
    end_move(c, now, why);
    return now + 1;
  }
  standby_ports_failed(c, rp_of(c).dev, rp_of(c).peer_dev);
  retire_job(c);
  rp_of(c).step = ReprotectState::idle;
  if (const auto next = choose_standby_ports(c); next.dev) {
    set_standby(c, StandbyHealth::down, why + "; trying " + next.dev->port.id() + " next");
    rp_of(c).next_try_ns = now;
    return now + 1;
  }
  back_off(c, now, why);
  return rp_of(c).next_try_ns;
}

// The peer's ReprotectMsg, once one arrived (its completion was seen, or the rescue's mail) and
// reads whole; `origin`: how it came.
bool read_reprotect(CommBase& c, ReprotectMsg& out, RequestOrigin* origin = nullptr) {
  if (!c.cp.inbox().has(CtlKind::reprotect) || !read_record(c.ctrl.reprotect, out)) return false;
  if (origin) *origin = c.cp.inbox().by_mail(CtlKind::reprotect) ? RequestOrigin::rescue_mail : RequestOrigin::path;
  rp_inbox(c).clear(CtlKind::reprotect);
  heard_from_peer(c, now_ns());
  return true;
}

// ---- send side: a port (WHAT) came back while the standby is down: the next attempt starts now,
// not after the backoff.
void retry_now(CommBase& c, std::uint64_t now, const std::string& what) {
  HA_INFO("NET/HA: %s: %s is active again: re-protecting now (the backoff had %lld ms left)", c.id.c_str(),
          what.c_str(), static_cast<long long>(rp_of(c).next_try_ns > now ? (rp_of(c).next_try_ns - now) / 1000000 : 0));
  rp_of(c).next_try_ns = now;
}

// ---- send side: the receiver refused because its device `dev` is down (kPortDown): no pair with it
// until its note that a port came back, or kPeerPortDownNs.
void peer_port_down(CommBase& c, int dev, std::uint64_t now) {
  bool known = false;
  for (Candidate& theirs : c.peer_cands)
    if (theirs.dev == dev) {
      theirs.flags &= static_cast<std::uint8_t>(~kCandUp);
      known = true;
    }
  if (!known) return;
  if (std::find(rp_of(c).peer_down.begin(), rp_of(c).peer_down.end(), dev) == rp_of(c).peer_down.end()) rp_of(c).peer_down.push_back(dev);
  rp_of(c).peer_down_until_ns = now + kPeerPortDownNs;
}

// The peer's devices it said are down, after kPeerPortDownNs without its note: tried again.
void peer_ports_expire(CommBase& c, std::uint64_t now) {
  if (rp_of(c).peer_down.empty() || now < rp_of(c).peer_down_until_ns) return;
  for (Candidate& theirs : c.peer_cands)
    if (std::find(rp_of(c).peer_down.begin(), rp_of(c).peer_down.end(), theirs.dev) != rp_of(c).peer_down.end())
      theirs.flags |= kCandUp;
  rp_of(c).peer_down.clear();
}

// ---- send side: the receiver's note that a port of its came back: every pair may be tried again, now.
void take_port_back(CommBase& c, std::uint64_t now) {
  ReprotectMsg m;
  if (rp_of(c).step != ReprotectState::idle || !c.cp.inbox().has(CtlKind::reprotect) || !read_record(c.ctrl.reprotect, m)) return;  // an answer is drive()'s
  rp_inbox(c).clear(CtlKind::reprotect);  // idle: an answer now is a late one (a reminder's second), of no use
  if (m.ok != kPortBack) return;
  standby_ports_reset(c);
  // Its ports as its handshake listed them (or its kPortDown answers) may say down (a connection
  // opened while one was): every pair may be tried again, and one whose port is still down is
  // refused and skipped as any other.
  for (Candidate& theirs : c.peer_cands) theirs.flags |= kCandUp;
  rp_of(c).peer_down.clear();
  rp_of(c).next_move_ns = 0;
  if (c.cp.standby().state == StandbyHealth::down) retry_now(c, now, "a port of the peer");
}

// ---- send side: the steps of an attempt (ReprotectState::Step), one function each. Each returns
// when it wants to run again (0: when woken).

// idle: after the backoff, the ports of the next attempt; the new standby's QP and the comm's
// registrations there are built by a job on a worker.
std::uint64_t start_attempt(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  if (now < rp.next_try_ns) return rp.next_try_ns;
  if (const auto hold = static_cast<std::uint64_t>(state()->hooks.reprotect_delay_ms()) * 1'000'000;
      hold && !rp.move && !c.cp.rescue().on && now < c.cp.standby().lost_ns + hold)
    return c.cp.standby().lost_ns + hold;  // test setting HA_NCCL_TEST_REPROTECT_DELAY_MS
  if (State* st = state(); st && !c.cp.rescue().on) {
    if (const std::uint64_t later = st->attempts->defer(now, rp.deferred_ns); later != 0) {
      rp.move = false;  // nothing started: a move is decided again then (move_home)
      return later;     // failovers first
    }
    if (!st->attempts->enter(c, rp.move)) {
      rp.move = false;  // nothing started: a move is decided again in its turn (move_home)
      return 0;         // woken in its turn
    }
  }
  peer_ports_expire(c, now);
  const AttemptPorts ports = choose_standby_ports(c);
  if (!ports.dev) {
    back_off(c, now, "re-protection: " + ports.why);
    return rp.next_try_ns;
  }
  ++rp.attempts;
  rp.dev = ports.dev->index;
  rp.peer_dev = ports.peer_dev;
  rp.port = ports.dev->port.id();
  rp.job = start_attempt_job(c, *ports.dev, nullptr);
  rp.step = ReprotectState::building;
  if (rp.move)
    HA_INFO("NET/HA: %s: its own pair is usable again: moving its standby %s -> %s (the old one serves meanwhile)",
            c.id.c_str(), c.devs[c.standby_slot()]->port.id().c_str(), rp.port.c_str());
  else
    set_standby(c, StandbyHealth::connecting, "re-protecting on " + ports.dev->port.id());
  return 0;  // the job wakes us
}

// With failback: a standby that is up elsewhere goes to the connection's own pair once that pair is
// usable (our port up, the pair not failed since the last port came back, and the first choice of
// choose_standby_ports). Returns when it wants to run again (0: no move).
std::uint64_t move_home(CommBase& c, std::uint64_t now) {
  if (!standby_away(c) || c.cp.fo().phase != FailoverState::normal || !c.cp.fo().requested.empty() || !c.home->port_up.load(std::memory_order_relaxed))
    return 0;
  if (now < rp_of(c).next_move_ns) return rp_of(c).next_move_ns;
  const AttemptPorts ports = choose_standby_ports(c);
  if (ports.dev != c.home || ports.peer_dev != c.peer_home) {
    rp_of(c).next_move_ns = now + kMoveRetryNs;  // not usable yet: looked at again then (or when a port comes back)
    return rp_of(c).next_move_ns;
  }
  rp_of(c).move = true;
  return start_attempt(c, now);
}

// The attempt's request (generation rp.gen): our endpoint and keys, what it is for, the peer's device.
int post_request(CommBase& c) {
  ReprotectState& rp = rp_of(c);
  const std::uint32_t kind = rp.move ? kMove : c.cp.rescue().on ? kRescueSlot + static_cast<std::uint32_t>(c.standby_slot()) : 1;
  return post_reprotect(c, rp.job.get(), kind, rp.gen, rp.peer_dev);
}

// The answer is overdue: while the peer's control plane is heard from, the request is written again
// (a receiver that answered already answers again: an answer written on a path that failed since is
// not lost) and waited for one more timeout (keep_waiting_for_answer, attempt_gate.hpp).
bool remind(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  const Path* active = c.paths[c.active()].get();
  const std::uint64_t heard = active && active->pair ? active->pair->heard_ns() : 0;
  if (c.cp.rescue().on || !keep_waiting_for_answer(rp.requested_ns, heard, now, c.failover_timeout_ns)) return false;
  if (post_request(c) != 0) return false;
  ++rp.reminders;
  rp.deadline_ns = now + c.failover_timeout_ns;
  HA_INFO("NET/HA: %s: re-protection on %s: no answer after %llu ms, the peer's control plane is busy (heard from "
          "%llu ms ago): request %u written again", c.id.c_str(), rp.port.c_str(),
          static_cast<unsigned long long>((now - rp.requested_ns) / 1000000),
          static_cast<unsigned long long>(now > heard ? (now - heard) / 1000000 : 0), rp.gen);
  return true;
}

// building: once the job built our side, the request to the peer (our endpoint and keys).
std::uint64_t request_peer_side(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  if (const int o = job_outcome(*rp.job); o == 0) {
    return 0;
  } else if (o < 0) {
    return attempt_failed(c, now, "re-protection on " + rp.port + ": " + rp.job->why);
  }
  rp_inbox(c).clear(CtlKind::reprotect);  // answers to older attempts are of no interest
  ++rp.gen;
  if (post_request(c) != 0) {
    back_off(c, now, "re-protection: the request could not be posted");
    return rp.next_try_ns;
  }
  rp.step = ReprotectState::requested;
  rp.requested_ns = now;
  // Over TCP the exchange bounds itself (its outcome always comes as mail), within the rescue's deadline.
  rp.deadline_ns = c.cp.rescue().on ? c.cp.rescue().deadline_ns : now + c.failover_timeout_ns;
  return rp.deadline_ns;
}

// requested: the peer's answer (its endpoint and control key, or why not), within the deadline;
// then our QP is connected to it by a job on a worker.
std::uint64_t take_answer(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  ReprotectMsg answer;
  if (!read_reprotect(c, answer) || answer.gen != rp.gen || answer.ok == kPortBack) {
    if (now > rp.deadline_ns && !remind(c, now)) {
      back_off(c, now, "re-protection: the peer did not answer within " +
                           std::to_string((now - rp.requested_ns) / 1000000) + " ms");
      return rp.next_try_ns;
    }
    return rp.deadline_ns + 1;  // its completion wakes us before
  }
  if (answer.ok == kPortDown) {
    peer_port_down(c, rp.peer_dev, now);
    return attempt_failed(c, now, "re-protection: the peer's port of that pair is down (it says when it is back)");
  }
  if (!answer.ok)  // over TCP, a refusal of the exchange itself says why
    return attempt_failed(c, now, "re-protection: " + (c.cp.rescue().why.empty() ? std::string("the peer cannot build its side")
                                                                            : c.cp.rescue().why));
  auto remote = net::decode_endpoint(std::span<const std::uint8_t>(answer.endpoint, sizeof answer.endpoint));
  if (!remote || answer.ctrl_rkey == 0)
    return attempt_failed(c, now, "re-protection: " + (remote ? std::string("no control key in the answer")
                                                              : remote.error().message));
  rp.peer_ctrl = answer.ctrl_rkey;
  if (answer.own_dev != kSameDevice) rp.peer_dev = static_cast<int>(answer.own_dev);
  const net::Endpoint r = *remote;
  rp.job = start_job(
      c, rp.job->path,
      [r, prev = rp.job](PathJob& job) {
        job.keys = std::move(prev->keys);  // a move's registrations stay with the attempt
        return connect_path(job, r);
      },
      reactor::JobOrder::peer_waits);  // the receiver built its side and waits for our hello
  rp.step = ReprotectState::connecting;
  return 0;
}

// connecting: once the QP is connected, the hello over it proves the new path end to end. None:
// go on to the hello at once.
std::optional<std::uint64_t> send_hello(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  if (const int o = job_outcome(*rp.job); o == 0) {
    return 0;
  } else if (o < 0) {
    return attempt_failed(c, now, "re-protection: " + rp.job->why);
  }
  c.ctrl_out.hello.gen = rp.gen;
  seal(c.ctrl_out.hello);
  const SlotKeys& k = attempt_keys(c, *rp.job);
  const WriteKeys keys{k.ctrl_out->lkey, rp.peer_ctrl};  // the slot's keys are the old device's until the install
  if (post_control(c, *rp.job->path, WrKind::hello, offsetof(ControlBlock, hello), sizeof(HelloMsg), CtlKind::hello,
                   &keys) != 0) {
    back_off(c, now, "re-protection: the hello could not be posted");
    return rp.next_try_ns;
  }
  rp.step = ReprotectState::hello;
  rp.deadline_ns = now + c.failover_timeout_ns;
  return std::nullopt;
}

// hello: its completion (within the deadline) installs the new standby.
std::uint64_t finish_hello(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  Path& p = *rp.job->path;
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  poll_and_arm(c, p, 4, &err);
  if (err.status != IBV_WC_SUCCESS)
    return attempt_failed(c, now, std::string("re-protection: hello failed: ") + ibv_wc_status_str(err.status));
  if (p.sends_out == 0) {
    const auto job = rp.job;
    if (!install(c, *job, now)) {
      back_off(c, now, "re-protection: " + c.cp.standby().why);
      return rp.next_try_ns;
    }
    return now + 1;
  }
  if (now > rp.deadline_ns) return attempt_failed(c, now, "re-protection: hello unanswered");
  return rp.deadline_ns + 1;
}

// ---- send side: drives the attempts. Returns when it wants to run again (0: when woken).
std::uint64_t drive(CommBase& c, std::uint64_t now) {
  switch (rp_of(c).step) {
    case ReprotectState::idle:
      return start_attempt(c, now);
    case ReprotectState::building:
      return request_peer_side(c, now);
    case ReprotectState::requested:
      return take_answer(c, now);
    case ReprotectState::connecting:
      if (const auto next = send_hello(c, now)) return *next;
      [[fallthrough]];
    case ReprotectState::hello:
      return finish_hello(c, now);
  }
  return 0;
}

// ---- receive side: answers requests, installs on the hello
// A port of ours came back while the standby is down (or, with failback, up away from the
// connection's own pair: the sender may move it there now): the sender, which sees only its own
// port events, is told, so that it does not wait out its backoff.
void note_port_back(CommBase& c) {
  if (const std::string back = standby_ports_recovered(c);
      !back.empty() && rp_of(c).step == ReprotectState::idle && (c.cp.standby().state == StandbyHealth::down || standby_away(c))) {
    HA_INFO("NET/HA: %s: %s is active again: telling the peer to re-protect now", c.id.c_str(), back.c_str());
    post_reprotect(c, nullptr, kPortBack, 0, -1);
  }
}

// A new request: whatever was under way for an older one is dropped; our side of the attempt is
// built by a job (or refused: judge_request).
void take_request(CommBase& c, const ReprotectMsg& req, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  retire_job(c);
  begin_request(rp, req);
  const RequestVerdict v = judge_request(request_view(c), req);
  if (v.active != c.active()) {  // a rescue's request: the peer's numbering of the slots
    const int slot = 1 - v.active;
    HA_INFO("NET/HA: %s: the peer rebuilds its slot %d (%s here): slot %d counts as active, as at the peer", c.id.c_str(),
            slot, c.devs[slot] ? c.devs[slot]->port.id().c_str() : "-", v.active);
    set_active_slot(c, v.active);
  }
  Device* d = v.dev;
  if (!d) {
    refuse_request(rp, v.refusal);  // kPortDown: our kPortBack note follows when a port comes back
    post_reprotect(c, nullptr, rp.refused_ok, req.gen, -1);
    if (rp.move)
      end_move(c, now, v.why);
    else
      set_standby(c, StandbyHealth::down, "re-protection: " + v.why);
    return;
  }
  rp.dev = d->index;
  rp.port = d->port.id();
  rp.peer_dev = req.own_dev == kSameDevice ? -1 : static_cast<int>(req.own_dev);
  rp.peer_ctrl = req.ctrl_rkey;
  rp.peer_fifo = req.fifo_rkey;
  rp.job = start_attempt_job(c, *d, &v.remote);
  rp.step = ReprotectState::building;
  rp_inbox(c).clear(CtlKind::hello);
  if (rp.move)
    HA_INFO("NET/HA: %s: the peer moves the standby to its own pair: building ours on %s (the old one serves "
            "meanwhile)", c.id.c_str(), rp.port.c_str());
  else
    set_standby(c, StandbyHealth::connecting, "re-protecting on " + d->port.id());
}

std::uint64_t answer(CommBase& c, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  note_port_back(c);
  ReprotectMsg req;
  RequestOrigin origin = RequestOrigin::path;
  if (read_reprotect(c, req, &origin)) {
    switch (request_action(rp, req, origin)) {
      case RequestAction::judge:
        take_request(c, req, now);
        return 0;
      // A reminder of the request we work on (the sender saw no answer in time): the answer given
      // is given again - our finished job is what the sender waits for, not a new one; one still
      // being built answers when done.
      case RequestAction::answer_again:
        post_reprotect(c, rp.job.get(), 1, rp.gen, -1);
        break;
      case RequestAction::refuse_again:
        post_reprotect(c, nullptr, rp.refused_ok, rp.gen, -1);
        break;
      case RequestAction::none:
        break;
      case RequestAction::drop:
        ++rp.dropped;
        HA_INFO("NET/HA: %s: a re-protection request not acted on (gen %u, ok %u, %s; the last taken: gen %u): %s",
                c.id.c_str(), req.gen, req.ok, origin == RequestOrigin::path ? "over a path" : "by rescue mail", rp.gen,
                newer_gen(req.gen, rp.gen) || req.gen == rp.gen ? "a rescue's request comes only over TCP"
                                                                 : "an older attempt's");
        break;
    }
  }
  if (rp.step == ReprotectState::building) {
    const int o = job_outcome(*rp.job);
    if (o == 0) return 0;
    std::string why = o < 0 ? rp.job->why : std::string();
    if (o > 0 && rp.rebind)
      if (auto ready = rebind_ready(c, rp.rebind); !ready) why = ready.error().message;
    const bool ok = why.empty();
    post_reprotect(c, ok ? rp.job.get() : nullptr, ok ? 1 : 0, rp.gen, -1);
    if (!ok && rp.move) {
      end_move(c, now, why);
      return 0;
    }
    if (!ok) {
      refuse_request(rp, 0);
      set_standby(c, StandbyHealth::down, "re-protection on " + rp.port + ": " + why);
      retire_job(c);
      rp.step = ReprotectState::idle;
      return 0;
    }
    rp.step = ReprotectState::hello;
    rp.deadline_ns = now + c.failover_timeout_ns;  // a failover of ours waits for the hello until then (a move)
  }
  if (rp.step == ReprotectState::hello) {
    ibv_wc err{};
    err.status = IBV_WC_SUCCESS;
    poll_and_arm(c, *rp.job->path, 4, &err);  // the hello comes over the new path
    HelloMsg hello;
    if (c.cp.inbox().has(CtlKind::hello) && read_record(c.ctrl.hello, hello) && hello.gen == rp.gen) {
      rp_inbox(c).clear(CtlKind::hello);
      const auto job = rp.job;
      if (!install(c, *job, now)) {
        retire_job(c);
        rp.step = ReprotectState::idle;
        return 0;
      }
      return now + 1;
    }
  }
  return 0;
}

}  // namespace

bool failover_waits_for_move(CommBase& c, const std::string& cause, const Path* via, std::uint64_t now) {
  ReprotectState& rp = rp_of(c);
  if (!rp.move) return false;
  if (via && rp.job && via == rp.job->path.get()) return false;  // adopt_job_path installs it
  if (!via && rp.step == ReprotectState::hello && now < rp.deadline_ns) {
    return true;  // again at the next step: the hello's outcome decides which path is the standby
  }
  end_move(c, now, "a failover came first (" + cause + ")");
  return false;
}

bool adopt_job_path(CommBase& c, const Path* via, std::uint64_t now) {
  if (!via || !rp_of(c).job || rp_of(c).job->path.get() != via || job_outcome(*rp_of(c).job) <= 0) return false;
  const auto job = rp_of(c).job;
  return install(c, *job, now);
}

void retire_job(CommBase& c) {
  // A job still queued does nothing; one running finishes and its paths go to the reaper with the
  // last reference (~PathJob), whichever thread drops it. A move it prepared is given up.
  if (rp_of(c).job) rp_of(c).job->cancelled.store(true, std::memory_order_relaxed);
  rp_of(c).job.reset();
  if (rp_of(c).rebind) abort_rebind(c);
  rp_of(c).rebind = 0;
}

void restart_for_rescue(CommBase& c, std::uint64_t now) {
  if (c.kind == CommKind::recv) {
    set_standby(c, StandbyHealth::down, "no path left: the peer builds a new one over TCP", true);
    return;
  }
  retire_job(c);  // an attempt under way talked over the lost path
  rp_of(c).move = false;
  rp_of(c).step = ReprotectState::idle;
  rp_of(c).backoff_ns = 0;
  rp_of(c).next_try_ns = now;
  standby_ports_reset(c);
  set_standby(c, StandbyHealth::down, "no path left: re-protecting over TCP", true);
}

std::uint64_t reprotect(CommBase& c, std::uint64_t now) {
  if (!c.devs[c.standby_slot()]) return 0;  // single path
  deliver_rescue_mail(c);
  if (c.kind == CommKind::send) {
    if (const std::string back = standby_ports_recovered(c); !back.empty()) {  // a port came back (or its GID changed)
      rp_of(c).next_move_ns = 0;
      if (rp_of(c).step == ReprotectState::idle && c.cp.standby().state == StandbyHealth::down) retry_now(c, now, back);
    }
    take_port_back(c, now);
    const Path* sb = c.paths[c.standby_slot()].get();
    const bool dead = !sb || sb->link.load(std::memory_order_relaxed) == Path::failed;
    if (dead || rp_of(c).step != ReprotectState::idle) return drive(c, now);
    return move_home(c, now);
  }
  return answer(c, now);
}

}  // namespace nccl_ha::plugin
