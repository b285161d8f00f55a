// ha-net-driver's count of this process's verbs objects in `rdma -j resource show` output. The
// kernel names the *thread* that created an object: objects made on a plugin's progress thread
// carry that thread's id, not the process id (seen in the test-bed VMs: the plugin's QPs had
// "pid" = the ncclHaProgress thread's id), so they must count too.
#include <boost/test/unit_test.hpp>
#include <string>

#include "sysinfo.hpp"

namespace {

// `rdma -j resource show qp` in a test-bed guest (process 166, its progress thread 190), plus a
// QP of another process (pid 300) and a user QP whose creating thread has exited (no pid, no comm).
const std::string kQps =
    R"([{"ifindex":0,"ifname":"rxe0","port":1,"lqpn":19,"rqpn":20,"type":"RC","state":"RTS","pdn":1,"pid":190,"comm":"ncclHaProgress"},)"
    R"({"ifindex":0,"ifname":"rxe0","port":1,"lqpn":1,"type":"GSI","state":"RTS","sq-psn":0,"comm":"ib_core"},)"
    R"({"ifindex":1,"ifname":"rxe1","lqpn":20,"rqpn":0,"type":"RC","state":"RESET","pdn":1,"pid":190,"comm":"ncclHaProgress"},)"
    R"({"ifindex":1,"ifname":"rxe1","port":1,"lqpn":18,"rqpn":17,"type":"RC","state":"RTS","pdn":1,"pid":166,"comm":"ha-net-driver"},)"
    R"({"ifindex":1,"ifname":"rxe1","port":1,"lqpn":21,"rqpn":17,"type":"RC","state":"RTS","pdn":2,"pid":300,"comm":"other"},)"
    R"({"ifindex":1,"ifname":"rxe1","port":1,"lqpn":22,"rqpn":23,"type":"RC","state":"ERR","pdn":1}])";

}  // namespace

BOOST_AUTO_TEST_SUITE(driver_sysinfo)

BOOST_AUTO_TEST_CASE(objects_of_every_thread_and_orphans_count) {
  BOOST_TEST(hnd::count_owned(kQps, {166, 190, 191}) == 4);  // 2 of the progress thread, 1 of main, 1 orphan
  BOOST_TEST(hnd::count_owned(kQps, {166}) == 2);            // the old rule (process id only) missed the plugin's
  BOOST_TEST(hnd::count_owned(kQps, {300}) == 2);            // the other process: its QP and the orphan
}

BOOST_AUTO_TEST_CASE(kernel_objects_and_empty_output) {
  BOOST_TEST(hnd::count_owned("[]", {1}) == 0);
  BOOST_TEST(hnd::count_owned(R"([{"ifindex":0,"lqpn":1,"type":"GSI","comm":"ib_core"}])", {1}) == 0);
  BOOST_TEST(hnd::count_owned(R"([{"pid":12,"comm":"x"},{"pid":123,"comm":"y"}])", {12}) == 1);  // no prefix match
}

BOOST_AUTO_TEST_SUITE_END()
