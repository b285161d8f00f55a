// What the peer's RDMA-written records make us do, without verbs: the sender's reads of the
// clear-to-send entries (path_ops.hpp read_cts, match_cts, cts_rkey), and the receive side's
// decisions on a re-protection request (control_ops.hpp request_action, judge_request). Fuzzed
// as well (test/fuzz/control_record.cpp, reprotect_msg.cpp).
#include <infiniband/verbs.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "ha/control_ops.hpp"
#include "ha/path_job.hpp"
#include "nccl_ha/net/wire.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {

FifoEntry entry(std::uint64_t seq, std::initializer_list<int> tags) {
  FifoEntry e{};
  std::uint32_t i = 0;
  for (int t : tags) {
    e.addr[i] = 0x10000u * (i + 1);
    e.size[i] = 4096;
    e.rkey[0][i] = 0x100u + i;
    e.rkey[1][i] = 0x200u + i;
    e.tag[i] = t;
    ++i;
  }
  e.nreqs = i;
  e.seq = seq + 1;
  seal(e);
  return e;
}

// Three RoCE ports on rails 10.21/24, 10.22/24, 10.23/24 (islands: the rails), all up; the comm
// runs on 0 (active) and 1 (standby), at home on 0; the peer listed its ports 0 (rail 1) and 1 (rail 2).
struct Comm {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Candidate> peer;
  RequestView view;

  static NetPrefix rail(int k) {
    std::array<std::uint8_t, 16> a{};
    a[10] = a[11] = 0xff;
    a[12] = 10;
    a[13] = static_cast<std::uint8_t>(20 + k);
    return make_prefix(a, 120);
  }
  Comm() {
    for (int i = 0; i < 3; ++i) {
      auto d = std::make_unique<Device>();
      d->index = i;
      d->port.device = "rxe" + std::to_string(i);
      d->port.link_layer = IBV_LINK_LAYER_ETHERNET;
      d->topo.rail = d->topo.island = rail(i + 1);
      devices.push_back(std::move(d));
    }
    for (int i = 0; i < 2; ++i) {
      Candidate c;
      c.dev = static_cast<std::uint8_t>(i);
      c.link_layer = IBV_LINK_LAYER_ETHERNET;
      c.flags = kCandUp;
      c.topo.rail = c.topo.island = rail(i + 1);
      peer.push_back(c);
    }
    view.devs = {devices[0].get(), devices[1].get()};
    view.active = 0;
    view.home = devices[0].get();
    view.peer_cands = peer;
    view.devices = devices;
  }
};

ReprotectMsg request(std::uint32_t gen, std::uint32_t dev = kSameDevice, std::uint32_t own_dev = kSameDevice) {
  ReprotectMsg m;
  net::Endpoint ep{};
  ep.qpn = 0x42;
  ep.psn = 0x1234;
  ep.port = 1;
  ep.link_layer = IBV_LINK_LAYER_ETHERNET;
  ep.mtu = IBV_MTU_1024;
  const auto bytes = net::encode_endpoint(ep);
  std::memcpy(m.endpoint, bytes.data(), sizeof m.endpoint);
  m.ok = 1;
  m.gen = gen;
  m.dev = dev;
  m.own_dev = own_dev;
  m.ctrl_rkey = 0x1111;
  m.fifo_rkey = 0x2222;
  seal(m);
  return m;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(clear_to_send)

BOOST_AUTO_TEST_CASE(an_entry_is_taken_only_whole_for_its_seq_with_1_to_8_buffers) {
  FifoEntry e = entry(41, {7, 9}), out;
  BOOST_TEST((read_cts(e, 41, out) == CtsRead::whole));
  BOOST_TEST(out.nreqs == 2u);
  BOOST_TEST((read_cts(e, 40, out) == CtsRead::not_posted));
  FifoEntry torn = e;
  torn.addr[1] ^= 1;  // a word of the write still missing
  BOOST_TEST((read_cts(torn, 41, out) == CtsRead::landing));
  FifoEntry bad = e;
  bad.nreqs = kMaxRecvs + 1;
  seal(bad);
  BOOST_TEST((read_cts(bad, 41, out) == CtsRead::corrupt));
  bad.nreqs = 0;
  seal(bad);
  BOOST_TEST((read_cts(bad, 41, out) == CtsRead::corrupt));
}

BOOST_AUTO_TEST_CASE(sends_take_the_first_free_buffer_of_their_tag) {
  const FifoEntry e = entry(0, {5, 7, 5});
  BOOST_TEST(match_cts(e, 0, 5) == 0u);
  BOOST_TEST(match_cts(e, 0b001, 5) == 2u);
  BOOST_TEST(match_cts(e, 0b101, 5) == 3u);  // none left: nreqs
  BOOST_TEST(match_cts(e, 0, 8) == 3u);
  BOOST_TEST(match_cts(e, 0, 7) == 1u);
}

BOOST_AUTO_TEST_CASE(a_replay_takes_a_key_only_from_a_whole_entry_holding_its_buffer) {
  const FifoEntry e = entry(3, {1, 2});
  std::uint32_t rkey = 0xdead;
  BOOST_TEST(cts_rkey(e, 3, 1, 1, rkey));
  BOOST_TEST(rkey == 0x201u);
  rkey = 0xdead;
  BOOST_TEST(!cts_rkey(e, 3, 2, 0, rkey));  // no buffer 2
  BOOST_TEST(!cts_rkey(e, 4, 0, 0, rkey));  // another receive's entry
  FifoEntry lying = e;
  lying.nreqs = 200;
  seal(lying);
  BOOST_TEST(!cts_rkey(lying, 3, 100, 0, rkey));  // beyond the entry, whatever nreqs says
  BOOST_TEST(rkey == 0xdeadu);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reprotect_request)

BOOST_AUTO_TEST_CASE(a_request_for_the_standby_slot_is_built_on_its_device) {
  Comm c;
  const RequestVerdict v = judge_request(c.view, request(1, kSameDevice, 1));
  BOOST_TEST(v.dev == c.devices[1].get());
  BOOST_TEST(v.active == 0);
  BOOST_TEST(v.why.empty());
  BOOST_TEST(v.remote.qpn == 0x42u);
  BOOST_TEST(judge_request(c.view, request(1, 2)).dev == c.devices[2].get());  // another device, named
}

BOOST_AUTO_TEST_CASE(a_device_down_is_refused_with_port_down) {
  Comm c;
  c.devices[2]->port_up.store(false);
  const RequestVerdict v = judge_request(c.view, request(1, 2));
  BOOST_TEST(!v.dev);
  BOOST_TEST(v.refusal == kPortDown);
  BOOST_TEST(v.why == "rxe2:1: the port is not active");
}

BOOST_AUTO_TEST_CASE(every_other_refusal_says_why) {
  Comm c;
  auto refused = [&](const ReprotectMsg& m, const std::string& why) {
    const RequestVerdict v = judge_request(c.view, m);
    BOOST_TEST(!v.dev);
    BOOST_TEST(v.refusal == 0u);
    BOOST_TEST(v.why.find(why) != std::string::npos, v.why);
  };
  refused(request(1, 7), "does not exist here");
  ReprotectMsg m = request(1);
  m.ctrl_rkey = 0;
  refused(m, "no keys");
  m = request(1);
  m.endpoint[26] = 0;  // port 0
  refused(m, "endpoint");
  c.devices[2]->port.link_layer = IBV_LINK_LAYER_INFINIBAND;
  refused(request(1, 2), "another link layer");
  c.devices[2]->port.link_layer = IBV_LINK_LAYER_ETHERNET;
  // Islands of /23: rail 10.21 (the peer's port 0) and 10.23 (ours 2) do not reach each other.
  c.peer[0].topo.island = island_of(c.peer[0].topo.rail, 23);
  c.devices[2]->topo.island = island_of(c.devices[2]->topo.rail, 23);
  refused(request(1, 2, 0), "cannot reach");
}

BOOST_AUTO_TEST_CASE(a_rescue_for_our_active_slot_renumbers_it_outside_a_failover_only) {
  Comm c;
  ReprotectMsg m = request(4);
  m.ok = kRescueSlot + 0;  // the sender rebuilds its slot 0, which we count as active
  seal(m);
  RequestVerdict v = judge_request(c.view, m);
  BOOST_TEST(v.active == 1);
  BOOST_TEST(v.dev == c.devices[0].get());  // our new standby slot's device
  m.ok = kRescueSlot + 1;
  seal(m);
  BOOST_TEST(judge_request(c.view, m).active == 0);  // the slots agree already
  m.ok = kRescueSlot + 0;
  seal(m);
  c.view.phase = FailoverState::draining;
  v = judge_request(c.view, m);
  BOOST_TEST(!v.dev);
  BOOST_TEST(v.active == 0);
  BOOST_TEST(v.why.find("during a failover") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_reminder_gets_the_answer_its_attempt_got) {
  const auto path = RequestOrigin::path;
  ReprotectState rp;
  rp.gen = 6;
  BOOST_TEST((request_action(rp, request(7), path) == RequestAction::judge));
  rp.step = ReprotectState::building;
  BOOST_TEST((request_action(rp, request(6), path) == RequestAction::none));  // answered when built
  rp.step = ReprotectState::hello;
  rp.job = std::make_shared<PathJob>();
  BOOST_TEST((request_action(rp, request(6), path) == RequestAction::answer_again));
  rp.job.reset();
  rp.step = ReprotectState::idle;
  rp.refused_gen = 6;
  BOOST_TEST((request_action(rp, request(6), path) == RequestAction::refuse_again));
  rp.refused_gen = 5;  // installed (take_request leaves gen - 1 until a refusal)
  BOOST_TEST((request_action(rp, request(6), path) == RequestAction::none));
}

// Newer attempts only: an older gen (a write that landed late, a peer's bug) is dropped, whatever
// state we are in; the order is the serial-number order, so a peer's gen that wrapped is newer.
BOOST_AUTO_TEST_CASE(an_older_attempt_is_dropped) {
  const auto path = RequestOrigin::path;
  ReprotectState rp;
  begin_request(rp, request(6));
  refuse_request(rp, kPortDown);
  BOOST_TEST((request_action(rp, request(6), path) == RequestAction::refuse_again));
  BOOST_TEST((request_action(rp, request(5), path) == RequestAction::drop));
  BOOST_TEST((request_action(rp, request(0), path) == RequestAction::drop));
  BOOST_TEST((request_action(rp, request(6 + 0x80000000u), path) == RequestAction::drop));  // half the circle away
  begin_request(rp, request(0xffffffffu));
  BOOST_TEST((request_action(rp, request(0xfffffffeu), path) == RequestAction::drop));
  BOOST_TEST((request_action(rp, request(0), path) == RequestAction::judge));  // wrapped: newer
  begin_request(rp, request(0));
  BOOST_TEST((request_action(rp, request(0), path) == RequestAction::none));
  BOOST_TEST(rp.attempts == 3u);
  BOOST_TEST(newer_gen(1, 0));
  BOOST_TEST(!newer_gen(0, 0));
  BOOST_TEST(newer_gen(0, 0xffffffffu));
}

// A rescue's request (ok kRescueSlot + s: it may renumber our slots) is taken only as the rescue
// service's mail (a proven TCP request); the same bytes written over a path are dropped, however new.
BOOST_AUTO_TEST_CASE(a_rescues_request_is_taken_only_by_rescue_mail) {
  ReprotectState rp;
  rp.gen = 3;
  for (std::uint32_t slot : {0u, 1u}) {
    ReprotectMsg m = request(4);
    m.ok = kRescueSlot + slot;
    seal(m);
    BOOST_TEST((request_action(rp, m, RequestOrigin::path) == RequestAction::drop));
    BOOST_TEST((request_action(rp, m, RequestOrigin::rescue_mail) == RequestAction::judge));
    m.gen = 2;
    seal(m);
    BOOST_TEST((request_action(rp, m, RequestOrigin::rescue_mail) == RequestAction::drop));  // older, even as mail
  }
  BOOST_TEST((request_action(rp, request(4), RequestOrigin::rescue_mail) == RequestAction::judge));
}

BOOST_AUTO_TEST_SUITE_END()
