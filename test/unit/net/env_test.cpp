// Environment parsing: env_string, parse_int, env_int, env_int_opt. Malformed or out-of-range
// values fall back (with a WARN naming the variable), never abort.
#include <boost/test/unit_test.hpp>
#include <string>

#include "nccl_ha/net/env.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;
using namespace nccl_ha::test;

namespace {

constexpr const char* kVar = "HA_NCCL_UNIT_TEST_INT";
constexpr const char* kAlt = "NCCL_UNIT_TEST_INT";

struct EnvFixture {
  EnvGuard env;
  LogCapture log;
  EnvFixture() {
    env.unset(kVar);
    env.unset(kAlt);
  }
};

const char* const kMalformed[] = {"12abc", "", " 5", "5 ", "\t5", "5\n", "abc", "-", "+", "1.5", "1e3", "0x10",
                                  "99999999999999999999",       // overflows int64
                                  "9223372036854775808",        // INT64_MAX + 1
                                  "-9223372036854775809",       // INT64_MIN - 1
                                  "123456789012345678901234"};  // longer than any int64

}  // namespace

BOOST_AUTO_TEST_SUITE(env)

BOOST_AUTO_TEST_CASE(parse_int_accepts_plain_decimals) {
  BOOST_TEST(parse_int("0").value_or(-1) == 0);
  BOOST_TEST(parse_int("42").value_or(-1) == 42);
  BOOST_TEST(parse_int("-7").value_or(0) == -7);
  BOOST_TEST(parse_int("007").value_or(0) == 7);
  BOOST_TEST(parse_int("9223372036854775807").value_or(0) == INT64_MAX);
  BOOST_TEST(parse_int("-9223372036854775808").value_or(0) == INT64_MIN);
}

BOOST_AUTO_TEST_CASE(parse_int_rejects_everything_else) {
  for (const char* s : kMalformed) BOOST_TEST(!parse_int(s).has_value(), "'" << s << "' accepted");
}

BOOST_FIXTURE_TEST_CASE(env_string_first_set_name_wins, EnvFixture) {
  const char* which = "untouched";
  BOOST_TEST(!env_string({kVar, kAlt}, &which).has_value());
  BOOST_TEST(std::string(which) == "untouched");
  env.set(kAlt, "alt");
  auto v = env_string({kVar, kAlt}, &which);
  BOOST_TEST(v.value_or("") == "alt");
  BOOST_TEST(std::string(which) == kAlt);
  env.set(kVar, "");  // set but empty still counts as set
  v = env_string({kVar, kAlt}, &which);
  BOOST_TEST(v.has_value());
  BOOST_TEST(v.value_or("x").empty());
  BOOST_TEST(std::string(which) == kVar);
}

BOOST_FIXTURE_TEST_CASE(env_int_unset_gives_the_fallback_silently, EnvFixture) {
  BOOST_TEST(env_int({kVar, kAlt}, 14, 1, 31) == 14);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u);
}

BOOST_FIXTURE_TEST_CASE(env_int_valid_values, EnvFixture) {
  env.set(kVar, "20");
  BOOST_TEST(env_int({kVar}, 14, 1, 31) == 20);
  env.set(kVar, "1");  // both bounds are inclusive
  BOOST_TEST(env_int({kVar}, 14, 1, 31) == 1);
  env.set(kVar, "31");
  BOOST_TEST(env_int({kVar}, 14, 1, 31) == 31);
  env.set(kVar, "-3");
  BOOST_TEST(env_int({kVar}, 0, -5, 5) == -3);
  env.unset(kVar);
  env.set(kAlt, "9");  // second name used when the first is unset
  BOOST_TEST(env_int({kVar, kAlt}, 14, 1, 31) == 9);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(env_int_malformed_values_fall_back_with_a_warning, EnvFixture) {
  for (const char* bad : kMalformed) {
    BOOST_TEST_CONTEXT("'" << bad << "'") {
      log.clear();
      env.set(kVar, bad);
      env.set(kAlt, "7");  // not consulted: the first name is set, even if malformed
      BOOST_TEST(env_int({kVar, kAlt}, 14, 1, 31) == 14);
      BOOST_TEST(log.count(LogLevel::warn, {kVar, "14"}) == 1u, log.dump());
    }
  }
}

BOOST_FIXTURE_TEST_CASE(env_int_out_of_range_values_fall_back_with_a_warning, EnvFixture) {
  for (const char* bad : {"0", "32", "-1", "1000000", "9223372036854775807"}) {
    BOOST_TEST_CONTEXT(bad) {
      log.clear();
      env.set(kVar, bad);
      BOOST_TEST(env_int({kVar}, 14, 1, 31) == 14);
      BOOST_TEST(log.count(LogLevel::warn, {kVar, std::string("'") + bad + "'", "14"}) == 1u, log.dump());
    }
  }
}

BOOST_FIXTURE_TEST_CASE(env_int_opt_is_empty_unless_valid, EnvFixture) {
  BOOST_TEST(!env_int_opt({kVar}, 0, 255).has_value());
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u);
  env.set(kVar, "3");
  BOOST_TEST(env_int_opt({kVar}, 0, 255).value_or(-1) == 3);
  for (const char* bad : {"256", "-1", "x", "", " 3"}) {
    BOOST_TEST_CONTEXT("'" << bad << "'") {
      log.clear();
      env.set(kVar, bad);
      BOOST_TEST(!env_int_opt({kVar}, 0, 255).has_value());
      BOOST_TEST(log.count(LogLevel::warn, {kVar}) == 1u, log.dump());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
