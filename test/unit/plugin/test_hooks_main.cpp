// Boost.Test entry point of test_hooks_opposite: test_hooks_test.cpp with the other value of
// NCCL_HA_TEST_HOOKS than the build's (see CMakeLists.txt).
#define BOOST_TEST_MODULE nccl_ha_test_hooks_opposite
#include <boost/test/unit_test.hpp>
