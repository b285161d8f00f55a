// Expected/Error helpers and the process-wide log sink.
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <memory>
#include <set>
#include <string>

#include "nccl_ha/reactor/expected.hpp"
#include "nccl_ha/reactor/log.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::test;

BOOST_AUTO_TEST_SUITE(expected)

BOOST_AUTO_TEST_CASE(value_and_error) {
  Expected<int> ok = 42;
  BOOST_TEST(ok.ok());
  BOOST_TEST(static_cast<bool>(ok));
  BOOST_TEST(*ok == 42);
  Expected<int> bad = make_error(Errc::timeout, "slow");
  BOOST_TEST(!bad.ok());
  BOOST_TEST(!static_cast<bool>(bad));
  BOOST_TEST((bad.error().code == Errc::timeout));
  BOOST_TEST(bad.error().message == "slow");

  Expected<std::unique_ptr<int>> moved = std::make_unique<int>(7);
  auto p = std::move(moved).value();
  BOOST_TEST(*p == 7);

  Status s;
  BOOST_TEST(s.ok());
  Status f = make_error(Errc::closed, "gone");
  BOOST_TEST(!f.ok());
  BOOST_TEST((f.error().code == Errc::closed));
}

BOOST_AUTO_TEST_CASE(every_error_code_has_a_distinct_name) {
  std::set<std::string> names;
  const int last = static_cast<int>(Errc::peer_error);
  for (int e = 0; e <= last; ++e) {
    std::string n = to_string(static_cast<Errc>(e));
    BOOST_TEST(n != "unknown error");
    names.insert(n);
  }
  BOOST_TEST(names.size() == static_cast<std::size_t>(last + 1));
  BOOST_TEST(std::string(to_string(static_cast<Errc>(last + 1))) == "unknown error");
  BOOST_TEST(std::string(to_string(Errc::bad_magic)) == "bad magic");
}

BOOST_AUTO_TEST_CASE(errno_error_names_the_call_and_the_errno) {
  const Error e = errno_error(Errc::system, "open(/nope)", ENOENT);
  BOOST_TEST((e.code == Errc::system));
  BOOST_TEST(e.message.rfind("open(/nope): ", 0) == 0u);
  BOOST_TEST(e.message.find("No such file or directory") != std::string::npos);
  BOOST_TEST(e.message.find("(errno " + std::to_string(ENOENT) + ")") != std::string::npos);
  const Error unknown = errno_error(Errc::verbs, "x", 99999);
  BOOST_TEST(unknown.message.find("errno 99999") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(logging)

BOOST_AUTO_TEST_CASE(sink_receives_formatted_lines_at_enabled_levels) {
  LogCapture log(LogLevel::warn);
  BOOST_TEST(log_enabled(LogLevel::error));
  BOOST_TEST(log_enabled(LogLevel::warn));
  BOOST_TEST(!log_enabled(LogLevel::info));
  HA_WARN("value %d and %s", 17, "text");
  HA_INFO("dropped %d", 1);
  HA_DEBUG("dropped %d", 2);
  HA_ERROR("error line");
  const auto recs = log.snapshot();
  BOOST_REQUIRE(recs.size() == 2u);
  BOOST_TEST((recs[0].level == LogLevel::warn));
  BOOST_TEST(recs[0].message == "value 17 and text");
  BOOST_TEST((recs[1].level == LogLevel::error));
  BOOST_TEST(recs[1].message == "error line");
}

BOOST_AUTO_TEST_CASE(level_is_restorable_and_trace_enables_everything) {
  const LogLevel saved = log_level();
  {
    LogCapture log(LogLevel::trace);
    BOOST_TEST((log_level() == LogLevel::trace));
    HA_TRACE("t");
    HA_DEBUG("d");
    BOOST_TEST(log.snapshot().size() == 2u);
  }
  BOOST_TEST((log_level() == saved));
}

BOOST_AUTO_TEST_CASE(long_lines_are_truncated_safely) {
  LogCapture log(LogLevel::warn);
  const std::string big(5000, 'x');
  HA_WARN("%s", big.c_str());
  const auto recs = log.snapshot();
  BOOST_REQUIRE(recs.size() == 1u);
  BOOST_TEST(recs[0].message.size() == 1023u);
  BOOST_TEST(recs[0].message == big.substr(0, 1023));
}

BOOST_AUTO_TEST_CASE(null_sink_restores_the_default) {
  {
    LogCapture log(LogLevel::warn);
    HA_WARN("captured");
    BOOST_TEST(log.snapshot().size() == 1u);
    set_log_sink(nullptr);  // back to stderr: the capture sees nothing more
    set_log_level(LogLevel::error);
    HA_ERROR("this line is expected on stderr (null_sink_restores_the_default)");
    BOOST_TEST(log.snapshot().size() == 1u);
  }
}

BOOST_AUTO_TEST_SUITE_END()
