// The re-protection message (ReprotectMsg): how ours is written to the peer (post_reprotect), and
// the receive side's rules for the peer's request (control_ops.hpp: request_action, begin_request,
// refuse_request, request_view, judge_request), pure decisions over the comm's records and the
// request, no verbs and no process state beyond the devices' list. reprotect.cpp's answer() and
// take_request() act on them. Unit-tested (test/unit/plugin/reprotect_test.cpp) and fuzzed
// (test/fuzz/reprotect_request.cpp).
#include <cstddef>
#include <cstring>
#include <span>
#include <string>

#include "core/path_ops.hpp"
#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "ha/path_job.hpp"
#include "ha/rescue.hpp"
#include "nccl_ha/net/wire.hpp"

namespace nccl_ha::plugin {

const SlotKeys& attempt_keys(const CommBase& c, const PathJob& job) {
  return c.cp.rp().rebind ? job.keys : c.keys[c.standby_slot()];
}

int post_reprotect(CommBase& c, const PathJob* job, std::uint32_t ok, std::uint32_t gen, int peer_dev) {
  ReprotectMsg& m = c.ctrl_out.reprotect;
  m = ReprotectMsg{};
  if (job) {
    const auto bytes = net::encode_endpoint(job->path->local);
    std::memcpy(m.endpoint, bytes.data(), sizeof m.endpoint);
    const SlotKeys& k = attempt_keys(c, *job);
    m.ctrl_rkey = k.ctrl->rkey;
    if (c.kind == CommKind::send) m.fifo_rkey = k.ring->rkey;
    m.own_dev = static_cast<std::uint32_t>(job->path->dev->index);
  }
  m.ok = ok;
  m.gen = gen;
  if (peer_dev >= 0) m.dev = static_cast<std::uint32_t>(peer_dev);
  seal(m);
  if (rescue_answer(c, m)) return 0;  // the request came over TCP: so does the answer
  if (c.cp.rescue().on && c.kind == CommKind::send && ok != kPortBack) {  // no path left
    rescue_send(c);
    return 0;
  }
  return post_control(c, c.path(), WrKind::reprotect, offsetof(ControlBlock, reprotect), sizeof(ReprotectMsg),
                      CtlKind::reprotect);
}

RequestView request_view(const CommBase& c) {
  RequestView v;
  v.devs = {c.devs[0], c.devs[1]};
  v.active = c.active();
  v.home = c.home;
  v.peer_cands = c.peer_cands;
  v.phase = c.cp.fo().phase;
  if (const State* st = state()) v.devices = st->devices;
  return v;
}

// A new request's verdict, in the order the checks were always made: the endpoint; a rescue's
// slot (kRescueSlot: the sender's numbering is adopted - both of our paths are lost by then; if
// the sender builds in the slot we count as active - it switched to its standby before that was
// lost, we never saw its notice, or the other way round - our active slot becomes the other one,
// so the new path is our standby, as at the sender); the device it names (kSameDevice: our
// standby slot's), if it can carry a standby of this comm; the keys.
RequestVerdict judge_request(const RequestView& v, const ReprotectMsg& req) {
  RequestVerdict out;
  out.active = v.active;
  auto remote = net::decode_endpoint(std::span<const std::uint8_t>(req.endpoint, sizeof req.endpoint));
  if (!remote) {
    out.why = remote.error().message;
    return out;
  }
  out.remote = *remote;
  if (req.ok == kRescueSlot || req.ok == kRescueSlot + 1) {
    const int slot = static_cast<int>(req.ok - kRescueSlot);
    if (slot != 1 - v.active) {
      if (v.phase != FailoverState::normal) {
        out.why = "a rescue's request for slot " + std::to_string(slot) + " during a failover here";
        return out;
      }
      out.active = 1 - slot;
    }
  }
  Device* d = v.devs[1 - out.active];
  if (req.dev != kSameDevice) {
    d = req.dev < v.devices.size() ? v.devices[req.dev].get() : nullptr;
    if (!d) {
      out.why = "the peer asks for device " + std::to_string(req.dev) + ", which does not exist here";
      return out;
    }
  }
  if (d->port.link_layer != v.devs[out.active]->port.link_layer) {
    out.why = d->port.id() + " is of another link layer";
    return out;
  }
  // Never a standby across isolated islands, whatever the peer asks (its port as its handshake listed it).
  if (req.own_dev != kSameDevice)
    for (const Candidate& theirs : v.peer_cands)
      if (theirs.dev == req.own_dev && !reachable(theirs, candidate_for(*d, *v.home))) {
        out.why = "the peer's device " + std::to_string(req.own_dev) + " cannot reach " + d->port.id() + " (rail " +
                  d->topo.rail.str() + ", island " + d->topo.island.str() + ")";
        return out;
      }
  if (!d->port_up.load(std::memory_order_relaxed)) {
    out.why = d->port.id() + ": the port is not active";
    out.refusal = kPortDown;  // our kPortBack note follows when a port comes back
    return out;
  }
  if (req.ctrl_rkey == 0 || req.fifo_rkey == 0) {
    out.why = "no keys in the request";
    return out;
  }
  out.dev = d;
  return out;
}

RequestAction request_action(const ReprotectState& rp, const ReprotectMsg& req, RequestOrigin origin) noexcept {
  const bool rescue = req.ok == kRescueSlot || req.ok == kRescueSlot + 1;
  if (rescue && origin != RequestOrigin::rescue_mail) return RequestAction::drop;
  if (req.gen != rp.gen) return newer_gen(req.gen, rp.gen) ? RequestAction::judge : RequestAction::drop;
  if (rp.step == ReprotectState::hello && rp.job) return RequestAction::answer_again;
  if (rp.step == ReprotectState::idle && rp.refused_gen == rp.gen) return RequestAction::refuse_again;
  return RequestAction::none;
}

void begin_request(ReprotectState& rp, const ReprotectMsg& req) noexcept {
  rp.gen = req.gen;
  // Not refused (yet): a refusal of an earlier attempt with the same gen (a peer whose gen wrapped
  // or repeats) is not this one's answer (request_action: refuse_again).
  rp.refused_gen = req.gen - 1;
  ++rp.attempts;
  rp.step = ReprotectState::idle;
  rp.move = req.ok == kMove;
  rp.port.clear();
}

void refuse_request(ReprotectState& rp, std::uint32_t ok) noexcept {
  rp.refused_gen = rp.gen;
  rp.refused_ok = ok;
}

}  // namespace nccl_ha::plugin
