// ha-ping's command line: perftest-like names, --opt=value, --min-bw percentages, QoS
// defaults from the environment, and clear errors for bad values.
#include <boost/test/unit_test.hpp>
#include <map>
#include <string>
#include <vector>

#include "options.hpp"

namespace {

using ha_ping::Options;

struct Env {
  std::map<std::string, std::string> vars;
  ha_ping::EnvLookup lookup() const {
    return [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

nccl_ha::Expected<Options> parse(std::vector<std::string> args, const Env& env = {}) {
  args.insert(args.begin(), "ha-ping");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return ha_ping::parse_options(static_cast<int>(args.size()), argv.data(), env.lookup());
}

Options ok(std::vector<std::string> args, const Env& env = {}) {
  auto o = parse(std::move(args), env);
  BOOST_REQUIRE_MESSAGE(o.ok(), (o.ok() ? std::string() : o.error().message));
  return std::move(o).value();
}

std::string error_of(std::vector<std::string> args, const Env& env = {}) {
  auto o = parse(std::move(args), env);
  BOOST_REQUIRE_MESSAGE(!o.ok(), "expected a parse error");
  return std::move(o).error().message;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(ha_ping_options)

BOOST_AUTO_TEST_CASE(defaults) {
  auto o = ok({});
  BOOST_TEST(o.peer.empty());
  BOOST_TEST(o.window == 8u);
  BOOST_TEST(o.timeout_ms == 30000u);
  BOOST_TEST(o.count == 1u);  // a server serves one client unless told otherwise
  BOOST_TEST(o.tclass == 0);
  BOOST_TEST(o.tclass_source == "default");
  BOOST_TEST(o.sl == 0);
  BOOST_TEST(!o.gid_index.has_value());
  BOOST_TEST(!o.report_gbits);
}

BOOST_AUTO_TEST_CASE(dash_t_is_tx_depth_not_timeout) {
  auto o = ok({"-t", "16", "hostB"});
  BOOST_TEST(o.window == 16u);
  BOOST_TEST(o.timeout_ms == 30000u);
  BOOST_TEST(o.peer == "hostB");
  BOOST_TEST(ok({"--tx-depth=32"}).window == 32u);
  BOOST_TEST(ok({"--window", "4"}).window == 4u);  // alias kept
  BOOST_TEST(ok({"-t128", "--bw-iters", "200"}).window == 128u);
  BOOST_TEST(ok({"--timeout", "5"}).timeout_ms == 5000u);
  // the depth is capped by the write count in count mode, not in duration mode
  BOOST_TEST(ok({"-t", "64", "--bw-iters", "10"}).window == 10u);
  BOOST_TEST(ok({"-t", "64", "--bw-iters", "10", "-D", "2"}).window == 64u);
  BOOST_TEST(contains(error_of({"-t", "0"}), "-t/--tx-depth: '0' is not an integer in [1, 128]"));
  BOOST_TEST(contains(error_of({"-t", "129"}), "[1, 128]"));
}

BOOST_AUTO_TEST_CASE(perftest_names_and_equals_form) {
  auto o = ok({"-d", "mlx5_0", "-i", "1", "-x", "3", "-D", "10", "--report_gbits", "-s", "64K", "-n", "50",
               "hostB:19000"});
  BOOST_TEST(o.ib_dev == "mlx5_0");
  BOOST_TEST(o.ib_port == 1u);
  BOOST_TEST(o.gid_index.value() == 3u);
  BOOST_TEST(o.duration_s == 10u);
  BOOST_TEST(o.report_gbits);
  BOOST_TEST(o.sizes == std::vector<std::uint64_t>{65536});
  BOOST_TEST(o.iters == 50u);
  BOOST_TEST(o.peer == "hostB:19000");

  auto e = ok({"--ib-dev=rxe1", "--ib-port=2", "--gid-index=1", "--duration=3", "--size=8,1M", "--iters=7",
               "--port=18700", "--sizes=4K", "--json-file=/tmp/x.json", "--token=abc"});
  BOOST_TEST(e.ib_dev == "rxe1");
  BOOST_TEST(e.ib_port == 2u);
  BOOST_TEST(e.gid_index.value() == 1u);
  BOOST_TEST(e.duration_s == 3u);
  BOOST_TEST(e.sizes == std::vector<std::uint64_t>{4096});  // the last one wins
  BOOST_TEST(e.iters == 7u);
  BOOST_TEST(e.port == 18700);
  BOOST_TEST(e.json_file == "/tmp/x.json");
  BOOST_TEST(e.token == "abc");
  BOOST_TEST(e.token_source == "--token");
  BOOST_TEST(ok({"--tclass=96", "--sl=3"}).tclass == 96);
  BOOST_TEST(ok({"-T", "96", "-S", "3"}).sl == 3);
  BOOST_TEST(ok({"--version"}).version);
  BOOST_TEST(ok({"--list", "--plugin=/x/libnccl-net-ha.so"}).plugin == "/x/libnccl-net-ha.so");
}

BOOST_AUTO_TEST_CASE(min_bw_mib_or_percent) {
  auto m = ok({"--min-bw", "1000"});
  BOOST_TEST(!m.min_bw_percent);
  BOOST_TEST(m.min_bw == 1000.0);
  BOOST_TEST(ha_ping::min_bw_mib_s(m, 25000).value() == 1000.0);

  auto p = ok({"--min-bw=80%"});
  BOOST_TEST(p.min_bw_percent);
  BOOST_TEST(p.min_bw == 80.0);
  // 80% of 100 Gb/s = 80e9 bit/s = 1e10 B/s = 9536.74 MiB/s
  BOOST_TEST(ha_ping::min_bw_mib_s(p, 100000).value() == 1e10 / 1048576.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(!ha_ping::min_bw_mib_s(p, 0).has_value());  // unknown link speed

  BOOST_TEST(contains(error_of({"--min-bw", "fast"}), "--min-bw: 'fast' is neither"));
  BOOST_TEST(contains(error_of({"--min-bw", "-5"}), "neither"));
  BOOST_TEST(contains(error_of({"--min-bw", "150%"}), "(0%, 100%]"));
  BOOST_TEST(contains(error_of({"--min-bw", "0%"}), "(0%, 100%]"));
  BOOST_TEST(contains(error_of({"--min-bw", "%"}), "neither"));
  // Found by the fuzzer's property (test/fuzz/ha_ping_options.cpp): no infinite threshold.
  for (const char* v : {"inf", "infinity", "1e999", "inf%", "nan"})
    BOOST_TEST(contains(error_of({"--min-bw", v}), "neither"), v);
}

// Item 6 of issue 31: the token is a shared secret (any bytes), from --token or HA_PING_TOKEN; an
// empty one is an error, never "no authentication" by accident.
BOOST_AUTO_TEST_CASE(token_from_the_option_or_the_environment) {
  auto none = ok({});
  BOOST_TEST(none.token.empty());
  BOOST_TEST(none.token_source.empty());
  BOOST_TEST(ok({"--token", "correct horse"}).token == "correct horse");
  BOOST_TEST(ok({"--token=a=b"}).token == "a=b");
  Env env;
  env.vars = {{"HA_PING_TOKEN", "from-env"}};
  auto e = ok({"hostB"}, env);
  BOOST_TEST(e.token == "from-env");
  BOOST_TEST(e.token_source == "HA_PING_TOKEN");
  auto o = ok({"--token", "from-option"}, env);  // the command line wins
  BOOST_TEST(o.token == "from-option");
  BOOST_TEST(o.token_source == "--token");
  BOOST_TEST(ok({"--token", std::string(1024, 'x')}).token.size() == 1024u);

  BOOST_TEST(contains(error_of({"--token", ""}), "--token is empty"));
  BOOST_TEST(contains(error_of({"--token="}), "--token is empty"));
  BOOST_TEST(contains(error_of({"--token", std::string(1025, 'x')}), "--token is longer than 1024 bytes"));
  Env empty;
  empty.vars = {{"HA_PING_TOKEN", ""}};
  BOOST_TEST(contains(error_of({}, empty), "HA_PING_TOKEN is empty"));
  BOOST_TEST(ok({"--token", "x"}, empty).token == "x");  // the option wins over a broken variable
}

BOOST_AUTO_TEST_CASE(max_size_is_a_server_limit) {
  BOOST_TEST(ok({}).max_size == 64ull << 20);
  BOOST_TEST(ok({"--max-size", "1M"}).max_size == 1ull << 20);
  BOOST_TEST(ok({"--max-size=1G"}).max_size == 1ull << 30);
  BOOST_TEST(ok({"--max-size", "4096", "--serve"}).max_size == 4096u);
  for (const char* v : {"0", "2G", "1T", "", "8,1M", "-1", "x"})
    BOOST_TEST(contains(error_of({"--max-size", v}), "--max-size: '" + std::string(v) + "' is not one size in [1, 1G]"), v);
  BOOST_TEST(contains(error_of({"--max-size", "1M", "hostB"}), "--max-size is a server option"));
  // The sizes take a G suffix too, up to the protocol's 1 GiB.
  BOOST_TEST(ok({"--sizes", "8,1G"}).sizes == (std::vector<std::uint64_t>{8, 1ull << 30}));
  BOOST_TEST(error_of({"--sizes", "2G"}) == "--sizes: 2G is larger than 1 GiB");
}

BOOST_AUTO_TEST_CASE(bad_values_are_rejected_clearly) {
  BOOST_TEST(error_of({"--iters"}) == "--iters needs a value");
  BOOST_TEST(error_of({"-n"}) == "-n needs a value");
  BOOST_TEST(error_of({"--bogus"}) == "unknown option --bogus");
  BOOST_TEST(error_of({"-q"}) == "unknown option -q");
  BOOST_TEST(error_of({"--json=yes"}) == "--json takes no value (got 'yes')");
  BOOST_TEST(contains(error_of({"-n", "0"}), "-n/--iters: '0' is not an integer in [1, 1000000]"));
  BOOST_TEST(contains(error_of({"--iters=12x"}), "--iters: '12x'"));
  BOOST_TEST(contains(error_of({"-x", "256"}), "-x/--gid-index: '256'"));
  BOOST_TEST(contains(error_of({"-i", "0"}), "-i/--ib-port"));
  BOOST_TEST(contains(error_of({"-S", "16"}), "-S/--sl: '16' is not an integer in [0, 15]"));
  BOOST_TEST(contains(error_of({"-T", "256"}), "-T/--tclass: '256' is not an integer in [0, 255]"));
  BOOST_TEST(contains(error_of({"-D", "0"}), "-D/--duration"));
  BOOST_TEST(contains(error_of({"--sizes", "8,,1M"}), "--sizes"));
  BOOST_TEST(contains(error_of({"--sizes", "2G"}), "--sizes"));
  BOOST_TEST(contains(error_of({"--timeout", "0"}), "--timeout"));
  BOOST_TEST(contains(error_of({"a", "b"}), "more than one HOST"));
  BOOST_TEST(contains(error_of({"--count", "2", "hostB"}), "server options"));
  BOOST_TEST(contains(error_of({"--list", "hostB"}), "--list takes no HOST"));
}

BOOST_AUTO_TEST_CASE(server_count_and_serve) {
  BOOST_TEST(ok({"--count", "3"}).count == 3u);
  BOOST_TEST(ok({"--serve"}).count == 0u);
  BOOST_TEST(contains(error_of({"--count=0"}), "--count"));
}

BOOST_AUTO_TEST_CASE(qos_defaults_from_the_environment) {
  Env env;
  env.vars = {{"NCCL_IB_TC", "106"}, {"NCCL_IB_SL", "5"}};
  auto o = ok({}, env);
  BOOST_TEST(o.tclass == 106);
  BOOST_TEST(o.tclass_source == "NCCL_IB_TC");
  BOOST_TEST(o.sl == 5);
  BOOST_TEST(o.sl_source == "NCCL_IB_SL");

  env.vars["HA_NCCL_IB_TC"] = "96";  // HA_ wins
  env.vars["HA_NCCL_IB_SL"] = "3";
  o = ok({}, env);
  BOOST_TEST(o.tclass == 96);
  BOOST_TEST(o.tclass_source == "HA_NCCL_IB_TC");
  BOOST_TEST(o.sl == 3);
  BOOST_TEST(o.sl_source == "HA_NCCL_IB_SL");

  o = ok({"--tclass", "0", "-S", "1"}, env);  // the command line wins
  BOOST_TEST(o.tclass == 0);
  BOOST_TEST(o.tclass_source == "--tclass");
  BOOST_TEST(o.sl == 1);

  Env bad;
  bad.vars = {{"HA_NCCL_IB_TC", "ef"}, {"NCCL_IB_TC", "96"}};
  BOOST_TEST(error_of({}, bad) == "HA_NCCL_IB_TC='ef' is not an integer in [0, 255] (or -1: unset)");
  bad.vars = {{"NCCL_IB_SL", "16"}};
  BOOST_TEST(error_of({}, bad) == "NCCL_IB_SL='16' is not an integer in [0, 15] (or -1: unset)");
  bad.vars = {{"NCCL_IB_SL", "-2"}};
  BOOST_TEST(contains(error_of({}, bad), "NCCL_IB_SL='-2'"));
  Env unset;  // -1 is the plugin's "unset": the default, and it hides the NCCL_ variable as in the plugin
  unset.vars = {{"HA_NCCL_IB_TC", "-1"}, {"NCCL_IB_TC", "96"}};
  o = ok({}, unset);
  BOOST_TEST(o.tclass == 0);
  BOOST_TEST(o.tclass_source == "default");
  // an explicit option makes a broken variable irrelevant
  BOOST_TEST(ok({"--sl", "2"}, bad).sl == 2);
}

BOOST_AUTO_TEST_SUITE_END()
