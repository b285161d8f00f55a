// Boost.Test entry point of test_driver (ha-net-driver's option parser and resource counting, the
// plugin loader's slot checks).
#define BOOST_TEST_MODULE driver
#include <boost/test/unit_test.hpp>
