// QP helpers that need no device: MTU negotiation, PSN generation, timeouts from the
// environment, and the local endpoint description.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <map>
#include <set>

#include "nccl_ha/net/qp.hpp"
#include "nccl_ha/net/wire.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;
using namespace nccl_ha::test;

namespace {
struct EnvFixture {
  EnvGuard env;
  LogCapture log;
  EnvFixture() {
    for (const char* v : {"HA_NCCL_QP_TIMEOUT", "HA_NCCL_QP_RETRY_CNT", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT",
                          "HA_NCCL_IB_PKEY", "NCCL_IB_PKEY"})
      env.unset(v);
  }
};
void check_defaults(const QpTimeouts& t) {
  BOOST_TEST(t.timeout == 14);
  BOOST_TEST(t.retry_cnt == 7);
  BOOST_TEST(t.rnr_retry == 7);
  BOOST_TEST(t.min_rnr_timer == 12);
  BOOST_TEST(t.max_rd_atomic == 1);
  BOOST_TEST(t.service_level == 0);
  BOOST_TEST(t.traffic_class == 0);
  BOOST_TEST(t.pkey_index == 0);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(qp_helpers)

BOOST_AUTO_TEST_CASE(negotiate_mtu_takes_the_smaller) {
  const ibv_mtu all[] = {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096};
  for (auto a : all)
    for (auto b : all) {
      const ibv_mtu m = negotiate_mtu(a, b);
      BOOST_TEST(static_cast<int>(m) == std::min(static_cast<int>(a), static_cast<int>(b)));
      BOOST_TEST((m == negotiate_mtu(b, a)));
    }
  BOOST_TEST((negotiate_mtu(IBV_MTU_4096, IBV_MTU_1024) == IBV_MTU_1024));
}

BOOST_AUTO_TEST_CASE(random_psn_is_24_bits_and_varies) {
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const auto psn = random_psn();
    BOOST_TEST_REQUIRE(psn <= 0xffffffu);
    seen.insert(psn);
  }
  BOOST_TEST(seen.size() > 1900u);  // 2000 draws from 2^24: a handful of collisions at most
}

BOOST_FIXTURE_TEST_CASE(timeouts_default_without_environment, EnvFixture) {
  check_defaults(QpTimeouts{});
  check_defaults(QpTimeouts::from_env());
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u);
}

BOOST_FIXTURE_TEST_CASE(timeouts_from_valid_environment, EnvFixture) {
  env.set("HA_NCCL_QP_TIMEOUT", "20");
  env.set("HA_NCCL_QP_RETRY_CNT", "3");
  auto t = QpTimeouts::from_env();
  BOOST_TEST(t.timeout == 20);
  BOOST_TEST(t.retry_cnt == 3);
  env.set("HA_NCCL_QP_TIMEOUT", "1");
  env.set("HA_NCCL_QP_RETRY_CNT", "0");
  t = QpTimeouts::from_env();
  BOOST_TEST(t.timeout == 1);
  BOOST_TEST(t.retry_cnt == 0);
  env.set("HA_NCCL_QP_TIMEOUT", "31");
  env.set("HA_NCCL_QP_RETRY_CNT", "7");
  t = QpTimeouts::from_env();
  BOOST_TEST(t.timeout == 31);
  BOOST_TEST(t.retry_cnt == 7);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

// NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT mean what they mean to net_ib when the HA_ variables are not
// set; the HA_ variables win; a bad NCCL_ value is WARNed about by its name and the default kept.
BOOST_FIXTURE_TEST_CASE(timeouts_from_nccl_variables, EnvFixture) {
  struct Case {
    std::map<std::string, std::string> vars;
    int timeout, retry_cnt;
  };
  const Case cases[] = {
      {{{"NCCL_IB_TIMEOUT", "20"}, {"NCCL_IB_RETRY_CNT", "5"}}, 20, 5},
      {{{"NCCL_IB_TIMEOUT", "20"}, {"NCCL_IB_RETRY_CNT", "5"}, {"HA_NCCL_QP_TIMEOUT", "16"}, {"HA_NCCL_QP_RETRY_CNT", "6"}}, 16, 6},
      {{{"NCCL_IB_TIMEOUT", "18"}, {"HA_NCCL_QP_RETRY_CNT", "0"}}, 18, 0},
  };
  for (const auto& k : cases) {
    for (const auto& [name, value] : k.vars) env.set(name, value);
    const auto t = QpTimeouts::from_env();
    BOOST_TEST(t.timeout == k.timeout);
    BOOST_TEST(t.retry_cnt == k.retry_cnt);
    for (const auto& kv : k.vars) env.unset(kv.first);
  }
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  env.set("NCCL_IB_TIMEOUT", "40");
  env.set("NCCL_IB_RETRY_CNT", "9");
  check_defaults(QpTimeouts::from_env());
  BOOST_TEST(log.count(LogLevel::warn, {"NCCL_IB_TIMEOUT", "'40'"}) == 1u, log.dump());
  BOOST_TEST(log.count(LogLevel::warn, {"NCCL_IB_RETRY_CNT", "'9'"}) == 1u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(pkey_index_from_environment, EnvFixture) {
  env.set("NCCL_IB_PKEY", "3");
  BOOST_TEST(QpTimeouts::from_env().pkey_index == 3);
  env.set("HA_NCCL_IB_PKEY", "65535");
  BOOST_TEST(QpTimeouts::from_env().pkey_index == 65535);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  env.set("HA_NCCL_IB_PKEY", "65536");
  BOOST_TEST(QpTimeouts::from_env().pkey_index == 0);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_IB_PKEY", "'65536'"}) == 1u, log.dump());
  env.set("HA_NCCL_IB_PKEY", "0x8001");
  BOOST_TEST(QpTimeouts::from_env().pkey_index == 0);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_IB_PKEY", "'0x8001'"}) == 1u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(timeouts_from_bad_environment_use_defaults, EnvFixture) {
  const char* bad_timeouts[] = {"0", "32", "-1", "abc", "", " 5", "14x", "256", "99999999999999999999"};
  const char* bad_retries[] = {"8", "-1", "x", "", "7 ", "3.0", "263"};
  for (const char* v : bad_timeouts) {
    BOOST_TEST_CONTEXT("HA_NCCL_QP_TIMEOUT='" << v << "'") {
      log.clear();
      env.set("HA_NCCL_QP_TIMEOUT", v);
      env.unset("HA_NCCL_QP_RETRY_CNT");
      check_defaults(QpTimeouts::from_env());
      BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_QP_TIMEOUT"}) == 1u, log.dump());
    }
  }
  for (const char* v : bad_retries) {
    BOOST_TEST_CONTEXT("HA_NCCL_QP_RETRY_CNT='" << v << "'") {
      log.clear();
      env.unset("HA_NCCL_QP_TIMEOUT");
      env.set("HA_NCCL_QP_RETRY_CNT", v);
      check_defaults(QpTimeouts::from_env());
      BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_QP_RETRY_CNT"}) == 1u, log.dump());
    }
  }
  // One bad, one good: the good one still applies.
  env.set("HA_NCCL_QP_TIMEOUT", "zz");
  env.set("HA_NCCL_QP_RETRY_CNT", "2");
  const auto t = QpTimeouts::from_env();
  BOOST_TEST(t.timeout == 14);
  BOOST_TEST(t.retry_cnt == 2);
}

BOOST_AUTO_TEST_CASE(local_endpoint_describes_the_qp_and_port) {
  ibv_qp qp{};
  qp.qp_num = 0x00abcd;
  PortInfo port;
  port.device = "rxe0";
  port.port = 2;
  port.link_layer = IBV_LINK_LAYER_ETHERNET;
  port.active_mtu = IBV_MTU_2048;
  port.lid = 0;
  port.gid_index = 3;
  for (int i = 0; i < 16; ++i) port.gid.raw[i] = static_cast<std::uint8_t>(0xf0 + i);
  const Endpoint ep = local_endpoint(&qp, port, 0x7123456u);  // PSN masked to 24 bits
  BOOST_TEST(ep.qpn == 0x00abcdu);
  BOOST_TEST(ep.psn == 0x123456u);
  BOOST_TEST(ep.port == 2);
  BOOST_TEST(ep.gid_index == 3);
  BOOST_TEST(ep.link_layer == IBV_LINK_LAYER_ETHERNET);
  BOOST_TEST(ep.mtu == IBV_MTU_2048);
  BOOST_TEST(ep.lid == 0);
  BOOST_TEST(std::memcmp(ep.gid.raw, port.gid.raw, 16) == 0);
  // It is a valid wire endpoint.
  auto d = decode_endpoint(encode_endpoint(ep));
  BOOST_REQUIRE_MESSAGE(d.ok(), test::err_msg(d));
  BOOST_TEST(d->psn == 0x123456u);
}

BOOST_AUTO_TEST_SUITE_END()
