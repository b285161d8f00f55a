// Comms built the way connect / listen build them, on real verbs devices, but with what they need
// passed in (CommEnv: the settings, the reaper) instead of the plugin's process-wide state: the
// plugin's init never runs here, and state() stays null throughout. The Devices are opened by
// hand (context, PD, MR cache, completion channel), as init.cpp open_port opens them, without
// its logging and budget.
//
// Needs RDMA ports (the standby case two): without them every case is skipped with the reason.
// The VM test plugin-comm-build runs this on the Soft-RoCE bed (rxe0, rxe1) and fails if any
// case was skipped there, so "skipped" can only ever mean "this host has no RDMA port".
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/reaper.hpp"
#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "nccl_ha/net/discovery.hpp"
#include "test_expected.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using nccl_ha::test::err_msg;
namespace utf = boost::unit_test;

namespace {

// The host's ACTIVE ports, discovered once (the preconditions ask before any fixture runs).
const std::vector<net::PortInfo>& host_ports() {
  static const std::vector<net::PortInfo> ports = net::discover_ports();
  return ports;
}

// Precondition: at least `n` ACTIVE RDMA ports, else the case is skipped, saying why.
struct NeedsPorts {
  std::size_t n;
  boost::test_tools::assertion_result operator()(utf::test_unit_id) const {
    boost::test_tools::assertion_result res(host_ports().size() >= n);
    if (!res)
      res.message() << "needs " << n << " ACTIVE RDMA port(s), this host has " << host_ports().size()
                    << "; the VM test plugin-comm-build runs this on Soft-RoCE (rxe0, rxe1)";
    return res;
  }
};
utf::precondition needs_ports(std::size_t n) { return utf::precondition(NeedsPorts{n}); }

// What init.cpp open_port builds for a port, minus its logging, budget and registration probes.
std::unique_ptr<Device> open_test_device(const net::PortInfo& port, int index) {
  auto d = std::make_unique<Device>();
  auto ctx = net::open_device(port.device);
  BOOST_TEST_REQUIRE(ctx.ok(), "open " << port.id() << ": " << err_msg(ctx));
  d->ctx = std::move(ctx).value();
  auto pd = net::alloc_pd(d->ctx.get());
  BOOST_TEST_REQUIRE(pd.ok(), "PD on " << port.id() << ": " << err_msg(pd));
  d->pd = std::move(pd).value();
  d->mrs = std::make_unique<MrCache>(d->pd.get());
  d->channel.reset(ibv_create_comp_channel(d->ctx.get()));
  BOOST_TEST_REQUIRE(static_cast<bool>(d->channel), "completion channel on " << port.id());
  d->index = index;
  d->name = port.device;
  d->timeouts = net::QpTimeouts::from_env();
  d->port = port;
  return d;
}

// Opens the first two ports (one if the host has one). Checks that nothing here creates the
// process-wide state, before and after the case.
struct Devices {
  std::vector<std::unique_ptr<Device>> devs;
  void setup() {
    BOOST_TEST_REQUIRE(state() == nullptr, "the plugin's state exists before the case: init ran");
    for (std::size_t i = 0; i < std::min<std::size_t>(2, host_ports().size()); ++i)
      devs.push_back(open_test_device(host_ports()[i], static_cast<int>(i)));
  }
  void teardown() { BOOST_TEST(state() == nullptr, "the plugin's state was created by building comms"); }
  Device& primary() { return *devs.at(0); }
  Device& standby_dev() { return *devs.at(1); }
};

// Non-default values of every setting init_base copies into the comm.
Config tuned_config() {
  Config c;
  c.max_poll = 5;
  c.rto_ms = 1234;
  c.heartbeat_ms = 77;
  c.failover_timeout_ms = 4321;
  c.max_retries = 3;
  c.retry_window_ms = 7000;
  c.enable_failback = true;
  c.failback_hold_ms = 250;
  return c;
}

// A test hook the comm copies (0 / switch in the comm of a build without test hooks).
TestHooks tuned_hooks() {
  TestHooks::Values hooks;
  hooks.failback_stall_ms = 11;
  hooks.failback_stall_at = TestHooks::stall_finish;
  return TestHooks(hooks);
}

void expect_settings_of(const CommBase& c, const Config& cfg, const TestHooks& hooks) {
  BOOST_TEST(c.max_poll == cfg.max_poll);
  BOOST_TEST(c.rto_ns == static_cast<std::uint64_t>(cfg.rto_ms) * 1000000u);
  BOOST_TEST(c.heartbeat_ns == static_cast<std::uint64_t>(cfg.heartbeat_ms) * 1000000u);
  BOOST_TEST(c.failover_timeout_ns == static_cast<std::uint64_t>(cfg.failover_timeout_ms) * 1000000u);
  BOOST_TEST(c.max_retries == static_cast<std::uint32_t>(cfg.max_retries));
  BOOST_TEST(c.retry_window_ns == static_cast<std::uint64_t>(cfg.retry_window_ms) * 1000000u);
  BOOST_TEST(c.failback == cfg.enable_failback);
  BOOST_TEST(c.failback_hold_ns == static_cast<std::uint64_t>(cfg.failback_hold_ms) * 1000000u);
  BOOST_TEST(c.hooks.failback_stall_ns == static_cast<std::uint64_t>(hooks.failback_stall_ms()) * 1000000u);
  BOOST_TEST((c.hooks.failback_stall_at == hooks.failback_stall_at()));
}

// Without a Config the comm keeps CommBase's own defaults (not Config's).
void expect_default_settings(const CommBase& c) {
  const CommBase fresh(c.kind);
  BOOST_TEST(c.max_poll == fresh.max_poll);
  BOOST_TEST(c.rto_ns == fresh.rto_ns);
  BOOST_TEST(c.heartbeat_ns == fresh.heartbeat_ns);
  BOOST_TEST(c.failover_timeout_ns == fresh.failover_timeout_ns);
  BOOST_TEST(c.max_retries == fresh.max_retries);
  BOOST_TEST(c.retry_window_ns == fresh.retry_window_ns);
  BOOST_TEST(c.failback == fresh.failback);
  BOOST_TEST(c.failback_hold_ns == fresh.failback_hold_ns);
  BOOST_TEST(c.hooks.failback_stall_ns == fresh.hooks.failback_stall_ns);
}

// Slot `slot`'s path of `c`: on `d`, its CQ reporting to the device's completion channel on
// behalf of the comm, an RC QP in RESET with the queue depths asked for, its endpoint chosen.
void expect_path(const CommBase& c, int slot, const Device& d, int send_depth, int recv_depth, int link) {
  BOOST_TEST_CONTEXT("slot " << slot << " on " << d.port.id()) {
    const std::shared_ptr<Path>& p = c.paths[slot];
    BOOST_TEST_REQUIRE(static_cast<bool>(p));
    BOOST_TEST(p->dev == &d);
    BOOST_TEST(p->slot == slot);
    BOOST_TEST(p->link.load() == link);
    BOOST_TEST(p->owner.lock().get() == &c);
    BOOST_TEST_REQUIRE(static_cast<bool>(p->cq));
    BOOST_TEST(p->cq->context == d.ctx.get());
    BOOST_TEST(p->cq->cqe >= send_depth + recv_depth);
    BOOST_TEST(p->cq->channel == d.channel.get());  // the comm's control plane is woken by it
    BOOST_TEST(p->cq->cq_context == static_cast<const void*>(&p->owner));
    BOOST_TEST_REQUIRE(p->qp() != nullptr);
    ibv_qp* qp = p->qp();
    BOOST_TEST(qp->qp_type == IBV_QPT_RC);
    BOOST_TEST(qp->pd == d.pd.get());
    BOOST_TEST(qp->send_cq == p->cq.get());
    BOOST_TEST(qp->recv_cq == p->cq.get());
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    BOOST_TEST_REQUIRE(ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_CAP, &init) == 0);
    BOOST_TEST(attr.qp_state == IBV_QPS_RESET);  // local work only: the handshake connects it
    BOOST_TEST(init.cap.max_send_wr >= static_cast<std::uint32_t>(send_depth));
    BOOST_TEST(init.cap.max_recv_wr >= static_cast<std::uint32_t>(recv_depth));
    BOOST_TEST(p->local.qpn == qp->qp_num);
    BOOST_TEST(p->local.port == d.port.port);
    BOOST_TEST(p->local.gid_index == d.port.gid_index);
  }
}

void expect_mr(const net::MrPtr& mr, const Device& d, const void* addr, std::size_t len, const char* what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE(static_cast<bool>(mr));
    BOOST_TEST(mr->context == d.ctx.get());
    BOOST_TEST(mr->pd == d.pd.get());
    BOOST_TEST(mr->addr == addr);
    BOOST_TEST(mr->length == len);
  }
}

// The comm's own memory registered on slot `slot`'s device: what the peer's writes land in.
void expect_keys(CommBase& c, int slot, const Device& d) {
  BOOST_TEST_CONTEXT("keys of slot " << slot << " on " << d.port.id()) {
    const SlotKeys& k = c.keys[slot];
    expect_mr(k.ctrl, d, &c.ctrl, sizeof c.ctrl, "control block");
    expect_mr(k.ctrl_out, d, &c.ctrl_out, sizeof c.ctrl_out, "control writes' source");
    if (c.kind == CommKind::send) {
      auto& s = static_cast<SendComm&>(c);
      expect_mr(k.ring, d, s.fifo, sizeof s.fifo, "FIFO");
    } else {
      auto& r = static_cast<RecvComm&>(c);
      expect_mr(k.ring, d, r.outbox, sizeof r.outbox, "outbox");
    }
    BOOST_TEST(!k.flush_sink);  // no flush QPs asked for
    BOOST_TEST(k.peer_ctrl == 0u);
    BOOST_TEST(k.peer_fifo == 0u);
  }
}

// What both kinds of comm are made with: devices, home, the primary path up, the reaper.
void expect_base(const CommBase& c, const CommEnv& env, const Device& primary, const Device* standby) {
  BOOST_TEST(c.reaper == env.reaper);
  BOOST_TEST(c.devs[0] == &primary);
  BOOST_TEST(c.devs[1] == standby);
  BOOST_TEST(c.home == &primary);
  BOOST_TEST(c.active() == 0);
  BOOST_TEST(c.cp.standby().state == (standby ? StandbyHealth::connecting : StandbyHealth::none));
  BOOST_TEST(static_cast<bool>(c.paths[1]) == (standby != nullptr));
  BOOST_TEST(c.id.rfind(c.kind == CommKind::send ? "send comm " : "recv comm ", 0) == 0u, c.id);
  BOOST_TEST(!c.task);  // no control task: that needs the reactor (start_control, after the handshake)
}

// What both kinds share: the base, slot 0 on the primary, slot 1 on the standby device when there is one
// (both with the kind's queue depths), and every request free and owned by this comm.
template <class Comm>
void expect_comm(Comm& c, const CommEnv& env, Device& primary, Device* standby, int send_depth, int recv_depth) {
  expect_base(c, env, primary, standby);
  expect_path(c, 0, primary, send_depth, recv_depth, Path::up);
  expect_keys(c, 0, primary);
  if (standby) {
    expect_path(c, 1, *standby, send_depth, recv_depth, Path::connecting);
    expect_keys(c, 1, *standby);
  }
  BOOST_TEST(std::all_of(c.reqs.begin(), c.reqs.end(),
                         [&c](const Request& r) { return r.comm == &c && r.type == ReqType::free; }));
}

void expect_send_comm(SendComm& c, const CommEnv& env, Device& primary, Device* standby) {
  expect_comm(c, env, primary, standby, kSendQueueDepth, kSendRecvQueueDepth);
  // The request pool: each request on the free list once.
  BOOST_TEST(c.nfree == static_cast<int>(c.reqs.size()));
  std::vector<int> listed(c.free_list.begin(), c.free_list.end());
  std::sort(listed.begin(), listed.end());
  std::vector<int> all(c.reqs.size());
  std::iota(all.begin(), all.end(), 0);
  BOOST_TEST(listed == all, boost::test_tools::per_element());
}

void expect_recv_comm(RecvComm& c, const CommEnv& env, Device& primary, Device* standby) {
  expect_comm(c, env, primary, standby, kRecvSendQueueDepth, kRecvQueueDepth);
  BOOST_TEST(c.flushed.comm == &c);
  BOOST_TEST((c.flushed.type == ReqType::flush));
  BOOST_TEST(!c.flush_on);
}

// What closeSend / closeRecv do to the port accounting before NCCL's reference goes.
void uncount(CommBase& c) {
  c.closing.store(true);
  account_ports(c);
}

// Hands the devices to the reaper's finalize (as init.cpp destroy_state does) and checks that every
// path was destroyed within `bound`: none pending, none held by anybody, nothing handed off.
void finish_within(Reaper& reaper, std::vector<std::unique_ptr<Device>>& devs, std::chrono::milliseconds bound) {
  const auto out = reaper.finish(std::move(devs), std::chrono::steady_clock::now() + bound, false);
  BOOST_TEST(out.waited_ms < static_cast<double>(bound.count()), "waited " << out.waited_ms << " ms");
  BOOST_TEST(out.pending == 0, out.ports);
  BOOST_TEST(out.held == 0);  // every device's live_paths is 0 again
  BOOST_TEST(!out.handed_off);
}

constexpr std::chrono::milliseconds kReapBound{10000};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(comm_build, Devices)

BOOST_AUTO_TEST_CASE(comms_take_the_settings_passed_in, *needs_ports(1)) {
  const Config cfg = tuned_config();
  const TestHooks hooks = tuned_hooks();
  const CommEnv env{&cfg, nullptr, &hooks};
  Device& a = primary();
  auto s = make_send_comm(env, a, nullptr);
  BOOST_TEST_REQUIRE(s.ok(), err_msg(s));
  comm_built(**s);  // as connect / listen do on the worker
  auto r = make_recv_comm(env, a, nullptr);
  BOOST_TEST_REQUIRE(r.ok(), err_msg(r));
  comm_built(**r);  // as connect / listen do on the worker
  expect_send_comm(**s, env, a, nullptr);
  expect_recv_comm(**r, env, a, nullptr);
  expect_settings_of(**s, cfg, hooks);
  expect_settings_of(**r, cfg, hooks);
  BOOST_TEST(a.live_paths == 0);  // no reaper: ordinary paths, not counted on the device
  BOOST_TEST(a.active_comms.load() == 2);
  BOOST_TEST(a.standby_comms.load() == 0);
  uncount(**s);
  uncount(**r);
  BOOST_TEST(a.active_comms.load() == 0);
}

BOOST_AUTO_TEST_CASE(comms_without_settings_keep_the_defaults, *needs_ports(1)) {
  const CommEnv env{};
  Device& a = primary();
  auto s = make_send_comm(env, a, nullptr);
  BOOST_TEST_REQUIRE(s.ok(), err_msg(s));
  comm_built(**s);  // as connect / listen do on the worker
  auto r = make_recv_comm(env, a, nullptr);
  BOOST_TEST_REQUIRE(r.ok(), err_msg(r));
  comm_built(**r);  // as connect / listen do on the worker
  expect_send_comm(**s, env, a, nullptr);
  expect_recv_comm(**r, env, a, nullptr);
  expect_default_settings(**s);
  expect_default_settings(**r);
  uncount(**s);
  uncount(**r);
}

BOOST_AUTO_TEST_CASE(paths_go_to_the_reaper_passed_in_and_die_after_the_comm, *needs_ports(2)) {
  const Config cfg = tuned_config();
  Reaper reaper;
  const CommEnv env{&cfg, &reaper};
  Device& a = primary();
  Device& b = standby_dev();
  {
    auto s = make_send_comm(env, a, &b);  // both slots at creation (the connector's way)
    BOOST_TEST_REQUIRE(s.ok(), err_msg(s));
    comm_built(**s);  // as connect / listen do on the worker
    auto r = make_recv_comm(env, b, nullptr);
    BOOST_TEST_REQUIRE(r.ok(), err_msg(r));
    comm_built(**r);  // as connect / listen do on the worker
    expect_send_comm(**s, env, a, &b);
    expect_recv_comm(**r, env, b, nullptr);
    BOOST_TEST(a.live_paths == 1);
    BOOST_TEST(b.live_paths == 2);
    BOOST_TEST_REQUIRE(attach_standby(**r, a).ok());  // a later standby goes to the reaper too
    comm_built(**r);
    BOOST_TEST(a.live_paths == 2);
    BOOST_TEST(a.reaping == 0);
    BOOST_TEST(b.reaping == 0);
    uncount(**s);
    uncount(**r);
  }  // the comms dropped: their last references hand the paths to the reaper
  finish_within(reaper, devs, kReapBound);
}

BOOST_AUTO_TEST_CASE(attach_standby_adds_slot_1_on_the_standby_device, *needs_ports(2)) {
  const Config cfg = tuned_config();
  const CommEnv env{&cfg, nullptr};
  Device& a = primary();
  Device& b = standby_dev();
  auto s = make_send_comm(env, a, nullptr);
  BOOST_TEST_REQUIRE(s.ok(), err_msg(s));
  comm_built(**s);  // as connect / listen do on the worker
  auto r = make_recv_comm(env, a, nullptr);
  BOOST_TEST_REQUIRE(r.ok(), err_msg(r));
  comm_built(**r);  // as connect / listen do on the worker
  BOOST_TEST(a.active_comms.load() == 2);
  BOOST_TEST(b.standby_comms.load() == 0);
  const Qos qos{106, 3};  // a standby path carries the comm's QoS (set before the handshake connects it)
  (*s)->qos = qos;
  (*r)->qos = qos;
  for (CommBase* c : {static_cast<CommBase*>(s->get()), static_cast<CommBase*>(r->get())}) {
    BOOST_TEST_CONTEXT((c->kind == CommKind::send ? "send comm" : "recv comm")) {
      BOOST_TEST(c->cp.standby().state == StandbyHealth::none);
      BOOST_TEST_REQUIRE(attach_standby(*c, b).ok());
      comm_built(*c);
      BOOST_TEST(c->devs[1] == &b);
      BOOST_TEST((c->paths[1]->qos == qos));
      BOOST_TEST(c->keys[0].ctrl->pd == a.pd.get());  // slot 0's keys stay on the primary
    }
  }
  expect_send_comm(**s, env, a, &b);  // slot 1 as if the comm had been made with the standby device
  expect_recv_comm(**r, env, a, &b);
  BOOST_TEST(a.active_comms.load() == 2);
  BOOST_TEST(a.standby_comms.load() == 0);
  BOOST_TEST(b.active_comms.load() == 0);
  BOOST_TEST(b.standby_comms.load() == 2);
  uncount(**s);
  uncount(**r);
  BOOST_TEST(a.active_comms.load() == 0);
  BOOST_TEST(b.standby_comms.load() == 0);
}

// Adaptive-routing mode posts two WRs per isend (the write, its size notice: path_ops.cpp
// post_data): a send comm's path on a device in that mode gets the deeper send queue; its standby
// on a device without it, and a receive comm, keep theirs. (Soft-RoCE rounds a queue up to a power
// of two less one: 264 WRs become 511, short of the 520 the mode needs.)
BOOST_AUTO_TEST_CASE(adaptive_routing_deepens_a_send_comms_send_queue, *needs_ports(2)) {
  const CommEnv env{};
  Device& a = primary();
  Device& b = standby_dev();
  a.ar_threshold = 8192;
  BOOST_TEST(queue_depths(CommKind::send, a).send == kSendQueueDepth + kMaxRequests * kMaxRecvs);
  BOOST_TEST(queue_depths(CommKind::send, b).send == kSendQueueDepth);
  BOOST_TEST(queue_depths(CommKind::recv, a).send == kRecvSendQueueDepth);
  auto s = make_send_comm(env, a, &b);
  BOOST_TEST_REQUIRE(s.ok(), err_msg(s));
  comm_built(**s);
  auto r = make_recv_comm(env, a, nullptr);
  BOOST_TEST_REQUIRE(r.ok(), err_msg(r));
  comm_built(**r);
  expect_path(**s, 0, a, kSendQueueDepth + kMaxRequests * kMaxRecvs, kSendRecvQueueDepth, Path::up);
  expect_path(**s, 1, b, kSendQueueDepth, kSendRecvQueueDepth, Path::connecting);
  expect_path(**r, 0, a, kRecvSendQueueDepth, kRecvQueueDepth, Path::up);
  uncount(**s);
  uncount(**r);
  a.ar_threshold = kNoAdaptiveRouting;
}

BOOST_AUTO_TEST_CASE(a_path_the_device_refuses_is_an_error_and_leaks_nothing, *needs_ports(1)) {
  Reaper reaper;
  Device& a = primary();
  ibv_device_attr attr{};
  BOOST_TEST_REQUIRE(ibv_query_device(a.ctx.get(), &attr) == 0);
  BOOST_TEST_MESSAGE(a.port.id() << ": max_cqe " << attr.max_cqe << ", max_qp_wr " << attr.max_qp_wr);
  BOOST_TEST(a.live_paths == 0);
  {
    // An owner, so that the paths' CQs take the device's completion channel as the comms' do. Its
    // own paths are ordinary ones (no reaper): only the paths made here are counted.
    auto owner = make_send_comm(CommEnv{}, a, nullptr);
    BOOST_TEST_REQUIRE(owner.ok(), err_msg(owner));
    const std::weak_ptr<CommBase> weak = *owner;

    auto cq_refused = make_path(&reaper, a, 0, attr.max_cqe, 1, weak);  // CQ depth beyond max_cqe
    BOOST_TEST_REQUIRE(!cq_refused.ok());
    BOOST_TEST(cq_refused.error().message.find("ibv_create_cq") != std::string::npos, cq_refused.error().message);
    BOOST_TEST((cq_refused.error().code == Errc::verbs));

    // The CQ accepted, the QP refused: the half-built path (its CQ) goes to the reaper too. Only
    // where the device's CQs are longer than its QPs (hardware); Soft-RoCE's are not (max_cqe
    // 32767, max_qp_wr 1048576): there a refused QP depth is a refused CQ depth first.
    if (static_cast<long>(attr.max_qp_wr) + 1 + 1 + 8 <= attr.max_cqe) {
      auto qp_refused = make_path(&reaper, a, 0, attr.max_qp_wr + 1, 1, weak);
      BOOST_TEST_REQUIRE(!qp_refused.ok());
      BOOST_TEST(!qp_refused.error().message.empty());
      BOOST_TEST(qp_refused.error().message.find("ibv_create_cq") == std::string::npos, qp_refused.error().message);
    } else {
      BOOST_TEST_MESSAGE("a QP refused with its CQ accepted: not on " << a.port.id() << " (max_qp_wr >= max_cqe)");
    }

    auto fine = make_path(&reaper, a, 0, kSendQueueDepth, kSendRecvQueueDepth, weak);  // the device still builds paths
    BOOST_TEST_REQUIRE(fine.ok(), err_msg(fine));
    BOOST_TEST(a.live_paths >= 1);
    uncount(**owner);
  }
  finish_within(reaper, devs, kReapBound);  // the refused paths and the good one: all destroyed
}

BOOST_AUTO_TEST_SUITE_END()
