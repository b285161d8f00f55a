// The line of re-protection attempts (attempt_gate.hpp): at most `limit` in flight, the rest in
// line, comms without a usable standby before moves, a closed or failed comm's place given back.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <vector>

#include "attempt_gate.hpp"
#include "comm.hpp"

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
  BOOST_TEST(c[2]->rp.admitted);
  BOOST_TEST(!c[3]->rp.admitted);
  BOOST_TEST(gate.enter(*c[2], false));
  gate.leave(*c[0]);
  BOOST_TEST(c[3]->rp.admitted);
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
  BOOST_TEST(c[2]->rp.admitted);
  gate.leave(*c[2]);
  BOOST_TEST(c[3]->rp.admitted);
  gate.leave(*c[3]);
  BOOST_TEST(c[1]->rp.admitted);
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
  BOOST_TEST(!c[3]->rp.admitted);
  c[2].reset();                     // destroyed while admitted
  BOOST_TEST(gate.enter(*c[3], false));
}

BOOST_AUTO_TEST_SUITE_END()
