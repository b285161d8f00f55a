// Boost.Test entry point of test_reactor (rdma_reactor: reactor, signal, fd watcher,
// completion loop, async-event classification, Expected, logging).
#define BOOST_TEST_MODULE nccl_ha_reactor
#include <boost/test/unit_test.hpp>
