// Boost.Test entry point of test_plugin_core: the pure parts of the plugin core (configuration,
// APM check, standby map), linked from the static library nccl_ha_plugin. No RDMA, no dlopen.
#define BOOST_TEST_MODULE nccl_ha_plugin_core
#include <boost/test/unit_test.hpp>
