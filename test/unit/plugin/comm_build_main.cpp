// Boost.Test entry point of test_comm_build: comms built through the real verbs path (make_send_comm,
// make_recv_comm, attach_standby, make_path) without the plugin's init or its process-wide state.
// Needs an RDMA port: without one every case is skipped; the VM test plugin-comm-build runs it on
// the Soft-RoCE bed and fails if anything was skipped there.
#define BOOST_TEST_MODULE nccl_ha_comm_build
#include <boost/test/unit_test.hpp>
