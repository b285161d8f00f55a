// The pure parts of the operators' observability (monitor.hpp): %h / %p expansion of the
// HA_NCCL_STATS_FILE / HA_NCCL_PROM_FILE names and the Prometheus text exposition. The files
// themselves: output_file_test.cpp.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/monitor.hpp"

using namespace nccl_ha::plugin;

namespace {

// "name{labels}" -> value of every sample line; also checks that every sample's family has one
// # HELP and one # TYPE line before it.
std::map<std::string, std::string> samples(const std::string& text, std::map<std::string, std::string>* types = nullptr) {
  std::map<std::string, std::string> out;
  std::map<std::string, int> help;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      ++help[line.substr(7, line.find(' ', 7) - 7)];
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const auto name_end = line.find(' ', 7);
      if (types) (*types)[line.substr(7, name_end - 7)] = line.substr(name_end + 1);
      continue;
    }
    const auto space = line.rfind(' ');
    BOOST_TEST_REQUIRE(space != std::string::npos, line);
    const std::string series = line.substr(0, space);
    const std::string family = series.substr(0, series.find('{'));
    BOOST_TEST(help[family] == 1, family << " has one # HELP before its samples");
    BOOST_TEST(!out.count(series), series << " appears once");
    out[series] = line.substr(space + 1);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(monitor)

BOOST_AUTO_TEST_CASE(expand_path_replaces_host_pid_and_percent) {
  std::vector<std::string> unknown;
  BOOST_TEST(expand_path("/tmp/ha_%h_%p.prom", "node7", 4242, &unknown) == "/tmp/ha_node7_4242.prom");
  BOOST_TEST(expand_path("/a/%%h/%p%p", "n", 1, &unknown) == "/a/%h/11");
  BOOST_TEST(expand_path("plain", "n", 1, &unknown) == "plain");
  BOOST_TEST(expand_path("", "n", 1, &unknown) == "");
  BOOST_TEST(unknown.empty());
}

BOOST_AUTO_TEST_CASE(expand_path_keeps_unknown_escapes_and_reports_them) {
  std::vector<std::string> unknown;
  BOOST_TEST(expand_path("/tmp/%x_%h_%t", "n", 1, &unknown) == "/tmp/%x_n_%t");
  BOOST_TEST((unknown == std::vector<std::string>{"%x", "%t"}));
  unknown.clear();
  BOOST_TEST(expand_path("/tmp/end%", "n", 1, &unknown) == "/tmp/end%");
  BOOST_TEST((unknown == std::vector<std::string>{"%"}));
  BOOST_TEST(expand_path("%q", "n", 1) == "%q");  // no list: still kept
}

BOOST_AUTO_TEST_CASE(label_values_are_escaped) {
  BOOST_TEST(prom_escape("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  BOOST_TEST(prom_escape("rxe0:1") == "rxe0:1");
}

BOOST_AUTO_TEST_CASE(exposition_of_a_snapshot) {
  PromSnapshot s;
  s.host = "vm\"a";
  s.pid = 77;
  s.ports = {{"rxe0:1", false}, {"rxe1:1", true}};
  CommSample p;  // protected: active rxe0, standby rxe1
  p.valid = true;
  p.protection = Protection::protected_;
  p.active_port = "rxe0:1";
  p.standby_port = "rxe1:1";
  p.counters.bytes_sent = 1000;
  p.counters.messages = 3;
  CommSample u;  // after a failover: active rxe1, no standby
  u.valid = true;
  u.protection = Protection::unprotected;
  u.active_port = "rxe1:1";
  u.counters.failovers = 1;
  u.counters.replayed = 5;
  u.counters.bytes_received = 24;
  CommSample f;  // failed: counted, carries nothing
  f.valid = true;
  f.protection = Protection::failed;
  f.active_port = "rxe0:1";
  f.counters.failovers = 2;
  CommSample never;  // never sampled: left out
  never.counters.failovers = 100;
  s.comms = {p, u, f, never};
  s.closed.failovers = 3;
  s.closed.failbacks = 1;
  s.closed.reprotections = 2;
  s.closed.bytes_sent = 10;
  s.unproven_closed = 17;
  s.rescue_dropped = 2;
  s.closed.reprotect_dropped = 4;

  std::map<std::string, std::string> types;
  const std::string text = format_prom(s);
  const auto m = samples(text, &types);
  const std::string base = "host=\"vm\\\"a\",pid=\"77\"";
  auto at = [&](const std::string& series) {
    auto it = m.find(series);
    BOOST_TEST_REQUIRE((it != m.end()), series << " missing in\n" << text);
    return it->second;
  };
  BOOST_TEST(at("nccl_ha_connections{" + base + ",state=\"protected\"}") == "1");
  BOOST_TEST(at("nccl_ha_connections{" + base + ",state=\"unprotected\"}") == "1");
  BOOST_TEST(at("nccl_ha_connections{" + base + ",state=\"failed\"}") == "1");
  BOOST_TEST(at("nccl_ha_unprotected_connections{" + base + "}") == "1");
  BOOST_TEST(at("nccl_ha_failovers_total{" + base + "}") == "6");  // 3 closed + 1 + 2
  BOOST_TEST(at("nccl_ha_failbacks_total{" + base + "}") == "1");
  BOOST_TEST(at("nccl_ha_reprotections_total{" + base + "}") == "2");
  BOOST_TEST(at("nccl_ha_replayed_messages_total{" + base + "}") == "5");
  BOOST_TEST(at("nccl_ha_messages_total{" + base + "}") == "3");
  BOOST_TEST(at("nccl_ha_sent_bytes_total{" + base + "}") == "1010");
  BOOST_TEST(at("nccl_ha_received_bytes_total{" + base + "}") == "24");
  BOOST_TEST(at("nccl_ha_unproven_connections_closed_total{" + base + "}") == "17");
  BOOST_TEST(at("nccl_ha_rescue_requests_dropped_total{" + base + "}") == "2");
  BOOST_TEST(at("nccl_ha_reprotect_requests_dropped_total{" + base + "}") == "4");
  BOOST_TEST(at("nccl_ha_port_up{" + base + ",port=\"rxe0:1\"}") == "0");
  BOOST_TEST(at("nccl_ha_port_up{" + base + ",port=\"rxe1:1\"}") == "1");
  BOOST_TEST(at("nccl_ha_port_connections{" + base + ",port=\"rxe0:1\",role=\"active\"}") == "1");
  BOOST_TEST(at("nccl_ha_port_connections{" + base + ",port=\"rxe0:1\",role=\"standby\"}") == "0");
  BOOST_TEST(at("nccl_ha_port_connections{" + base + ",port=\"rxe1:1\",role=\"active\"}") == "1");
  BOOST_TEST(at("nccl_ha_port_connections{" + base + ",port=\"rxe1:1\",role=\"standby\"}") == "1");
  BOOST_TEST(m.size() == 20u, text);
  BOOST_TEST(types["nccl_ha_failovers_total"] == "counter");
  BOOST_TEST(types["nccl_ha_sent_bytes_total"] == "counter");
  BOOST_TEST(types["nccl_ha_connections"] == "gauge");
  BOOST_TEST(types["nccl_ha_port_up"] == "gauge");
  for (const auto& [name, type] : types) BOOST_TEST(name.rfind("nccl_ha_", 0) == 0u, name);
  BOOST_TEST(text.back() == '\n');
}

BOOST_AUTO_TEST_CASE(empty_process_still_exposes_every_family) {
  PromSnapshot s;
  s.host = "h";
  s.pid = 1;
  const auto m = samples(format_prom(s));
  BOOST_TEST(m.at("nccl_ha_unprotected_connections{host=\"h\",pid=\"1\"}") == "0");
  BOOST_TEST(m.at("nccl_ha_failovers_total{host=\"h\",pid=\"1\"}") == "0");
  BOOST_TEST(m.count("nccl_ha_connections{host=\"h\",pid=\"1\",state=\"failed\"}") == 1u);
}

// A fused device's members (issue #33): each member's bytes, summed over its connections open now,
// by device, member and port; a connection of its own adds nothing there.
BOOST_AUTO_TEST_CASE(fused_members_bytes_by_member) {
  PromSnapshot s;
  s.host = "h";
  s.pid = 1;
  auto member = [](const char* m, const char* port, std::uint64_t sent, std::uint64_t received) {
    CommSample c;
    c.valid = true;
    c.protection = Protection::protected_;
    c.active_port = port;
    c.member = m;
    c.home_port = port;
    c.counters.bytes_sent = sent;
    c.counters.bytes_received = received;
    return c;
  };
  CommSample alone = member("", "rxe2:1", 1000, 1000);
  CommSample unsampled = member("rxe0+rxe1 1/2", "rxe0:1", 5, 5);
  unsampled.valid = false;
  s.comms = {member("rxe0+rxe1 1/2", "rxe0:1", 300, 0), member("rxe0+rxe1 2/2", "rxe1:1", 100, 0),
             member("rxe0+rxe1 1/2", "rxe0:1", 0, 40), member("rxe0+rxe1 2/2", "rxe1:1", 0, 60), alone, unsampled};
  const std::string text = format_prom(s);
  std::map<std::string, std::string> types;
  const auto m = samples(text, &types);
  const std::string one = "nccl_ha_member_bytes{host=\"h\",pid=\"1\",device=\"rxe0+rxe1\",member=\"1/2\",port=\"rxe0:1\",";
  const std::string two = "nccl_ha_member_bytes{host=\"h\",pid=\"1\",device=\"rxe0+rxe1\",member=\"2/2\",port=\"rxe1:1\",";
  BOOST_TEST(m.at(one + "direction=\"sent\"}") == "300", text);
  BOOST_TEST(m.at(one + "direction=\"received\"}") == "40");
  BOOST_TEST(m.at(two + "direction=\"sent\"}") == "100");
  BOOST_TEST(m.at(two + "direction=\"received\"}") == "60");
  std::size_t series = 0;
  for (const auto& [k, v] : m) series += k.rfind("nccl_ha_member_bytes{", 0) == 0 ? 1 : 0;
  BOOST_TEST(series == 4u, text);
  BOOST_TEST(types["nccl_ha_member_bytes"] == "gauge");
}

BOOST_AUTO_TEST_CASE(counters_add_up) {
  CommCounters a;
  a.failovers = 1;
  a.bytes_sent = 5;
  CommCounters b;
  b.failovers = 2;
  b.bytes_received = 7;
  b.reprotections = 4;
  a.reprotect_dropped = 1;
  b.reprotect_dropped = 2;
  a += b;
  BOOST_TEST(a.failovers == 3u);
  BOOST_TEST(a.bytes_sent == 5u);
  BOOST_TEST(a.bytes_received == 7u);
  BOOST_TEST(a.reprotections == 4u);
  BOOST_TEST(a.reprotect_dropped == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
