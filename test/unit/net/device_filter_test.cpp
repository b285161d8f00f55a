// DeviceFilter: NCCL_IB_HCA syntax (prefix, exact '=', exclude '^', ports, rails and planes,
// lists; the entry that selects a port), malformed
// specs, and from_env() (HA_NCCL_IB_HCA before NCCL_IB_HCA; bad value -> match-all + WARN).
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "nccl_ha/net/device_filter.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;
using namespace nccl_ha::test;

namespace {

DeviceFilter parsed(const std::string& spec) {
  auto f = DeviceFilter::parse(spec);
  BOOST_REQUIRE_MESSAGE(f.ok(), "'" << spec << "' rejected: " << (f.ok() ? "" : f.error().message));
  return std::move(f).value();
}

struct EnvFixture {
  EnvGuard env;
  EnvFixture() {
    env.unset("HA_NCCL_IB_HCA");
    env.unset("NCCL_IB_HCA");
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(device_filter)

BOOST_AUTO_TEST_CASE(empty_spec_and_default_match_everything) {
  for (const auto& f : {parsed(""), DeviceFilter{}}) {
    BOOST_TEST(f.entries().empty());
    BOOST_TEST(!f.exclude());
    BOOST_TEST(!f.exact());
    BOOST_TEST(f.matches("mlx5_0", 1));
    BOOST_TEST(f.matches("rxe0", 2));
    BOOST_TEST(f.matches("", 1));
  }
}

BOOST_AUTO_TEST_CASE(prefix_match) {
  const auto f = parsed("mlx5");
  BOOST_REQUIRE(f.entries().size() == 1u);
  BOOST_TEST(f.entries()[0].name == "mlx5");
  BOOST_TEST(!f.entries()[0].port.has_value());
  BOOST_TEST(f.matches("mlx5", 1));
  BOOST_TEST(f.matches("mlx5_0", 1));
  BOOST_TEST(f.matches("mlx5_10", 2));
  BOOST_TEST(!f.matches("mlx4_0", 1));
  BOOST_TEST(!f.matches("mlx", 1));
  BOOST_TEST(!f.matches("rxe0", 1));
  BOOST_TEST(!f.matches("xmlx5", 1));
}

BOOST_AUTO_TEST_CASE(exact_match) {
  const auto f = parsed("=mlx5_1");
  BOOST_TEST(f.exact());
  BOOST_TEST(!f.exclude());
  BOOST_TEST(f.matches("mlx5_1", 1));
  BOOST_TEST(!f.matches("mlx5_10", 1));
  BOOST_TEST(!f.matches("mlx5_", 1));
  // '=' applies to the whole list.
  const auto g = parsed("=mlx5_0,mlx5_1");
  BOOST_TEST(g.matches("mlx5_0", 1));
  BOOST_TEST(g.matches("mlx5_1", 1));
  BOOST_TEST(!g.matches("mlx5_10", 1));
  BOOST_TEST(!g.matches("mlx5_00", 1));
}

BOOST_AUTO_TEST_CASE(exclusion) {
  const auto f = parsed("^mlx5_3");
  BOOST_TEST(f.exclude());
  BOOST_TEST(!f.exact());
  BOOST_TEST(!f.matches("mlx5_3", 1));
  BOOST_TEST(!f.matches("mlx5_30", 1));  // prefix exclusion
  BOOST_TEST(f.matches("mlx5_2", 1));
  BOOST_TEST(f.matches("rxe0", 1));
}

BOOST_AUTO_TEST_CASE(exact_exclusion_in_either_order) {
  for (const char* spec : {"^=mlx5_3", "=^mlx5_3"}) {
    BOOST_TEST_CONTEXT(spec) {
      const auto f = parsed(spec);
      BOOST_TEST(f.exclude());
      BOOST_TEST(f.exact());
      BOOST_REQUIRE(f.entries().size() == 1u);
      BOOST_TEST(f.entries()[0].name == "mlx5_3");
      BOOST_TEST(!f.matches("mlx5_3", 1));
      BOOST_TEST(f.matches("mlx5_30", 1));  // exact: only that name is excluded
      BOOST_TEST(f.matches("mlx5_2", 1));
    }
  }
}

BOOST_AUTO_TEST_CASE(ports) {
  const auto f = parsed("mlx5_0:1,mlx5_1");
  BOOST_REQUIRE(f.entries().size() == 2u);
  BOOST_TEST(f.entries()[0].name == "mlx5_0");
  BOOST_TEST(f.entries()[0].port.value_or(0) == 1u);
  BOOST_TEST(f.entries()[1].name == "mlx5_1");
  BOOST_TEST(!f.entries()[1].port.has_value());
  BOOST_TEST(f.matches("mlx5_0", 1));
  BOOST_TEST(!f.matches("mlx5_0", 2));
  BOOST_TEST(f.matches("mlx5_1", 1));
  BOOST_TEST(f.matches("mlx5_1", 2));
  BOOST_TEST(f.matches("mlx5_12", 2));  // prefix
  BOOST_TEST(!f.matches("mlx5_2", 1));

  const auto edge = parsed("a:255,b:1");
  BOOST_TEST(edge.matches("a", 255));
  BOOST_TEST(!edge.matches("a", 1));

  const auto excl = parsed("^=mlx5_0:2");
  BOOST_TEST(excl.matches("mlx5_0", 1));
  BOOST_TEST(!excl.matches("mlx5_0", 2));
  BOOST_TEST(excl.matches("mlx5_1", 2));
}

BOOST_AUTO_TEST_CASE(multiple_entries) {
  const auto f = parsed("rxe0,siw,mlx5_2:1");
  BOOST_REQUIRE(f.entries().size() == 3u);
  BOOST_TEST(f.matches("rxe0", 1));
  BOOST_TEST(f.matches("siw_eth0", 1));
  BOOST_TEST(f.matches("mlx5_2", 1));
  BOOST_TEST(!f.matches("mlx5_2", 2));
  BOOST_TEST(!f.matches("rxe1", 1));
  BOOST_TEST(!f.matches("mlx5_0", 1));
}

// NCCL 2.30's entry dev:port:rail:plane, every form; empty fields are unset.
BOOST_AUTO_TEST_CASE(rail_and_plane_fields) {
  struct Form {
    const char* spec;
    std::optional<std::uint32_t> port;
    std::optional<std::int16_t> rail, plane;
  };
  const Form forms[] = {
      {"mlx5_0", {}, {}, {}},         {"mlx5_0:1", 1u, {}, {}},          {"mlx5_0:1:3", 1u, 3, {}},
      {"mlx5_0:1:3:0", 1u, 3, 0},     {"mlx5_0::2", {}, 2, {}},          {"mlx5_0:::1", {}, {}, 1},
      {"mlx5_0:", {}, {}, {}},        {"mlx5_0:::", {}, {}, {}},         {"mlx5_0:2::7", 2u, {}, 7},
      {"mlx5_0:1:32767:16383", 1u, 32767, 16383}, {"=mlx5_0:1:3:0", 1u, 3, 0}, {"^mlx5_0::2:1", {}, 2, 1},
  };
  for (const auto& f : forms) {
    BOOST_TEST_CONTEXT(f.spec) {
      const auto p = parsed(f.spec);
      BOOST_REQUIRE(p.entries().size() == 1u);
      const auto& e = p.entries()[0];
      BOOST_TEST(e.name == "mlx5_0");
      BOOST_TEST((e.port == f.port));
      BOOST_TEST((e.rail == f.rail));
      BOOST_TEST((e.plane == f.plane));
    }
  }
}

// The entry that selected a port gives its rail and plane: the first matching one, never with '^'.
BOOST_AUTO_TEST_CASE(selecting_entry) {
  const auto f = parsed("mlx5_0:1:0:1,mlx5_0::5,mlx5_1:2:,rxe");
  const auto* a = f.selecting_entry("mlx5_0", 1);
  BOOST_REQUIRE(a);
  BOOST_TEST((a->rail == std::optional<std::int16_t>(0)));
  BOOST_TEST((a->plane == std::optional<std::int16_t>(1)));
  const auto* b = f.selecting_entry("mlx5_0", 2);  // the second entry: any port
  BOOST_REQUIRE(b);
  BOOST_TEST((b->rail == std::optional<std::int16_t>(5)));
  BOOST_TEST(!b->plane.has_value());
  const auto* c = f.selecting_entry("mlx5_1", 2);
  BOOST_REQUIRE(c);
  BOOST_TEST(!c->rail.has_value());
  BOOST_TEST(f.selecting_entry("mlx5_1", 1) == nullptr);
  BOOST_TEST(f.selecting_entry("rxe3", 1) == &f.entries()[3]);
  BOOST_TEST(f.selecting_entry("mlx4_0", 1) == nullptr);
  // Exact names: mlx5_0 does not select mlx5_01.
  const auto exact = parsed("=mlx5_0::3");
  BOOST_TEST(exact.selecting_entry("mlx5_01", 1) == nullptr);
  BOOST_REQUIRE(exact.selecting_entry("mlx5_0", 1));
  // '^': the ports left matched no entry; an excluded port is not selected either.
  const auto excl = parsed("^mlx5_0::3:1");
  BOOST_TEST(excl.selecting_entry("mlx5_1", 1) == nullptr);
  BOOST_TEST(excl.selecting_entry("mlx5_0", 1) == nullptr);
  BOOST_TEST(excl.matches("mlx5_1", 1));
  BOOST_TEST(!excl.matches("mlx5_0", 1));
  // No list: nothing selects.
  BOOST_TEST(DeviceFilter{}.selecting_entry("mlx5_0", 1) == nullptr);
}

// Empty entries (a trailing comma, a doubled one) are skipped, as NCCL skips them: the rest of the
// list still filters; a list of nothing but commas is no filter.
BOOST_AUTO_TEST_CASE(empty_entries_are_skipped) {
  for (const char* spec : {"mlx5_0,", ",mlx5_0", "mlx5_0,,", ",,mlx5_0:1,"}) {
    auto f = DeviceFilter::parse(spec);
    BOOST_REQUIRE_MESSAGE(f.ok(), spec);
    BOOST_TEST(f->entries().size() == 1u, spec);
    BOOST_TEST(f->matches("mlx5_0", 1), spec);
    BOOST_TEST(!f->matches("mlx5_1", 1), spec);
  }
  auto two = DeviceFilter::parse("^mlx5_0,,rxe0");
  BOOST_REQUIRE(two.ok());
  BOOST_TEST(two->entries().size() == 2u);
  BOOST_TEST(!two->matches("rxe0", 1));
  BOOST_TEST(two->matches("mlx5_1", 1));
  auto none = DeviceFilter::parse(",,");
  BOOST_REQUIRE(none.ok());
  BOOST_TEST(none->entries().empty());
  BOOST_TEST(none->matches("anything", 1));
}

BOOST_AUTO_TEST_CASE(malformed_specs_are_errors) {
  for (const char* spec : {":1", "mlx5_0,:1", "mlx5:0", "mlx5:256", "mlx5:-1",
                           "mlx5:x", "mlx5: 1", "mlx5:1:2:3:4", "mlx5::::",
                           "mlx5:1:x", "mlx5:1:-1", "mlx5:1:32768", "mlx5::1:y", "mlx5:::-2", "mlx5:::16384",
                           "mlx5:1:2: 3", "mlx5:1:0x1", "^", "=", "^=", "=^", "^^mlx5", "==mlx5",
                           "mlx 5", "mlx5,^rxe0", "mlx5,=rxe0", "^,", "=,,"}) {
    auto f = DeviceFilter::parse(spec);
    BOOST_TEST(!f.ok(), "'" << spec << "' was accepted");
    if (!f.ok()) {
      BOOST_TEST((f.error().code == Errc::invalid_argument), spec);
      BOOST_TEST(!f.error().message.empty());
    }
  }
}

BOOST_FIXTURE_TEST_CASE(from_env_unset_matches_everything, EnvFixture) {
  LogCapture log;
  const auto f = DeviceFilter::from_env();
  BOOST_TEST(f.entries().empty());
  BOOST_TEST(f.matches("anything", 1));
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u);
}

BOOST_FIXTURE_TEST_CASE(from_env_reads_nccl_ib_hca, EnvFixture) {
  env.set("NCCL_IB_HCA", "=rxe0:1");
  const auto f = DeviceFilter::from_env();
  BOOST_TEST(f.exact());
  BOOST_TEST(f.matches("rxe0", 1));
  BOOST_TEST(!f.matches("rxe0", 2));
  BOOST_TEST(!f.matches("rxe01", 1));
}

BOOST_FIXTURE_TEST_CASE(from_env_prefers_ha_nccl_ib_hca, EnvFixture) {
  env.set("NCCL_IB_HCA", "mlx5");
  env.set("HA_NCCL_IB_HCA", "rxe");
  const auto f = DeviceFilter::from_env();
  BOOST_TEST(f.matches("rxe0", 1));
  BOOST_TEST(!f.matches("mlx5_0", 1));
}

BOOST_FIXTURE_TEST_CASE(from_env_bad_value_warns_and_matches_everything, EnvFixture) {
  for (const char* bad : {"mlx5:0", "^", "mlx5,:1", ":1"}) {
    BOOST_TEST_CONTEXT(bad) {
      LogCapture log;
      env.set("HA_NCCL_IB_HCA", bad);
      env.set("NCCL_IB_HCA", "mlx5");  // not consulted: HA_NCCL_IB_HCA is set
      const auto f = DeviceFilter::from_env();
      BOOST_TEST(f.entries().empty());
      BOOST_TEST(!f.exclude());
      BOOST_TEST(f.matches("rxe0", 1));
      BOOST_TEST(f.matches("mlx5_0", 3));
      BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_IB_HCA", bad}) == 1u, log.dump());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
