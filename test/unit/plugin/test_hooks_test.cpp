// The plugin's test hooks (test_hooks.hpp). This file is compiled twice: into test_plugin_core
// with the build's NCCL_HA_TEST_HOOKS, and into test_hooks_opposite with the other value, so that
// every build checks both: with hooks, each HA_NCCL_TEST_* variable is read, checked and described;
// without, none is even asked for, nothing is WARNed, and hooks given directly stay off.
#include <boost/test/unit_test.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "map_env.hpp"
#include "runtime/test_hooks.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using namespace nccl_ha::test;

namespace {


const std::map<std::string, std::string> kAllSet = {
    {"HA_NCCL_TEST_ACK_DELAY_MS", "1500"},         {"HA_NCCL_TEST_FAILBACK_STALL_MS", "4000"},
    {"HA_NCCL_TEST_FAILBACK_STALL_AT", "finish"},  {"HA_NCCL_TEST_STANDBY_DELAY_MS", "8000"},
    {"HA_NCCL_TEST_REPROTECT_DELAY_MS", "6000"},   {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS", "16000,7000"},
    {"HA_NCCL_TEST_REAPER_DELAY_MS", "1000:down"}};

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

[[maybe_unused]] std::vector<int> times(const TestHooks& h) { return {h.flush_qp_error_ms().begin(), h.flush_qp_error_ms().end()}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(test_hooks)

BOOST_AUTO_TEST_CASE(nothing_set_nothing_on) {
  LogCapture log;
  MapEnv m;
  const TestHooks h = TestHooks::from_lookup(m.lookup());
  BOOST_TEST(!h.any());
  BOOST_TEST(h.settings().empty());
  BOOST_TEST(h.effects().empty());
  BOOST_TEST(!TestHooks{}.any());
  BOOST_TEST(log.snapshot().empty(), log.dump());
}

BOOST_AUTO_TEST_CASE(every_hook_from_the_variables) {
  LogCapture log;
  MapEnv m;
  m.vars = kAllSet;
  const TestHooks h = TestHooks::from_lookup(m.lookup());
  if constexpr (kTestHooks) {
    BOOST_TEST(h.any());
    BOOST_TEST(h.ack_delay_ms() == 1500);
    BOOST_TEST(h.failback_stall_ms() == 4000);
    BOOST_TEST(h.failback_stall_at() == TestHooks::stall_finish);
    BOOST_TEST(h.standby_delay_ms() == 8000);
    BOOST_TEST(h.reprotect_delay_ms() == 6000);
    BOOST_TEST((times(h) == std::vector<int>{7000, 16000}));
    BOOST_TEST(h.reaper_delay_ms() == 1000);
    BOOST_TEST(h.reaper_delay_down_only());
    BOOST_TEST(h.settings() ==
                   "HA_NCCL_TEST_ACK_DELAY_MS=1500 HA_NCCL_TEST_STANDBY_DELAY_MS=8000 "
                   "HA_NCCL_TEST_REPROTECT_DELAY_MS=6000 HA_NCCL_TEST_FLUSH_QP_ERROR_MS=7000,16000 "
                   "HA_NCCL_TEST_FAILBACK_STALL_MS=4000 HA_NCCL_TEST_FAILBACK_STALL_AT=finish "
                   "HA_NCCL_TEST_REAPER_DELAY_MS=1000:down",
               h.settings());
    // The WARN at init: every hook with what it does. (The VM checks look for the reaper's
    // "HA_NCCL_TEST_REAPER_DELAY_MS=N: "; the driver waits for the listener's own "holding" WARN,
    // which this line must not imitate.)
    const std::string e = h.effects();
    for (const auto& [name, value] : kAllSet) BOOST_TEST(contains(e, name + "="), name);
    BOOST_TEST(contains(e, "HA_NCCL_TEST_REAPER_DELAY_MS=1000:down: QP destructions on ports that are down are delayed"),
               e);
    BOOST_TEST(!contains(e, "holding"), e);
    BOOST_TEST(!contains(e, "the failback waits"), e);
    BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  } else {
    BOOST_TEST(!h.any());
    BOOST_TEST(h.ack_delay_ms() == 0);
    BOOST_TEST(h.failback_stall_ms() == 0);
    BOOST_TEST(h.standby_delay_ms() == 0);
    BOOST_TEST(h.reprotect_delay_ms() == 0);
    BOOST_TEST(h.flush_qp_error_ms().empty());
    BOOST_TEST(h.reaper_delay_ms() == 0);
    BOOST_TEST(!h.reaper_delay_down_only());
    BOOST_TEST(h.settings().empty());
    BOOST_TEST(h.effects().empty());
    BOOST_TEST(m.asked.empty());  // not read at all
    BOOST_TEST(log.snapshot().empty(), log.dump());
  }
}

// Hooks given directly (as a unit test builds them): off in a build without test hooks, whatever
// they hold.
BOOST_AUTO_TEST_CASE(hooks_given_directly) {
  TestHooks::Values v;
  v.ack_delay_ms = 5;
  v.failback_stall_ms = 11;
  v.failback_stall_at = TestHooks::stall_finish;
  v.standby_delay_ms = 6;
  v.reprotect_delay_ms = 7;
  v.flush_qp_error_ms = {1, 2};
  v.reaper_delay_ms = 9;
  v.reaper_delay_down_only = true;
  const TestHooks h(v);
  BOOST_TEST(h.any() == kTestHooks);
  BOOST_TEST(h.ack_delay_ms() == (kTestHooks ? 5 : 0));
  BOOST_TEST(h.failback_stall_ms() == (kTestHooks ? 11 : 0));
  BOOST_TEST(h.failback_stall_at() == (kTestHooks ? TestHooks::stall_finish : TestHooks::stall_switch));
  BOOST_TEST(h.standby_delay_ms() == (kTestHooks ? 6 : 0));
  BOOST_TEST(h.reprotect_delay_ms() == (kTestHooks ? 7 : 0));
  BOOST_TEST(h.flush_qp_error_ms().size() == (kTestHooks ? 2u : 0u));
  BOOST_TEST(h.reaper_delay_ms() == (kTestHooks ? 9 : 0));
  BOOST_TEST(h.reaper_delay_down_only() == kTestHooks);
  BOOST_TEST(h.settings().empty() == !kTestHooks);
}

// Malformed values: with hooks, one WARN naming the variable and the value, the hook off; without,
// nothing read, nothing said.
BOOST_AUTO_TEST_CASE(bad_values) {
  const std::pair<const char*, const char*> bad[] = {
      {"HA_NCCL_TEST_ACK_DELAY_MS", "60001"},     {"HA_NCCL_TEST_FAILBACK_STALL_MS", "-1"},
      {"HA_NCCL_TEST_STANDBY_DELAY_MS", "x"},     {"HA_NCCL_TEST_REPROTECT_DELAY_MS", "1.5"},
      {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS", "7000,"}, {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS", "x"},
      {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS", "-1"},   {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS", "600001"},
      {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS", "1,2,3,4,5,6,7,8,9"}, {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS", "7000;8000"},
      {"HA_NCCL_TEST_REAPER_DELAY_MS", "5s"},     {"HA_NCCL_TEST_REAPER_DELAY_MS", ":down"},
      {"HA_NCCL_TEST_REAPER_DELAY_MS", "1000:up"}, {"HA_NCCL_TEST_REAPER_DELAY_MS", "600001"}};
  for (const auto& [name, value] : bad) {
    BOOST_TEST_CONTEXT(name << "='" << value << "'") {
      LogCapture log;
      MapEnv m;
      m.vars = {{name, value}};
      const TestHooks h = TestHooks::from_lookup(m.lookup());
      BOOST_TEST(!h.any());
      BOOST_TEST(log.count(LogLevel::warn, {name, std::string("'") + value + "'"}) == (kTestHooks ? 1u : 0u),
                 log.dump());
      BOOST_TEST(log.count_at_or_above(LogLevel::warn) == (kTestHooks ? 1u : 0u), log.dump());
    }
  }
}

// HA_NCCL_TEST_FAILBACK_STALL_AT: switch or finish in any case; anything else is WARNed about and
// `switch` used. Only with HA_NCCL_TEST_FAILBACK_STALL_MS does it do (or describe) anything.
BOOST_AUTO_TEST_CASE(failback_stall_point) {
  LogCapture log;
  const std::pair<const char*, TestHooks::FailbackStall> good[] = {{"switch", TestHooks::stall_switch},
                                                                   {"FINISH", TestHooks::stall_finish}};
  for (const auto& [text, at] : good) {
    MapEnv m;
    m.vars = {{"HA_NCCL_TEST_FAILBACK_STALL_AT", text}, {"HA_NCCL_TEST_FAILBACK_STALL_MS", "4000"}};
    const TestHooks h = TestHooks::from_lookup(m.lookup());
    BOOST_TEST(h.failback_stall_at() == (kTestHooks ? at : TestHooks::stall_switch), text);
    BOOST_TEST(h.failback_stall_ms() == (kTestHooks ? 4000 : 0));
  }
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  MapEnv m;
  m.vars = {{"HA_NCCL_TEST_FAILBACK_STALL_AT", "later"}, {"HA_NCCL_TEST_FAILBACK_STALL_MS", "4000"}};
  const TestHooks h = TestHooks::from_lookup(m.lookup());
  BOOST_TEST(h.failback_stall_at() == TestHooks::stall_switch);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_TEST_FAILBACK_STALL_AT='later'", "switch or finish"}) ==
             (kTestHooks ? 1u : 0u), log.dump());
  BOOST_TEST(contains(h.settings(), "HA_NCCL_TEST_FAILBACK_STALL_AT=switch") == kTestHooks);
  MapEnv alone;
  alone.vars = {{"HA_NCCL_TEST_FAILBACK_STALL_AT", "finish"}};
  BOOST_TEST(!TestHooks::from_lookup(alone.lookup()).any());
}

// HA_NCCL_TEST_REAPER_DELAY_MS=MS[:down]; 0 is off.
BOOST_AUTO_TEST_CASE(reaper_delay) {
  LogCapture log;
  const std::tuple<const char*, int, bool> cases[] = {
      {"5000", 5000, false}, {"1000:down", 1000, true}, {"0", 0, false}};
  for (const auto& [text, ms, down] : cases) {
    MapEnv m;
    m.vars = {{"HA_NCCL_TEST_REAPER_DELAY_MS", text}};
    const TestHooks h = TestHooks::from_lookup(m.lookup());
    BOOST_TEST(h.reaper_delay_ms() == (kTestHooks ? ms : 0), text);
    BOOST_TEST(h.reaper_delay_down_only() == (kTestHooks && down), text);
    BOOST_TEST(h.any() == (kTestHooks && ms > 0), text);
  }
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

BOOST_AUTO_TEST_SUITE_END()
