// The failover agreement (failover.cpp): what the receiver reports and how the sender reads it.
// Exactly-once rests on these two functions: a buffer reported received is never replayed, a
// buffer not reported is always replayed.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <vector>

#include <cstring>

#include "ha/control_ops.hpp"

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

// Several QPs per path (path.hpp, path_ops.hpp post_data): net_ib's mapping of messages to QPs.
// Unsplit, receive n goes on QP n mod count; split, each message in count parts of
// split_chunk bytes (size / count rounded up to 128), part j at j chunks: the parts cover the
// message exactly once, in order, and the ones past its end are empty.
BOOST_AUTO_TEST_CASE(several_qps_map_messages_as_net_ib) {
  Path p;
  BOOST_TEST(p.parts() == 1);
  BOOST_TEST(p.qp_of(7) == 0);
  p.nqps = 4;
  BOOST_TEST(p.parts() == 1);  // not split: each message whole, round robin
  for (std::uint64_t seq = 0; seq < 12; ++seq) BOOST_TEST(p.qp_of(seq) == static_cast<int>(seq % 4));
  BOOST_TEST(p.qp_of((1ull << 40) + 3) == 3);
  p.split = true;
  BOOST_TEST(p.parts() == 4);

  BOOST_TEST(split_chunk(1u << 20, 4) == 262144u);  // 1 MiB on 4 QPs: 256 KiB each
  BOOST_TEST(split_chunk(4096, 4) == 1024u);
  BOOST_TEST(split_chunk(8, 4) == 128u);              // one part of 8 bytes, three empty
  BOOST_TEST(split_chunk(0, 4) == 0u);
  BOOST_TEST(split_chunk(1000, 3) == 384u);           // 333.3 -> 334 -> 384
  BOOST_TEST(split_chunk(0x7fffffffu, 8) == 0x10000000u);
  for (std::uint32_t n = 1; n <= 8; ++n)
    for (std::uint32_t size : {0u, 1u, 8u, 127u, 128u, 129u, 1000u, 4096u, 65536u, 65537u, (1u << 20) + 3, 0x7fffffffu}) {
      const std::uint32_t chunk = split_chunk(size, n);
      BOOST_TEST(chunk % 128 == 0u, size << " on " << n);
      std::uint64_t covered = 0;
      for (std::uint32_t j = 0; j < n; ++j) {  // post_data's parts
        const std::uint32_t offset = std::min(size, j * chunk);
        const std::uint32_t len = std::min(chunk, size - offset);
        BOOST_TEST(offset == covered, size << " on " << n << ": part " << j << " at " << offset);
        covered += len;
      }
      BOOST_TEST(covered == size, size << " on " << n);
    }
}

// Striping by weight (path_ops.hpp weighted_offsets): the parts cover the message once, in order,
// every boundary a multiple of 128 bytes, each part within 128 bytes of its weight's share; a
// zero weight carries nothing; all zero: equal parts; the same weights give the same boundaries.
BOOST_AUTO_TEST_CASE(weighted_parts_cover_each_message_once) {
  std::uint64_t off[9] = {};
  const std::uint32_t even[] = {1, 1};
  weighted_offsets(1u << 20, even, off);
  BOOST_TEST(off[0] == 0u);
  BOOST_TEST(off[1] == 524288u);
  BOOST_TEST(off[2] == 1048576u);
  const std::uint32_t three_to_one[] = {3, 1};  // 400G + 100G-ish members: 3/4 and 1/4
  weighted_offsets(1u << 20, three_to_one, off);
  BOOST_TEST(off[1] == 786432u);
  const std::uint32_t idle[] = {5, 0, 5};
  weighted_offsets(4096, idle, off);
  BOOST_TEST(off[1] == 2048u);
  BOOST_TEST(off[2] == 2048u);  // the member of weight 0: an empty part
  BOOST_TEST(off[3] == 4096u);
  const std::uint32_t none[] = {0, 0, 0, 0};
  weighted_offsets(1024, none, off);
  BOOST_TEST(off[1] == 256u);
  BOOST_TEST(off[3] == 768u);
  weighted_offsets(8, even, off);  // smaller than one alignment unit: all on the first part
  BOOST_TEST(off[1] == 8u);
  BOOST_TEST(off[2] == 8u);

  const std::vector<std::vector<std::uint32_t>> weight_sets = {
      {1}, {1, 1}, {3, 1}, {1, 3}, {0, 1}, {1, 0}, {7, 0, 2}, {100000, 200000, 400000, 25000},
      {1u << 20, 1, 1u << 20, 1, 1u << 20, 1, 1u << 20, 1}, {0, 0, 0, 0, 0, 0, 0, 1}};
  for (const auto& w : weight_sets) {
    std::uint64_t total = 0;
    for (auto x : w) total += x;
    for (std::uint64_t size : {0ull, 1ull, 127ull, 128ull, 129ull, 1000ull, 4096ull, 65537ull, (1ull << 20) + 3,
                               (1ull << 30), (1ull << 40) - 1}) {
      weighted_offsets(size, w, off);
      BOOST_TEST(off[0] == 0u);
      BOOST_TEST(off[w.size()] == size);
      for (std::size_t i = 0; i < w.size(); ++i) {
        BOOST_TEST(off[i] <= off[i + 1], size << ": part " << i);
        BOOST_TEST((off[i] % 128 == 0 || off[i] == size), size << ": part " << i << " at " << off[i]);
        if (w[i] == 0 && total > 0 && off[i] < size) BOOST_TEST(off[i + 1] == off[i], size << ": part " << i);
        // its share, give or take the 128-byte rounding at both ends
        const long double want = static_cast<long double>(size) * w[i] / static_cast<long double>(total ? total : 1);
        if (total > 0)
          BOOST_TEST(std::abs(static_cast<long double>(off[i + 1] - off[i]) - want) <= 256.0L,
                     size << ": part " << i << " " << (off[i + 1] - off[i]) << " for " << want);
      }
    }
  }
}

// Records written by one RDMA write are accepted only whole (comm.hpp: record_check, read_record).
BOOST_AUTO_TEST_SUITE(control_records)

BOOST_AUTO_TEST_CASE(a_sealed_record_reads_whole) {
  FifoEntry e{};
  e.addr[0] = 0x1000;
  e.size[0] = 4096;
  e.tag[0] = 7;
  e.nreqs = 1;
  e.seq = 42;
  seal(e);
  FifoEntry out{};
  BOOST_TEST(read_record(e, out));
  BOOST_TEST(out.seq == 42u);
  BOOST_TEST(out.addr[0] == 0x1000u);
}

BOOST_AUTO_TEST_CASE(a_never_written_record_does_not_check) {
  const SyncMsg zero{};
  SyncMsg out;
  BOOST_TEST(!read_record(zero, out));
  const HelloMsg hz{};
  HelloMsg ho;
  BOOST_TEST(!read_record(hz, ho));
}

// Any byte of the new record still missing (the old record's byte in its place) is caught, at
// every position: what a reader sees while the write is landing in no particular order.
BOOST_AUTO_TEST_CASE(a_record_still_landing_is_refused_at_every_byte) {
  FifoEntry old_e{};
  old_e.addr[0] = 0xdead0000;
  old_e.size[0] = 100;
  old_e.nreqs = 1;
  old_e.seq = 10;
  seal(old_e);
  FifoEntry new_e = old_e;
  for (int i = 0; i < kMaxRecvs; ++i) {
    new_e.addr[i] = 0x20000000u + 0x1000u * static_cast<unsigned>(i);
    new_e.size[i] = 65536;
    new_e.tag[i] = i;
    new_e.rkey[0][i] = 0x100u + static_cast<unsigned>(i);
    new_e.rkey[1][i] = 0x200u + static_cast<unsigned>(i);
  }
  new_e.nreqs = kMaxRecvs;
  new_e.seq = 10 + kMaxRequests;
  seal(new_e);
  const auto* o = reinterpret_cast<const unsigned char*>(&old_e);
  const auto* n = reinterpret_cast<const unsigned char*>(&new_e);
  int refused = 0, differing = 0;
  for (std::size_t i = 0; i < sizeof(FifoEntry); ++i) {
    if (o[i] == n[i]) continue;
    ++differing;
    FifoEntry mixed = new_e;
    reinterpret_cast<unsigned char*>(&mixed)[i] = o[i];
    FifoEntry out;
    if (!read_record(mixed, out)) ++refused;
  }
  BOOST_TEST(differing > 50);
  BOOST_TEST(refused == differing);
  // Half old, half new (either half first) is refused too.
  for (std::size_t cut = 8; cut < sizeof(FifoEntry); cut += 8) {
    FifoEntry a = new_e, b = old_e, out;
    std::memcpy(&a, &old_e, cut);
    std::memcpy(&b, &new_e, cut);
    BOOST_TEST(!read_record(a, out));
    BOOST_TEST(!read_record(b, out));
  }
}

BOOST_AUTO_TEST_SUITE_END()

// HA_NCCL_MAX_RETRIES counts the failovers of the last HA_NCCL_RETRY_WINDOW_MS only.
BOOST_AUTO_TEST_CASE(failovers_are_counted_in_a_sliding_window) {
  constexpr std::uint64_t s = 1'000'000'000;
  std::deque<std::uint64_t> starts;
  BOOST_TEST(failovers_in_window(starts, 5 * s, 60 * s) == 0u);
  for (std::uint64_t t : {10 * s, 20 * s, 30 * s}) starts.push_back(t);
  BOOST_TEST(failovers_in_window(starts, 31 * s, 60 * s) == 3u);
  BOOST_TEST(failovers_in_window(starts, 70 * s, 60 * s) == 2u);  // the one at 10 s left the window
  BOOST_TEST(failovers_in_window(starts, 90 * s, 60 * s) == 0u);
  BOOST_TEST(starts.empty());
  // A weeks-long job: a flap a day never reaches a limit of 10 in a 10-minute window.
  std::deque<std::uint64_t> weeks;
  std::size_t worst = 0;
  for (std::uint64_t day = 1; day <= 60; ++day) {
    const std::uint64_t t = day * 86400 * s;
    worst = std::max(worst, failovers_in_window(weeks, t, 600 * s));
    weeks.push_back(t);
  }
  BOOST_TEST(worst == 0u);
}

// Failback's hold-down (issue #19 item 2): the configured hold after one failover in the window,
// doubled for each further one, bounded; a port that flaps every 30 s does not run its comms into
// HA_NCCL_MAX_RETRIES (10 failovers in 10 minutes) through failbacks.
BOOST_AUTO_TEST_CASE(the_failback_hold_doubles_per_flap_and_is_bounded) {
  constexpr std::uint64_t s = 1'000'000'000;
  BOOST_TEST(dampened_hold_ns(5 * s, 0) == 5 * s);  // a comm that starts failed over (its own pair down at connect)
  BOOST_TEST(dampened_hold_ns(5 * s, 1) == 5 * s);
  BOOST_TEST(dampened_hold_ns(5 * s, 2) == 10 * s);
  BOOST_TEST(dampened_hold_ns(5 * s, 3) == 20 * s);
  BOOST_TEST(dampened_hold_ns(5 * s, 6) == 160 * s);
  BOOST_TEST(dampened_hold_ns(5 * s, 1000) == (5 * s) << kMaxHoldDoublings);
  BOOST_TEST(dampened_hold_ns(0, 9) == 0u);
  // The flapping port: down every 30 s for a moment; the comm fails over whenever it is home.
  std::deque<std::uint64_t> recent;
  std::uint64_t home_at = 0;  // when the comm is back home (failback)
  std::size_t failovers = 0;
  for (std::uint64_t t = 30 * s; t <= 3600 * s; t += 30 * s) {
    if (t < home_at) continue;  // still on the standby: the flap only hits the standby
    const std::size_t n = failovers_in_window(recent, t, 600 * s);
    BOOST_TEST(n < 10u, "HA_NCCL_MAX_RETRIES reached at " << t / s << " s");
    recent.push_back(t);
    ++failovers;
    home_at = t + 1 * s + dampened_hold_ns(5 * s, n + 1);  // re-protected 1 s after the flap, then the hold
  }
  BOOST_TEST(failovers < 120u / 2);  // without the dampening: one per flap
}
