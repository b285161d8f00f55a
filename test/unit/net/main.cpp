// Boost.Test entry point of test_net (ha_net: wire codec, TCP handshake, device filter, GID
// selection, environment parsing, sysfs discovery helpers, QP helpers).
#define BOOST_TEST_MODULE nccl_ha_net
#include <boost/test/unit_test.hpp>
