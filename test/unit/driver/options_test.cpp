// ha-net-driver's command line: the soak options (--churn, --churn-dev, --churn-retry,
// --check-resources), what both ranks must agree on, and usage errors (DriverError kind usage).
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "common.hpp"
#include "fault.hpp"
#include "options.hpp"

namespace {

using hnd::Options;

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ha-net-driver");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return hnd::parse_options(static_cast<int>(args.size()), argv.data());
}

std::vector<std::string> base() { return {"--plugin", "x.so", "--rank", "0"}; }

Options ok(std::vector<std::string> extra) {
  auto args = base();
  args.insert(args.end(), extra.begin(), extra.end());
  return parse(args);
}

// The usage error's message (fails the test if the arguments parse).
std::string usage_error(std::vector<std::string> extra) {
  auto args = base();
  args.insert(args.end(), extra.begin(), extra.end());
  try {
    parse(args);
  } catch (const hnd::DriverError& e) {
    BOOST_CHECK(e.kind == hnd::Fail::usage);
    return e.what();
  }
  BOOST_ERROR("expected a usage error");
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(driver_options)

BOOST_AUTO_TEST_CASE(soak_options_default_off) {
  Options o = ok({});
  BOOST_TEST(o.churn == 0);
  BOOST_TEST(o.churn_dev == -1);
  BOOST_TEST(!o.churn_retry);
  BOOST_TEST(!o.check_resources);
  BOOST_TEST(hnd::shared_params(o).find("churn") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(churn_and_resources) {
  Options o = ok({"--churn", "1000", "--churn-dev", "1", "--churn-retry", "--check-resources", "--min-seconds", "1800",
                  "--timeout", "2700"});
  BOOST_TEST(o.churn == 1000);
  BOOST_TEST(o.churn_dev == 1);
  BOOST_TEST(o.churn_retry);
  BOOST_TEST(o.check_resources);
  // Both ranks must agree on the churn and its retry policy; the device and the resource check are per rank.
  const std::string p = hnd::shared_params(o);
  BOOST_TEST(p.find(" churn=1000 churn_retry=1") != std::string::npos);
  BOOST_TEST(p.find("churn_dev") == std::string::npos);
  BOOST_TEST(p.find("resources") == std::string::npos);
  BOOST_TEST(hnd::shared_params(ok({"--churn", "5"})).find(" churn=5") != std::string::npos);
  BOOST_TEST(hnd::shared_params(ok({"--churn", "5"})).find("churn_retry") == std::string::npos);
}

// Item 6 of issue 31: the management connection's token, from --token or HA_NET_DRIVER_TOKEN
// (per rank, never part of the parameters the ranks exchange in clear).
BOOST_AUTO_TEST_CASE(token_from_the_option_or_the_environment) {
  auto with_env = [](std::vector<std::string> extra, const char* value) {
    auto args = base();
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.begin(), "ha-net-driver");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return hnd::parse_options(static_cast<int>(args.size()), argv.data(), [value](const char* name) -> const char* {
      return std::string(name) == "HA_NET_DRIVER_TOKEN" ? value : nullptr;
    });
  };
  Options none = with_env({}, nullptr);
  BOOST_TEST(none.token.empty());
  BOOST_TEST(none.token_source.empty());
  Options env = with_env({}, "from env");
  BOOST_TEST(env.token == "from env");
  BOOST_TEST(env.token_source == "HA_NET_DRIVER_TOKEN");
  Options opt = with_env({"--token", "from option"}, "from env");
  BOOST_TEST(opt.token == "from option");
  BOOST_TEST(opt.token_source == "--token");
  BOOST_TEST(hnd::shared_params(opt).find("from option") == std::string::npos);
  BOOST_TEST(hnd::shared_params(opt) == hnd::shared_params(none));
  try {
    with_env({}, "");
    BOOST_ERROR("an empty HA_NET_DRIVER_TOKEN must be a usage error");
  } catch (const hnd::DriverError& e) {
    BOOST_TEST((e.kind == hnd::Fail::usage));
    BOOST_TEST(std::string(e.what()).find("HA_NET_DRIVER_TOKEN is empty") == 0u, e.what());
  }
  BOOST_TEST(usage_error({"--token", ""}).find("--token is empty") == 0u);
  BOOST_TEST(usage_error({"--token", std::string(1025, 't')}).find("longer than 1024 bytes") != std::string::npos);
  BOOST_TEST(usage_error({"--token"}).find("needs a value") != std::string::npos);
  BOOST_TEST(hnd::usage(hnd::fault_usage()).find("ANY PROCESS THAT REACHES RANK 0'S PORT CAN BE RANK 1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(usage_errors) {
  BOOST_TEST(usage_error({"--churn", "-1"}).find("--churn") != std::string::npos);
  BOOST_TEST(usage_error({"--churn", "many"}).find("--churn") != std::string::npos);
  BOOST_TEST(usage_error({"--churn"}).find("needs a value") != std::string::npos);
  BOOST_TEST(usage_error({"--churn", "3", "--messages", "0"}).find("integrity phase") != std::string::npos);
  BOOST_TEST(usage_error({"--churn", "3", "--fault", "oversize"}).find("integrity phase") != std::string::npos);
  BOOST_TEST(usage_error({"--churn-dev", "1"}).find("need --churn") != std::string::npos);
  BOOST_TEST(usage_error({"--churn-retry"}).find("need --churn") != std::string::npos);
  BOOST_TEST(usage_error({"--check-resources", "--messages", "0"}).find("integrity phase") != std::string::npos);
  BOOST_TEST(usage_error({"--check-resources", "--fault", "bad-dev"}).find("integrity phase") != std::string::npos);
  BOOST_TEST(usage_error({"--linger", "30", "--no-dlclose"}).find("--linger waits after dlclose") == 0u);
  BOOST_TEST(ok({"--linger", "30"}).linger_s == 30.0);
  BOOST_TEST(ok({}).release_checks);
  BOOST_TEST(!ok({"--no-release-checks"}).release_checks);
}

// --fault: the scenario's name and the options it needs, checked against the scenario table after
// the parse (main.cpp), so that the option parser knows no scenario.
BOOST_AUTO_TEST_CASE(fault_names_and_their_options) {
  auto fault_error = [](std::vector<std::string> extra) -> std::string {
    try {
      hnd::check_fault_options(ok(std::move(extra)));
    } catch (const hnd::DriverError& e) {
      BOOST_TEST((e.kind == hnd::Fail::usage));
      return e.what();
    }
    return "";
  };
  BOOST_TEST(fault_error({"--fault", "no-such-scenario"}).find("--fault: expected one of bad-handle") == 0u);
  BOOST_TEST(fault_error({"--fault", "dead-rail"}).find("needs --comms N") != std::string::npos);
  BOOST_TEST(fault_error({"--fault", "peer-death", "--messages", "1"}).find("needs --messages >= 2") != std::string::npos);
  BOOST_TEST(fault_error({"--fault", "dead-rail", "--comms", "2", "--wait-file", "/tmp/w"}).empty());
  BOOST_TEST(fault_error({"--fault", "oversize", "--wait-file", "/tmp/w"}).find("--wait-file is for") == 0u);
  BOOST_TEST(fault_error({}).empty());
}

BOOST_AUTO_TEST_SUITE_END()
