// The failover agreement (failover.cpp): what the receiver reports and how the sender reads it.
// Exactly-once rests on these two functions: a buffer reported received is never replayed, a
// buffer not reported is always replayed.
#include <boost/test/unit_test.hpp>

#include "datapath.hpp"

using namespace nccl_ha::plugin;

namespace {

struct Receiver {
  std::array<Request, kMaxRequests> reqs{};
  std::uint64_t next = 0;  // next irecv sequence number

  // irecv of n buffers; returns its seq.
  std::uint64_t post(int n) {
    Request& r = reqs[next % kMaxRequests];
    BOOST_REQUIRE(r.type == ReqType::free);
    r.type = ReqType::recv;
    r.nreqs = static_cast<std::uint8_t>(n);
    r.done_mask = 0;
    r.seq = next;
    return next++;
  }
  void receive(std::uint64_t seq, unsigned index) { reqs[seq % kMaxRequests].done_mask |= std::uint8_t(1u << index); }
  void hand_back(std::uint64_t seq) { reqs[seq % kMaxRequests].type = ReqType::free; }  // test() said done
};

}  // namespace

BOOST_AUTO_TEST_SUITE(failover_agreement)

BOOST_AUTO_TEST_CASE(nothing_posted_reports_nothing_received) {
  Receiver rx;
  const SyncMsg m = receiver_report(rx.reqs, rx.next);
  BOOST_TEST(m.base == 0u);
  for (unsigned i = 0; i < kMaxRecvs; ++i) BOOST_TEST(!delivered(m, 0, i));
}

BOOST_AUTO_TEST_CASE(partly_received_groups_report_exactly_their_buffers) {
  Receiver rx;
  const auto a = rx.post(4);
  const auto b = rx.post(1);
  rx.receive(a, 0);
  rx.receive(a, 2);
  const SyncMsg m = receiver_report(rx.reqs, rx.next);
  BOOST_TEST(m.base == a);
  BOOST_TEST(delivered(m, a, 0));
  BOOST_TEST(!delivered(m, a, 1));
  BOOST_TEST(delivered(m, a, 2));
  BOOST_TEST(!delivered(m, a, 3));
  BOOST_TEST(!delivered(m, b, 0));
  BOOST_TEST(!delivered(m, rx.next, 0));  // not posted: never "received"
}

BOOST_AUTO_TEST_CASE(receives_handed_back_out_of_order_count_as_received) {
  Receiver rx;
  for (int i = 0; i < 40; ++i) rx.hand_back(rx.post(1));  // wrap the slot ring once
  const auto old = rx.post(2);
  const auto done_early = rx.post(8);
  const auto pending = rx.post(1);
  for (unsigned k = 0; k < 8; ++k) rx.receive(done_early, k);
  rx.hand_back(done_early);  // NCCL tested it before the older one
  rx.receive(old, 1);
  const SyncMsg m = receiver_report(rx.reqs, rx.next);
  BOOST_TEST(m.base == old);
  BOOST_TEST(!delivered(m, old, 0));
  BOOST_TEST(delivered(m, old, 1));
  for (unsigned k = 0; k < 8; ++k) BOOST_TEST(delivered(m, done_early, k));
  BOOST_TEST(!delivered(m, pending, 0));
  BOOST_TEST(delivered(m, 10, 0));  // long completed
}

BOOST_AUTO_TEST_CASE(a_full_window_reports_every_slot) {
  Receiver rx;
  rx.hand_back(rx.post(1));
  std::uint64_t first = 0;
  for (int i = 0; i < kMaxRequests; ++i) {
    const auto s = rx.post(8);
    if (i == 0) first = s;
    if (i % 2) rx.receive(s, static_cast<unsigned>(i % 8));
  }
  const SyncMsg m = receiver_report(rx.reqs, rx.next);
  BOOST_TEST(m.base == first);
  for (int i = 0; i < kMaxRequests; ++i)
    for (unsigned k = 0; k < kMaxRecvs; ++k)
      BOOST_TEST(delivered(m, first + static_cast<std::uint64_t>(i), k) == (i % 2 == 1 && k == unsigned(i % 8)));
  BOOST_TEST(!delivered(m, first + kMaxRequests, 0));  // beyond the window
}

BOOST_AUTO_TEST_SUITE_END()
