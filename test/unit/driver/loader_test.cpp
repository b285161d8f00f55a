// The tools' plugin loader (tools/plugin-loader): which mandatory slots it requires before and
// after init. NCCL reads only `name` and `init` before calling init, so a table that init fills
// (nccl-rdma-sharp-plugins) must pass the first check; every mandatory slot must be set after.
// The tables are never called: a slot only has to be non-NULL, so "set" is a filler pattern.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "net_adapter.hpp"

namespace {

using ha_loader::Slots;
using Names = std::vector<std::string>;

template <class Net>
Net all_slots_set() {
  Net t;
  std::memset(static_cast<void*>(&t), 0x5a, sizeof t);
  return t;
}

template <class Net>
Names missing(int version, const Net& t, Slots which) {
  return ha_loader::make_adapter(version, &t)->missing_slots(which);
}

const Names kAfterInitV10 = {"devices", "getProperties", "listen", "connect", "accept", "regMr", "deregMr",
                             "isend", "irecv", "iflush", "test", "closeSend", "closeRecv", "closeListen"};

}  // namespace

BOOST_AUTO_TEST_SUITE(plugin_loader)

BOOST_AUTO_TEST_CASE(a_table_init_fills_passes_before_init) {
  ncclNet_v10_t t{};  // name and init only, like nccl-rdma-sharp-plugins' tables before init
  t.name = "Lazy";
  t.init = [](ncclDebugLogger_t, ncclProfilerCallback_t) { return ncclSuccess; };
  BOOST_TEST(missing(10, t, Slots::before_init) == Names{});
  BOOST_TEST(missing(10, t, Slots::after_init) == kAfterInitV10);
}

BOOST_AUTO_TEST_CASE(name_and_init_are_needed_before_init) {
  ncclNet_v10_t t{};
  BOOST_TEST(missing(10, t, Slots::before_init) == (Names{"name", "init"}));
  auto full = all_slots_set<ncclNet_v12_t>();
  full.init = nullptr;
  BOOST_TEST(missing(12, full, Slots::before_init) == Names{"init"});
  BOOST_TEST(missing(12, full, Slots::after_init) == Names{"init"});
}

BOOST_AUTO_TEST_CASE(optional_slots_may_stay_null) {
  auto t = all_slots_set<ncclNet_v10_t>();
  t.regMrDmaBuf = nullptr;
  t.getDeviceMr = nullptr;
  t.irecvConsumed = nullptr;
  t.makeVDevice = nullptr;
  BOOST_TEST(missing(10, t, Slots::after_init) == Names{});
  auto v11 = all_slots_set<ncclNet_v11_t>();
  v11.setNetAttr = nullptr;
  BOOST_TEST(missing(11, v11, Slots::after_init) == Names{});
}

BOOST_AUTO_TEST_CASE(finalize_is_mandatory_from_v11) {
  auto t = all_slots_set<ncclNet_v11_t>();
  t.finalize = nullptr;
  t.isend = nullptr;
  BOOST_TEST(missing(11, t, Slots::before_init) == Names{});
  BOOST_TEST(missing(11, t, Slots::after_init) == (Names{"isend", "finalize"}));
}

BOOST_AUTO_TEST_CASE(versions_outside_6_to_12_have_no_adapter) {
  ncclNet_v10_t t{};
  BOOST_TEST(!ha_loader::make_adapter(5, &t));
  BOOST_TEST(!ha_loader::make_adapter(13, &t));
}

BOOST_AUTO_TEST_SUITE_END()
