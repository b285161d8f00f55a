// The line of re-protection attempts (attempt_gate.hpp): at most `limit` in flight, the rest in
// line, comms without a usable standby before moves, a closed or failed comm's place given back.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <vector>

#include "core/comm.hpp"
#include "ha/attempt_gate.hpp"
#include "ha/liveness.hpp"

using namespace nccl_ha::plugin;

namespace {

std::vector<std::shared_ptr<SendComm>> comms(int n) {
  std::vector<std::shared_ptr<SendComm>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_shared<SendComm>());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(attempt_gate)

BOOST_AUTO_TEST_CASE(at_most_the_limit_in_flight_the_rest_in_line_in_order) {
  AttemptGate gate(2);
  auto c = comms(4);
  BOOST_TEST(gate.enter(*c[0], false));
  BOOST_TEST(gate.enter(*c[1], false));
  BOOST_TEST(!gate.enter(*c[2], false));
  BOOST_TEST(!gate.enter(*c[3], false));
  BOOST_TEST(!gate.enter(*c[2], false));  // asking again keeps its place, no second entry
  BOOST_TEST(gate.in_flight() == 2u);
  BOOST_TEST(gate.waiting() == 2u);
  gate.leave(*c[1]);  // the first in line gets the place
  BOOST_TEST(c[2]->cp.ticket().admitted);
  BOOST_TEST(!c[3]->cp.ticket().admitted);
  BOOST_TEST(gate.enter(*c[2], false));
  gate.leave(*c[0]);
  BOOST_TEST(c[3]->cp.ticket().admitted);
  BOOST_TEST(gate.waiting() == 0u);
  gate.leave(*c[0]);  // leaving twice changes nothing
  BOOST_TEST(gate.in_flight() == 2u);
}

BOOST_AUTO_TEST_CASE(comms_without_a_standby_go_before_moves) {
  AttemptGate gate(1);
  auto c = comms(4);
  BOOST_TEST(gate.enter(*c[0], false));
  BOOST_TEST(!gate.enter(*c[1], true));   // a move, first in line
  BOOST_TEST(!gate.enter(*c[2], false));  // without a standby: before it
  BOOST_TEST(!gate.enter(*c[3], false));
  gate.leave(*c[0]);
  BOOST_TEST(c[2]->cp.ticket().admitted);
  gate.leave(*c[2]);
  BOOST_TEST(c[3]->cp.ticket().admitted);
  gate.leave(*c[3]);
  BOOST_TEST(c[1]->cp.ticket().admitted);
}

BOOST_AUTO_TEST_CASE(a_closed_or_destroyed_comm_gives_its_place_back) {
  AttemptGate gate(1);
  auto c = comms(4);
  BOOST_TEST(gate.enter(*c[0], false));
  BOOST_TEST(!gate.enter(*c[1], false));
  BOOST_TEST(!gate.enter(*c[2], false));
  BOOST_TEST(!gate.enter(*c[3], false));
  c[1].reset();                     // destroyed while in line: skipped
  c[0]->closing.store(true);        // closed while admitted: its place is free at the next look
  BOOST_TEST(gate.enter(*c[2], false));
  BOOST_TEST(gate.in_flight() == 1u);
  BOOST_TEST(!c[3]->cp.ticket().admitted);
  c[2].reset();                     // destroyed while admitted
  BOOST_TEST(gate.enter(*c[3], false));
}

// The request's deadline follows the peer's progress: waited on while its control plane was heard
// from within the last timeout, never beyond kAnswerWaitTimeouts timeouts; never heard: given up.
BOOST_AUTO_TEST_CASE(an_overdue_answer_is_waited_for_while_the_peer_is_heard_from) {
  constexpr std::uint64_t ms = 1'000'000, timeout = 1000 * ms, t0 = 5'000 * ms;
  const std::uint64_t late = t0 + timeout + 1;
  BOOST_TEST(keep_waiting_for_answer(t0, t0 + 300 * ms, late, timeout));    // heard since the request
  BOOST_TEST(keep_waiting_for_answer(t0, t0 - 500 * ms, late - 600 * ms, timeout));  // heard just before it
  BOOST_TEST(!keep_waiting_for_answer(t0, 0, late, timeout));               // never heard from
  // Heard just before the request and quiet since: asked in the middle of a conversation (the peer
  // works through its half of a failover storm, writing nothing back): a second timeout, not a third.
  BOOST_TEST(keep_waiting_for_answer(t0, t0 - 10 * ms, late, timeout));
  BOOST_TEST(!keep_waiting_for_answer(t0, t0 - 10 * ms, t0 + 2 * timeout, timeout));
  BOOST_TEST(!keep_waiting_for_answer(t0, t0 - timeout - 10 * ms, late, timeout));  // quiet for a whole timeout before it
  BOOST_TEST(keep_waiting_for_answer(t0, late + 5 * ms, late, timeout));    // heard "after now" (another clock read)
  const std::uint64_t cap = t0 + kAnswerWaitTimeouts * timeout;
  BOOST_TEST(keep_waiting_for_answer(t0, cap - 2 * ms, cap - 1 * ms, timeout));
  BOOST_TEST(!keep_waiting_for_answer(t0, cap, cap, timeout));              // the cap, however busy the peer
}

// What the deadline follows: the peer heard from on the pair of the path its record came over. A
// failover notice comes over the standby before the switch: heard on the pair the comm goes on
// with, where its re-protection requests are then written, not on the pair that failed.
BOOST_AUTO_TEST_CASE(a_record_is_heard_on_the_pair_of_the_path_it_came_over) {
  auto c = std::make_shared<SendComm>();
  auto failed = std::make_shared<Path>();
  auto standby = std::make_shared<Path>();
  failed->pair = std::make_shared<PairLiveness>(LivenessKey{}, "rail 0", 1'000'000, 1'000'000);
  standby->pair = std::make_shared<PairLiveness>(LivenessKey{}, "rail 1", 1'000'000, 1'000'000);
  c->paths[0] = failed;
  c->paths[1] = standby;
  heard_from_peer(*c, 5, standby.get());
  BOOST_TEST(standby->pair->heard_ns() == 5u);
  BOOST_TEST(failed->pair->heard_ns() == 0u);
  heard_from_peer(*c, 7);  // no path named (a re-protection answer): the active path's pair
  BOOST_TEST(failed->pair->heard_ns() == 7u);
  Path gone;
  heard_from_peer(*c, 9, &gone);  // not one of its paths any more: the active path's pair
  BOOST_TEST(failed->pair->heard_ns() == 9u);
  BOOST_TEST(standby->pair->heard_ns() == 5u);
}

// Failovers first: an attempt waits until the process's failovers are quiet for kFailoverQuietNs,
// each new failover pushing the quiet back, but no comm waits longer than kMaxFailoverDeferNs.
// A long storm here means the peer's half of it goes on for a while after ours: the quiet waited
// for grows to half the storm's length; a new storm after the quiet starts from kFailoverQuietNs.
BOOST_AUTO_TEST_CASE(after_a_long_failover_storm_the_quiet_is_half_its_length) {
  constexpr std::uint64_t ms = 1'000'000, t0 = 1'000 * ms;
  AttemptGate gate;
  std::uint64_t t = t0;
  for (; t <= t0 + 10'000 * ms; t += 10 * ms) gate.failover_activity(t);  // 10 s of failovers
  const std::uint64_t last = t - 10 * ms;
  std::uint64_t since = 0;
  BOOST_TEST(gate.defer(last + 1 * ms, since) == last + 5'000 * ms);
  since = 0;
  BOOST_TEST(gate.defer(last + 5'000 * ms, since) == 0u);
  gate.failover_activity(last + 6'000 * ms);  // a new storm, one failover
  BOOST_TEST(gate.defer(last + 6'000 * ms, since) == last + 6'000 * ms + kFailoverQuietNs);
}

BOOST_AUTO_TEST_CASE(attempts_wait_for_the_failovers_to_be_quiet_within_a_bound) {
  constexpr std::uint64_t ms = 1'000'000, t0 = 1'000 * ms;
  AttemptGate gate;
  std::uint64_t since = 0;
  BOOST_TEST(gate.defer(t0, since) == 0u);  // no failover yet
  gate.failover_activity(t0);
  BOOST_TEST(gate.defer(t0 + 10 * ms, since) == t0 + kFailoverQuietNs);
  BOOST_TEST(since == t0 + 10 * ms);
  gate.failover_activity(t0 + 200 * ms);  // the storm goes on: the quiet moves
  BOOST_TEST(gate.defer(t0 + kFailoverQuietNs, since) == t0 + 200 * ms + kFailoverQuietNs);
  BOOST_TEST(gate.defer(t0 + 200 * ms + kFailoverQuietNs, since) == 0u);
  BOOST_TEST(since == 0u);
  // A storm without end: the bound.
  std::uint64_t t = t0 + 10'000 * ms, waited = 0;
  for (; t < t0 + 10'000 * ms + 2 * kMaxFailoverDeferNs; t += 100 * ms) {
    gate.failover_activity(t);
    if (gate.defer(t, waited) == 0) break;
    BOOST_TEST(gate.defer(t, waited) <= waited + kMaxFailoverDeferNs);
  }
  BOOST_TEST(t - (t0 + 10'000 * ms) == kMaxFailoverDeferNs);
}

BOOST_AUTO_TEST_SUITE_END()
