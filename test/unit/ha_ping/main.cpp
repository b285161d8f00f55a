// Boost.Test entry point of test_ha_ping (ha-ping's command-line parser).
#define BOOST_TEST_MODULE ha_ping
#include <boost/test/unit_test.hpp>
