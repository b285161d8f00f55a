// Teardown pieces that need no RDMA device: the count of work requests a failed chained post
// left posted (core/path_ops.cpp post_recvs), and the reaper's bookkeeping (every dropped path reaches it,
// finish() accounts for what is queued and what is still held elsewhere). Paths here have no
// QP or CQ; the blocking destruction on a dead port and the hand-off after finalize's bound are
// tested with real verbs in the VM test plugin-teardown.
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "core/comm.hpp"
#include "core/reaper.hpp"
#include "ha/control_ops.hpp"

using namespace nccl_ha::plugin;

namespace {

template <class Wr>
void link(Wr* wrs, int n) {
  for (int i = 0; i < n; ++i) wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
}

std::unique_ptr<Device> fake_device(const char* name) {
  auto d = std::make_unique<Device>();
  d->port.device = name;
  d->port.port = 1;
  return d;
}

auto soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(5); }

}  // namespace

BOOST_AUTO_TEST_SUITE(teardown)

BOOST_AUTO_TEST_CASE(failed_chained_post_counts_the_wrs_before_bad_wr) {
  ibv_recv_wr r[kMaxRecvs] = {};
  link(r, kMaxRecvs);
  BOOST_TEST(wrs_posted(r, kMaxRecvs, 0, static_cast<ibv_recv_wr*>(nullptr)) == kMaxRecvs);  // success: all
  BOOST_TEST(wrs_posted(r, kMaxRecvs, 0, &r[3]) == kMaxRecvs);  // bad is meaningless on success
  for (int i = 0; i < kMaxRecvs; ++i)
    BOOST_TEST(wrs_posted(r, kMaxRecvs, ENOMEM, &r[i]) == i);  // those before bad were posted
  BOOST_TEST(wrs_posted(r, kMaxRecvs, ENOMEM, static_cast<ibv_recv_wr*>(nullptr)) == 0);  // unknown: none
  ibv_recv_wr other{};
  BOOST_TEST(wrs_posted(r, kMaxRecvs, EINVAL, &other) == 0);   // not in the chain: none
  BOOST_TEST(wrs_posted(r, 3, EINVAL, &r[5]) == 0);            // beyond the n posted: none
  BOOST_TEST(wrs_posted(r, 1, ENOMEM, &r[0]) == 0);
  ibv_send_wr s[4] = {};  // the same for send chains
  link(s, 4);
  BOOST_TEST(wrs_posted(s, 4, ENOMEM, &s[2]) == 2);
  BOOST_TEST(wrs_posted(s, 4, 0, static_cast<ibv_send_wr*>(nullptr)) == 4);
}

BOOST_AUTO_TEST_CASE(every_dropped_path_reaches_the_reaper_and_finish_is_clean) {
  Reaper reaper;
  auto dev = fake_device("fake0");
  Device& d = *dev;
  std::shared_ptr<Path> p = reaper.new_path(d);
  std::shared_ptr<Path> also = p;  // e.g. a re-protection job still holding it
  std::shared_ptr<Path> q = reaper.new_path(d);
  BOOST_TEST(p->dev == &d);
  BOOST_TEST(d.live_paths == 2);
  retire(std::move(p));            // given up, still referenced: not destroyed yet
  BOOST_TEST(!p);
  also.reset();                    // the last reference: to the reaper
  q.reset();                       // dropped without retire (a comm destroyed): to the reaper too
  std::vector<std::unique_ptr<Device>> devs;
  devs.push_back(std::move(dev));
  const auto out = reaper.finish(std::move(devs), soon(), false);
  BOOST_TEST(!out.handed_off);
  BOOST_TEST(out.pending == 0);
  BOOST_TEST(out.held == 0);
  BOOST_TEST(out.ports.empty());
}

BOOST_AUTO_TEST_CASE(finish_accounts_for_paths_held_elsewhere) {
  std::shared_ptr<Path> held;
  {
    Reaper reaper;
    auto a = fake_device("fake0");
    auto b = fake_device("fake1");
    held = reaper.new_path(*a);           // a comm NCCL never closed
    auto gone = reaper.new_path(*b);
    gone.reset();
    std::vector<std::unique_ptr<Device>> devs;
    devs.push_back(std::move(a));
    devs.push_back(std::move(b));
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = reaper.finish(std::move(devs), soon(), false);
    BOOST_TEST(out.pending == 0);
    BOOST_TEST(out.held == 1);            // said at WARN by finalize; fake0 stays open
    BOOST_TEST(!out.handed_off);
    const bool quick = std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2);
    BOOST_TEST(quick, "held paths are not waited for");
  }
  // Released after finalize: destroyed at once (the pool is gone), then its device is closed.
  BOOST_TEST(held->dev->live_paths == 1);
  held.reset();
}

BOOST_AUTO_TEST_CASE(reaper_without_finish_drains_its_queue) {
  auto dev = fake_device("fake0");
  {
    Reaper reaper;
    for (int i = 0; i < 64; ++i) retire(reaper.new_path(*dev));
  }  // the destructor waits for the queue and joins the pool
  BOOST_TEST(dev->live_paths == 0);
  BOOST_TEST(dev->reaping == 0);
}

BOOST_AUTO_TEST_SUITE_END()
