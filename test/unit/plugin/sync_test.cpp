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

// The soft RTO's allowance for a large write: its bytes at a tenth of the port's rate.
BOOST_AUTO_TEST_CASE(rto_allowance_is_a_tenth_of_the_port_rate) {
  constexpr std::uint64_t MiB = 1ull << 20;
  BOOST_TEST(write_allowance_ns(0, 100000) == 0u);
  // 100 Gb/s: a tenth is 1.25 GB/s, so 16 MiB take 13.4 ms.
  BOOST_TEST(write_allowance_ns(16 * MiB, 100000) == 16 * MiB * 80000 / 100000);
  BOOST_TEST(write_allowance_ns(16 * MiB, 100000) / 1000000 == 13u);
  // Soft-RoCE without a known netdev speed reports SDR 1x (2500 Mb/s): 64 MiB take 2.15 s.
  BOOST_TEST(write_allowance_ns(64 * MiB, 2500) / 10000000 == 214u);
  BOOST_TEST(write_allowance_ns(64 * MiB, 0) == write_allowance_ns(64 * MiB, 2500));  // speed unknown
  BOOST_TEST(write_allowance_ns(64 * MiB, -1) == write_allowance_ns(64 * MiB, 2500));
}
