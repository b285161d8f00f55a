// What the peer's ReprotectMsg does on the receive side (src/plugin/ha/reprotect.cpp answer, by the
// rules of reprotect_msg.cpp): a whole request (read_record) is a new attempt or a reminder
// (request_action); a new one is judged (judge_request: its endpoint, a rescue's slot, the device
// it names, the keys) against the comm: our side is built on a device, or the request is refused
// with a reason.
// The input: a comm (its devices, each of a link layer, up or down, on a rail and island; its two
// slots' devices, active slot, home device and failover phase; the peer's ports as its handshake
// listed them), then requests of 65 bytes each: a byte of hints (bit 0: sealed; bit 1: its endpoint
// made valid; bit 2: ok = kRescueSlot + (ok & 1); bit 3: dev = kSameDevice; bit 4: own_dev =
// kSameDevice; bit 5: gen = the last one taken; bit 6: our side's job fails; bit 7: the hello comes),
// then the ReprotectMsg. Between requests, the receive side's re-protection state moves as
// take_request and answer() move it (begin_request, refuse_request; the job's outcome and the
// hello from the hints).
// Properties:
//   only a whole record is acted on; a request is judged iff its gen is newer than the last one
//   taken (serial-number order) and it is not a rescue's request written over a path (origin: bit 1
//   of its ok byte as read, before hint bit 2; a rescue's request is taken only as the rescue
//   service's mail); every other request that is not a reminder is dropped and changes nothing;
//   judging is deterministic and reads only the view;
//   a request taken names a device that exists here (the standby slot's, or the one it names),
//   whose port is up, of the active path's link layer, reachable from the peer's port it names
//   (when the peer listed it), with both keys, and an endpoint that decodes (the verdict holds it
//   exactly); refusal 0, no reason;
//   a request refused says why (never empty), and is refused with kPortDown exactly when the only
//   thing wrong is that the device's port is down; every request that passes every check is taken;
//   the active slot changes only for a rescue's request (ok kRescueSlot + s) naming our active slot,
//   with a decodable endpoint, outside a failover (then it becomes 1 - s, whatever the rest);
//   during a failover such a request is refused;
//   a reminder (same gen) gets the answer the attempt got: the same refusal, or the same "built"
//   answer while we wait for its hello; never a second build, never a different answer (a request
//   of gen 0 before any attempt is refused, ok 0: a sender's first attempt is gen 1).
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "fuzz_common.hpp"
#include "ha/control_ops.hpp"
#include "ha/path_job.hpp"
#include "nccl_ha/net/wire.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {

struct Bytes {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t u8() { return n ? (--n, *p++) : 0; }
};

constexpr int kLens[] = {-1, 8, 15, 16, 23};  // island prefix lengths (-1: the rail itself)

NetPrefix rail_of(std::uint8_t choice) {  // 0: unknown; k: 10.(19+k).0.0/24
  if (choice == 0) return {};
  std::array<std::uint8_t, 16> a{};
  a[10] = a[11] = 0xff;
  a[12] = 10;
  a[13] = static_cast<std::uint8_t>(19 + choice);
  return make_prefix(a, 96 + 24);
}

PortTopo topo_of(std::uint8_t b) {
  PortTopo t;
  t.rail = rail_of(b % 5);
  const int len = kLens[(b / 5) % 5];
  t.island = !t.rail.known ? NetPrefix{} : len < 0 ? t.rail : island_of(t.rail, len);
  return t;
}

int link_of(std::uint8_t bit) { return bit ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET; }

// A decodable endpoint from any bytes (each field put in its range), as the peer would write it.
void make_valid_endpoint(std::uint8_t* ep) {
  std::uint32_t qpn, psn;
  std::memcpy(&qpn, ep, 4);
  std::memcpy(&psn, ep + 4, 4);
  qpn = (qpn & 0xffffffu) | 1u;
  psn &= 0xffffffu;
  std::memcpy(ep, &qpn, 4);
  std::memcpy(ep + 4, &psn, 4);
  ep[26] |= 1;                                         // port
  ep[28] %= 3;                                         // link layer
  ep[29] = static_cast<std::uint8_t>(1 + ep[29] % 5);  // MTU code
  ep[30] = 0;                                          // no ECE: its fields 0
  std::memset(ep + 32, 0, 12);
  ep[31] &= 0x87;                                      // QP count - 1, split flag
  const int qps = (ep[31] & 7) + 1;
  for (int i = 1; i < net::kMaxEndpointQps; ++i) {     // the more QP numbers: in range, or 0 beyond
    std::uint32_t q;
    std::memcpy(&q, ep + 44 + 4 * (i - 1), 4);
    q = i < qps ? (q & 0xffffffu) | 1u : 0;
    std::memcpy(ep + 44 + 4 * (i - 1), &q, 4);
  }
}

bool same_verdict(const RequestVerdict& a, const RequestVerdict& b) {
  return a.dev == b.dev && a.active == b.active && a.refusal == b.refusal && a.why == b.why &&
         net::encode_endpoint(a.remote) == net::encode_endpoint(b.remote);
}

// The properties of one verdict, from the facts of the request and the view.
void check_verdict(const RequestView& v, const ReprotectMsg& req, const RequestVerdict& out) {
  FUZZ_REQUIRE(same_verdict(out, judge_request(v, req)));
  const auto remote = net::decode_endpoint(std::span<const std::uint8_t>(req.endpoint, sizeof req.endpoint));
  const bool rescue = req.ok == kRescueSlot || req.ok == kRescueSlot + 1;
  const bool renumber = remote && rescue && static_cast<int>(req.ok - kRescueSlot) == v.active;
  const bool refused_in_failover = renumber && v.phase != FailoverState::normal;
  // The active slot.
  FUZZ_REQUIRE(out.active == (renumber && !refused_in_failover ? 1 - v.active : v.active));
  if (!remote) {
    FUZZ_REQUIRE(!out.dev && out.refusal == 0 && out.why == remote.error().message);
    return;
  }
  if (refused_in_failover) {
    FUZZ_REQUIRE(!out.dev && out.refusal == 0 && !out.why.empty());
    return;
  }
  // The facts the verdict must follow.
  const Device* target = req.dev == kSameDevice ? v.devs[1 - out.active]
                         : req.dev < v.devices.size() ? v.devices[req.dev].get()
                                                      : nullptr;
  const bool same_link = target && target->port.link_layer == v.devs[out.active]->port.link_layer;
  bool reach = true;
  if (target && req.own_dev != kSameDevice)
    for (const Candidate& theirs : v.peer_cands)
      if (theirs.dev == req.own_dev && !reachable(theirs, candidate_for(*target, *v.home))) reach = false;
  const bool up = target && target->port_up.load();
  const bool keys = req.ctrl_rkey != 0 && req.fifo_rkey != 0;
  if (out.dev) {
    FUZZ_REQUIRE(out.dev == target && same_link && reach && up && keys);
    FUZZ_REQUIRE(out.refusal == 0 && out.why.empty());
    FUZZ_REQUIRE(net::encode_endpoint(out.remote) ==
                 std::vector<std::uint8_t>(req.endpoint, req.endpoint + sizeof req.endpoint));
    // It is one of the process's devices, or one of the comm's own.
    const bool known = std::any_of(v.devices.begin(), v.devices.end(), [&](const auto& d) { return d.get() == out.dev; }) ||
                       out.dev == v.devs[0] || out.dev == v.devs[1];
    FUZZ_REQUIRE(known);
  } else {
    FUZZ_REQUIRE(!out.why.empty());
    FUZZ_REQUIRE(out.refusal == 0 || out.refusal == kPortDown);
    FUZZ_REQUIRE(!(target && same_link && reach && up && keys));  // nothing refused without a reason
    FUZZ_REQUIRE((out.refusal == kPortDown) == (target && same_link && reach && !up));
  }
}

// The receive side's re-protection, as take_request and answer() move it, and the answer each
// attempt got (1: built, waiting for the hello; 0 or kPortDown: refused).
struct Receiver {
  ReprotectState rp;
  std::map<std::uint32_t, std::uint32_t> answered;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in{data, size};
  // The process's devices.
  const int n = 1 + in.u8() % 6;
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < n; ++i) {
    const std::uint8_t b = in.u8();
    auto d = std::make_unique<Device>();
    d->index = i;
    d->port.device = "dev" + std::to_string(i);
    d->port.link_layer = link_of(b & 1);
    d->port_up.store((b & 2) == 0);
    d->topo = topo_of(static_cast<std::uint8_t>(b >> 2));
    devices.push_back(std::move(d));
  }
  // The comm.
  RequestView v;
  const std::uint8_t slots = in.u8();
  v.devs = {devices[slots % n].get(), devices[(slots >> 4) % n].get()};
  const std::uint8_t how = in.u8();
  v.active = how & 1;
  v.phase = static_cast<FailoverState::Phase>((how >> 1) % 4);
  v.home = devices[(how >> 3) % n].get();
  v.devices = devices;
  std::vector<Candidate> cands(in.u8() % 5);
  for (Candidate& c : cands) {
    const std::uint8_t b = in.u8();
    c.dev = in.u8() % 8;
    c.link_layer = static_cast<std::uint8_t>(link_of(b & 1));
    c.flags = kCandUp;
    c.topo = topo_of(static_cast<std::uint8_t>(b >> 1));
  }
  v.peer_cands = cands;

  Receiver r;
  while (in.n > 0) {
    const std::uint8_t hints = in.u8();
    ReprotectMsg m;
    std::memset(&m, 0, sizeof m);
    for (std::size_t i = 0; i < sizeof m; ++i) reinterpret_cast<std::uint8_t*>(&m)[i] = in.u8();
    if (hints & 2) make_valid_endpoint(m.endpoint);
    const RequestOrigin origin = (m.ok & 2) ? RequestOrigin::rescue_mail : RequestOrigin::path;
    if (hints & 4) m.ok = kRescueSlot + (m.ok & 1);
    if (hints & 8) m.dev = kSameDevice;
    if (hints & 16) m.own_dev = kSameDevice;
    if (hints & 32) m.gen = r.rp.gen;
    if (hints & 1) seal(m);
    ReprotectMsg req;
    if (!read_record(m, req)) continue;  // answer(): only a whole record is read (control_record: read_record)
    const RequestAction action = request_action(r.rp, req, origin);
    const bool rescue = req.ok == kRescueSlot || req.ok == kRescueSlot + 1;
    const bool not_ours = rescue && origin == RequestOrigin::path;  // a rescue's, not by the rescue service
    FUZZ_REQUIRE((action == RequestAction::judge) == (!not_ours && newer_gen(req.gen, r.rp.gen)));
    FUZZ_REQUIRE((action == RequestAction::drop) ==
                 (not_ours || (req.gen != r.rp.gen && !newer_gen(req.gen, r.rp.gen))));
    switch (action) {
      case RequestAction::judge: {
        r.rp.job.reset();  // take_request: retire_job
        begin_request(r.rp, req);
        const RequestVerdict verdict = judge_request(v, req);
        check_verdict(v, req, verdict);
        v.active = verdict.active;  // take_request: set_active_slot
        if (!verdict.dev) {
          refuse_request(r.rp, verdict.refusal);
          r.answered[req.gen] = verdict.refusal;
        } else if (hints & 64) {  // the job failed: answer(), building: refused, idle
          refuse_request(r.rp, 0);
          r.rp.step = ReprotectState::idle;
          r.answered[req.gen] = 0;
        } else {  // built and answered: the hello is waited for
          r.rp.job = std::make_shared<PathJob>();
          r.rp.step = ReprotectState::hello;
          r.answered[req.gen] = 1;
        }
        break;
      }
      case RequestAction::answer_again:
        FUZZ_REQUIRE(r.rp.step == ReprotectState::hello && r.rp.job && r.answered.at(req.gen) == 1);
        break;
      case RequestAction::refuse_again:
        FUZZ_REQUIRE(r.rp.step == ReprotectState::idle);
        if (!r.answered.count(req.gen)) {  // gen 0 before any attempt (a sender's first is 1): refused, 0
          FUZZ_REQUIRE(req.gen == 0 && r.answered.empty() && r.rp.refused_ok == 0);
          break;
        }
        FUZZ_REQUIRE(r.answered.at(req.gen) == r.rp.refused_ok && r.rp.refused_ok != 1);
        break;
      case RequestAction::drop:  // nothing changes (answer(): counted)
        break;
      case RequestAction::none:
        // Nothing due: an attempt still building (not modelled: answered when done), one installed
        // (the sender's hello completed before ours), or no attempt yet (gen 0).
        FUZZ_REQUIRE(r.rp.step == ReprotectState::idle && r.rp.refused_gen != r.rp.gen);
        FUZZ_REQUIRE(!r.answered.count(req.gen) || r.answered.at(req.gen) == 1);
        break;
    }
    if ((hints & 128) && r.rp.step == ReprotectState::hello) {  // the hello came: installed
      r.rp.job.reset();
      r.rp.step = ReprotectState::idle;
    }
  }
  return 0;
}
