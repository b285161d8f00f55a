// Which loopback QPs a flush reads through (flush_plan.hpp): the device that wrote, waiting for its
// rebuilt QP, and the active slot only when the writer can no longer be read through.
#include <boost/test/unit_test.hpp>

#include "runtime/flush_plan.hpp"

using namespace nccl_ha::plugin;

namespace {

constexpr int kRxe0 = 0, kRxe1 = 1, kRxe2 = 2;  // Device::index

FlushState wrote(std::uint8_t mask, int dev0 = kRxe0, int dev1 = kRxe1) {
  FlushState f;
  f.want = mask;
  if (mask & 1) f.dev[0] = static_cast<std::int16_t>(dev0);
  if (mask & 2) f.dev[1] = static_cast<std::int16_t>(dev1);
  return f;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flush_plan)

BOOST_AUTO_TEST_CASE(reads_through_every_device_that_wrote) {
  const FlushSlotView v[2] = {{kRxe0, true, true}, {kRxe1, true, true}};
  FlushState f = wrote(0b11);
  const FlushPlan p = plan_flush(f, v, 1);
  BOOST_TEST(p.post == 0b11);
  BOOST_TEST(p.wait == 0);
  BOOST_TEST(p.lost == -1);
  FlushState only0 = wrote(0b01);
  BOOST_TEST(plan_flush(only0, v, 1).post == 0b01);  // not through the active rxe1: it wrote nothing
}

BOOST_AUTO_TEST_CASE(waits_for_the_writers_rebuilt_qp) {
  FlushSlotView v[2] = {{kRxe0, true, false}, {kRxe1, true, true}};  // rxe0's loopback QP failed
  FlushState f = wrote(0b01);
  FlushPlan p = plan_flush(f, v, 0);
  BOOST_TEST(p.post == 0);
  BOOST_TEST(p.wait == 0b01);  // never through rxe1
  BOOST_TEST(f.want == 0b01);
  p = plan_flush(f, v, 1);  // a failover since: still rxe0, which wrote (its port is up)
  BOOST_TEST(p.wait == 0b01);
  BOOST_TEST(p.lost == -1);
  v[0].qp_usable = true;  // rebuilt
  p = plan_flush(f, v, 1);
  BOOST_TEST(p.post == 0b01);
}

BOOST_AUTO_TEST_CASE(writer_down_reads_through_the_active_slot) {
  const FlushSlotView v[2] = {{kRxe0, false, true}, {kRxe1, true, true}};  // rxe0's port down
  FlushState f = wrote(0b01);
  f.out = 0;
  const FlushPlan p = plan_flush(f, v, 1);
  BOOST_TEST(p.lost == 0);
  BOOST_TEST(p.post == 0b10);
  BOOST_TEST(f.dev[1] == kAnyDevice);
  FlushState both = wrote(0b11);  // the active slot wrote too: its read covers it, nothing more
  const FlushPlan q = plan_flush(both, v, 1);
  BOOST_TEST(q.lost == 0);
  BOOST_TEST(q.post == 0b10);
  BOOST_TEST(both.dev[1] == kRxe1);
}

BOOST_AUTO_TEST_CASE(outstanding_read_on_a_device_gone_down_is_given_up) {
  const FlushSlotView v[2] = {{kRxe0, false, true}, {kRxe1, true, true}};
  FlushState f = wrote(0);
  f.out = 0b01;
  f.dev[0] = kRxe0;
  const FlushPlan p = plan_flush(f, v, 1);
  BOOST_TEST(f.out == 0);
  BOOST_TEST(p.lost == 0);
  BOOST_TEST(p.post == 0b10);
  FlushState done = wrote(0);  // the active slot was read already: nothing more to read
  done.out = 0b01;
  done.dev[0] = kRxe0;
  done.done = 0b10;
  const FlushPlan q = plan_flush(done, v, 1);
  BOOST_TEST(q.post == 0);
  BOOST_TEST(done.want == 0);
  BOOST_TEST(done.out == 0);
}

BOOST_AUTO_TEST_CASE(slot_moved_to_another_device_reads_through_the_active_slot) {
  const FlushSlotView v[2] = {{kRxe0, true, true}, {kRxe2, true, true}};  // slot 1 rebound to rxe2
  FlushState f = wrote(0b10);
  const FlushPlan p = plan_flush(f, v, 0);
  BOOST_TEST(p.lost == 1);
  BOOST_TEST(p.post == 0b01);
}

BOOST_AUTO_TEST_CASE(active_writer_down_waits_for_the_failover) {
  FlushSlotView v[2] = {{kRxe0, false, false}, {kRxe1, true, true}};
  FlushState f = wrote(0b01);
  FlushPlan p = plan_flush(f, v, 0);  // the comm is still on rxe0
  BOOST_TEST(p.lost == 0);
  BOOST_TEST(p.wait == 0b01);
  BOOST_TEST(f.dev[0] == kAnyDevice);
  p = plan_flush(f, v, 1);  // the failover: the read follows the active slot
  BOOST_TEST(p.post == 0b10);
  BOOST_TEST(f.want == 0b10);
}

BOOST_AUTO_TEST_CASE(read_of_the_active_slot_waits_for_its_qp) {
  const FlushSlotView v[2] = {{kRxe0, true, false}, {kRxe1, true, true}};
  FlushState f;  // nothing new arrived: through the active slot
  f.want = 0b01;
  const FlushPlan p = plan_flush(f, v, 0);
  BOOST_TEST(p.wait == 0b01);
  BOOST_TEST(p.post == 0);
  BOOST_TEST(p.lost == -1);
}

BOOST_AUTO_TEST_SUITE_END()
