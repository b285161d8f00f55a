// Config::from_env (every HA_NCCL_* variable, booleans, WARN-and-default on bad values),
// Config::from_lookup (the same from any source, the process environment untouched),
// config_warnings, describe, and the APM checks against a fixture sysfs tree.
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "map_env.hpp"
#include "runtime/config.hpp"
#include "runtime/gdr.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using namespace nccl_ha::test;
namespace fs = std::filesystem;

namespace {

// One integer variable: its field and inclusive range.
struct IntVar {
  const char* name;
  int Config::*field;
  int min;
  int max;
};
const IntVar kInts[] = {
    {"HA_NCCL_MAX_POLL", &Config::max_poll, 1, 64},
    {"HA_NCCL_HANDSHAKE_TIMEOUT_MS", &Config::handshake_timeout_ms, 100, 3600000},
    {"HA_NCCL_DEBUG", &Config::debug, 0, 3},
    {"HA_NCCL_HEARTBEAT_MS", &Config::heartbeat_ms, 10, 60000},
    {"HA_NCCL_RTO_MS", &Config::rto_ms, 10, 600000},
    {"HA_NCCL_MAX_RETRIES", &Config::max_retries, 0, 1000000},
    {"HA_NCCL_RETRY_WINDOW_MS", &Config::retry_window_ms, 1000, 86400000},
    {"HA_NCCL_FAILBACK_HOLD_MS", &Config::failback_hold_ms, 0, 3600000},
    {"HA_NCCL_FAILOVER_TIMEOUT_MS", &Config::failover_timeout_ms, 50, 60000},
    {"HA_NCCL_RESCUE_TIMEOUT_MS", &Config::rescue_timeout_ms, 100, 600000},
    {"HA_NCCL_IB_TC", &Config::ib_tc, -1, 255},
    {"HA_NCCL_IB_SL", &Config::ib_sl, -1, 15},
    {"HA_NCCL_PROM_INTERVAL_MS", &Config::prom_interval_ms, 100, 3600000},
};

struct BoolVar {
  const char* name;
  bool Config::*field;
};
const BoolVar kBools[] = {
    {"HA_NCCL_ENABLE_STANDBY", &Config::enable_standby},
    {"HA_NCCL_ENABLE_FAILBACK", &Config::enable_failback},
    {"HA_NCCL_USE_PROGRESS_THREAD", &Config::use_progress_thread},
    {"HA_NCCL_FORCE_IB_TIMEOUT", &Config::force_ib_timeout},
    {"HA_NCCL_FORCE_FLUSH", &Config::force_flush},
};

// Starts every test from an environment without any of the variables, and captures the log.
struct CleanEnv {
  EnvGuard env;
  LogCapture log;
  CleanEnv() {
    for (const auto& v : kInts) env.unset(v.name);
    for (const auto& v : kBools) env.unset(v.name);
    for (const char* v : {"HA_NCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HA_NCCL_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY",
                          "HA_NCCL_STANDBY_MAP", "HA_NCCL_BACKUP_MAP", "HA_NCCL_ENABLE_BACKUP", "HA_NCCL_STATS_FILE", "HA_NCCL_PROM_FILE", "NCCL_IB_TC", "NCCL_IB_SL",
                          "HA_NCCL_ISLAND_PREFIX_LEN", "HA_NCCL_DMABUF_ENABLE", "NCCL_DMABUF_ENABLE",
                          "HA_NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_PCI_RELAXED_ORDERING",
                          "HA_NCCL_IB_GDR_FLUSH_DISABLE", "NCCL_IB_GDR_FLUSH_DISABLE", "HA_NCCL_TEST_MAX_POLL",
                          "HA_NCCL_LOG_LEVEL", "HA_NCCL_TEST_ACK_DELAY_MS", "HA_NCCL_TEST_FAILBACK_STALL_MS",
                          "HA_NCCL_TEST_FAILBACK_STALL_AT", "HA_NCCL_TEST_STANDBY_DELAY_MS",
                          "HA_NCCL_TEST_REPROTECT_DELAY_MS", "HA_NCCL_TEST_FLUSH_QP_ERROR_MS",
                          "HA_NCCL_TEST_REAPER_DELAY_MS", "HA_NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_ADAPTIVE_ROUTING",
                          "HA_NCCL_IB_AR_THRESHOLD", "NCCL_IB_AR_THRESHOLD"})
      env.unset(v);
  }
};

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

std::size_t count_containing(const std::vector<std::string>& lines, const std::string& needle) {
  std::size_t n = 0;
  for (const auto& l : lines) n += contains(l, needle) ? 1 : 0;
  return n;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "  " + l + "\n";
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config_from_env)

BOOST_FIXTURE_TEST_CASE(defaults_when_nothing_is_set, CleanEnv) {
  const Config c = Config::from_env();
  BOOST_TEST(c.max_poll == 16);
  BOOST_TEST(c.handshake_timeout_ms == 30000);
  BOOST_TEST(c.socket_ifname.empty());
  BOOST_TEST(c.debug == 0);
  BOOST_TEST(c.enable_standby);
  BOOST_TEST(c.heartbeat_ms == 200);
  BOOST_TEST(c.rto_ms == 1000);
  BOOST_TEST(c.max_retries == 10);
  BOOST_TEST(c.retry_window_ms == 600000);
  BOOST_TEST(c.enable_failback);  // on by default with HA (issue #19)
  BOOST_TEST(c.failback_hold_ms == 5000);
  BOOST_TEST(c.use_progress_thread);
  BOOST_TEST(c.failover_timeout_ms == 1000);
  BOOST_TEST(c.rescue_timeout_ms == 10000);
  BOOST_TEST(c.standby_map.empty());
  BOOST_TEST(c.island_prefix_len == -1);
  BOOST_TEST(c.stats_file.empty());
  BOOST_TEST(c.prom_file.empty());
  BOOST_TEST(c.prom_interval_ms == 10000);
  BOOST_TEST(!c.force_ib_timeout);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

// Failback is on by default with HA; without HA only an explicit 1 turns it on (and is warned about).
BOOST_FIXTURE_TEST_CASE(failback_follows_ha_unless_set, CleanEnv) {
  BOOST_TEST(Config::from_env().enable_failback);
  env.set("HA_NCCL_ENABLE_FAILBACK", "0");
  BOOST_TEST(!Config::from_env().enable_failback);
  env.unset("HA_NCCL_ENABLE_FAILBACK");
  env.set("HA_NCCL_ENABLE_STANDBY", "0");
  BOOST_TEST(!Config::from_env().enable_failback);
  env.set("HA_NCCL_ENABLE_FAILBACK", "1");
  BOOST_TEST(Config::from_env().enable_failback);
}

// The standby settings' old names (HA_NCCL_ENABLE_BACKUP, HA_NCCL_BACKUP_MAP), as for
// HA_NCCL_MAX_POLL's below: still read when the new name is not set, each with a WARN naming the
// new one; beside the new name, ignored (WARN).
BOOST_FIXTURE_TEST_CASE(old_standby_setting_names_are_read_with_a_warn, CleanEnv) {
  env.set("HA_NCCL_ENABLE_BACKUP", "0");
  env.set("HA_NCCL_BACKUP_MAP", "rxe0:rxe1");
  Config c = Config::from_env();
  BOOST_TEST(!c.enable_standby);
  BOOST_TEST(c.standby_map == "rxe0:rxe1");
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_ENABLE_BACKUP is deprecated: use HA_NCCL_ENABLE_STANDBY", "'0'"}) == 1u, log.dump());
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_BACKUP_MAP is deprecated: use HA_NCCL_STANDBY_MAP", "'rxe0:rxe1'"}) == 1u, log.dump());
  BOOST_TEST(contains(describe(c), "HA_NCCL_ENABLE_STANDBY=0"), describe(c));  // said under the new name
  log.clear();
  env.set("HA_NCCL_ENABLE_STANDBY", "1");
  env.set("HA_NCCL_STANDBY_MAP", "rxe1:rxe0");
  c = Config::from_env();
  BOOST_TEST(c.enable_standby);
  BOOST_TEST(c.standby_map == "rxe1:rxe0");
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_ENABLE_BACKUP='0' is deprecated and ignored: HA_NCCL_ENABLE_STANDBY is set"}) == 1u,
             log.dump());
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_BACKUP_MAP='rxe0:rxe1' is deprecated and ignored"}) == 1u, log.dump());
  log.clear();
  env.unset("HA_NCCL_ENABLE_BACKUP");
  env.unset("HA_NCCL_BACKUP_MAP");
  (void)Config::from_env();
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(every_variable_is_read, CleanEnv) {
  env.set("HA_NCCL_MAX_POLL", "32");
  env.set("HA_NCCL_HANDSHAKE_TIMEOUT_MS", "5000");
  env.set("HA_NCCL_SOCKET_IFNAME", "mgmt");
  env.set("HA_NCCL_DEBUG", "3");
  env.set("HA_NCCL_ENABLE_STANDBY", "0");
  env.set("HA_NCCL_HEARTBEAT_MS", "50");
  env.set("HA_NCCL_RTO_MS", "2000");
  env.set("HA_NCCL_MAX_RETRIES", "0");
  env.set("HA_NCCL_RETRY_WINDOW_MS", "60000");
  env.set("HA_NCCL_ENABLE_FAILBACK", "1");
  env.set("HA_NCCL_FAILBACK_HOLD_MS", "0");
  env.set("HA_NCCL_USE_PROGRESS_THREAD", "0");
  env.set("HA_NCCL_FAILOVER_TIMEOUT_MS", "250");
  env.set("HA_NCCL_STANDBY_MAP", "rxe0:rxe1,rxe1:rxe0");
  env.set("HA_NCCL_STATS_FILE", "/tmp/ha-stats.json");
  env.set("HA_NCCL_PROM_FILE", "/tmp/ha_%h_%p.prom");
  env.set("HA_NCCL_PROM_INTERVAL_MS", "500");
  env.set("HA_NCCL_FORCE_IB_TIMEOUT", "1");
  const Config c = Config::from_env();
  BOOST_TEST(c.max_poll == 32);
  BOOST_TEST(c.handshake_timeout_ms == 5000);
  BOOST_TEST(c.socket_ifname == "mgmt");
  BOOST_TEST(c.debug == 3);
  BOOST_TEST(!c.enable_standby);
  BOOST_TEST(c.heartbeat_ms == 50);
  BOOST_TEST(c.rto_ms == 2000);
  BOOST_TEST(c.max_retries == 0);
  BOOST_TEST(c.retry_window_ms == 60000);
  BOOST_TEST(c.enable_failback);
  BOOST_TEST(c.failback_hold_ms == 0);
  BOOST_TEST(!c.use_progress_thread);
  BOOST_TEST(c.failover_timeout_ms == 250);
  BOOST_TEST(c.standby_map == "rxe0:rxe1,rxe1:rxe0");
  BOOST_TEST(c.stats_file == "/tmp/ha-stats.json");
  BOOST_TEST(c.prom_file == "/tmp/ha_%h_%p.prom");  // expanded at init, not here
  BOOST_TEST(c.prom_interval_ms == 500);
  BOOST_TEST(c.force_ib_timeout);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

// HA_NCCL_ISLAND_PREFIX_LEN: 0..128; unset (-1) is "islands from the address", which is also the
// default a bad value falls back to, and the WARN says so in words.
BOOST_FIXTURE_TEST_CASE(island_prefix_length, CleanEnv) {
  for (int len : {0, 1, 15, 24, 64, 127, 128}) {
    env.set("HA_NCCL_ISLAND_PREFIX_LEN", std::to_string(len));
    const Config c = Config::from_env();
    BOOST_TEST(c.island_prefix_len == len);
    BOOST_TEST(contains(describe(c), "HA_NCCL_ISLAND_PREFIX_LEN=" + std::to_string(len) + " "), describe(c));
  }
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  for (const char* bad : {"-1", "129", "1000", "15abc", "", " 15", "0x10", "1.5"}) {
    BOOST_TEST_CONTEXT("HA_NCCL_ISLAND_PREFIX_LEN='" << bad << "'") {
      log.clear();
      env.set("HA_NCCL_ISLAND_PREFIX_LEN", bad);
      BOOST_TEST(Config::from_env().island_prefix_len == -1);
      BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_ISLAND_PREFIX_LEN", std::string("'") + bad + "'",
                                            "default: islands from the address"}) == 1u,
                 log.dump());
    }
  }
  const net::EnvLookup lookup = [](const char* name) -> std::optional<std::string> {  // the same through a lookup
    if (std::string(name) == "HA_NCCL_ISLAND_PREFIX_LEN") return "15";
    return std::nullopt;
  };
  BOOST_TEST(Config::from_lookup(lookup).island_prefix_len == 15);
}

// HA_NCCL_IB_GDR_FLUSH_DISABLE over NCCL_IB_GDR_FLUSH_DISABLE (0/1, default 0, net_ib's): said in
// the settings line; a bad value is WARNed about and the default (flush) kept.
BOOST_FIXTURE_TEST_CASE(gdr_flush_disable_setting, CleanEnv) {
  BOOST_TEST(!Config::from_env().gdr_flush_disable);
  env.set("NCCL_IB_GDR_FLUSH_DISABLE", "1");
  Config c = Config::from_env();
  BOOST_TEST(c.gdr_flush_disable);
  BOOST_TEST(contains(describe(c), "HA_NCCL_IB_GDR_FLUSH_DISABLE=1"), describe(c));
  env.set("HA_NCCL_IB_GDR_FLUSH_DISABLE", "0");
  BOOST_TEST(!Config::from_env().gdr_flush_disable);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  env.set("HA_NCCL_IB_GDR_FLUSH_DISABLE", "yes");
  BOOST_TEST(!Config::from_env().gdr_flush_disable);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_IB_GDR_FLUSH_DISABLE", "'yes'"}) == 1u, log.dump());
}

// HA_NCCL_IB_DEVICE_PCI_ORDER over NCCL_IB_DEVICE_PCI_ORDER (0/1, default 1, net_ib's): said in
// the settings line; a bad value is WARNed about and the default (PCI order) kept.
BOOST_FIXTURE_TEST_CASE(device_pci_order_setting, CleanEnv) {
  BOOST_TEST(Config::from_env().ib_device_pci_order);
  BOOST_TEST(contains(describe(Config::from_env()), "HA_NCCL_IB_DEVICE_PCI_ORDER=1"));
  env.set("NCCL_IB_DEVICE_PCI_ORDER", "0");
  Config c = Config::from_env();
  BOOST_TEST(!c.ib_device_pci_order);
  BOOST_TEST(contains(describe(c), "HA_NCCL_IB_DEVICE_PCI_ORDER=0"), describe(c));
  env.set("HA_NCCL_IB_DEVICE_PCI_ORDER", "1");
  BOOST_TEST(Config::from_env().ib_device_pci_order);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  env.set("HA_NCCL_IB_DEVICE_PCI_ORDER", "2");
  BOOST_TEST(Config::from_env().ib_device_pci_order);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_IB_DEVICE_PCI_ORDER", "'2'"}) == 1u, log.dump());
}

// HA_NCCL_IB_MERGE_NICS over NCCL_IB_MERGE_NICS (0/1, default 1, net_ib's): said in the settings
// line; a bad value is WARNed about and the default (fusion allowed) kept.
BOOST_FIXTURE_TEST_CASE(merge_nics_setting, CleanEnv) {
  BOOST_TEST(Config::from_env().ib_merge_nics);
  BOOST_TEST(contains(describe(Config::from_env()), "HA_NCCL_IB_MERGE_NICS=1"));
  env.set("NCCL_IB_MERGE_NICS", "0");
  Config c = Config::from_env();
  BOOST_TEST(!c.ib_merge_nics);
  BOOST_TEST(contains(describe(c), "HA_NCCL_IB_MERGE_NICS=0"), describe(c));
  env.set("HA_NCCL_IB_MERGE_NICS", "1");
  BOOST_TEST(Config::from_env().ib_merge_nics);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  env.set("HA_NCCL_IB_MERGE_NICS", "on");
  BOOST_TEST(Config::from_env().ib_merge_nics);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_IB_MERGE_NICS", "'on'"}) == 1u, log.dump());
}

// HA_NCCL_DMABUF_ENABLE over NCCL_DMABUF_ENABLE (0/1, default 1) and HA_NCCL_IB_PCI_RELAXED_ORDERING
// over NCCL_IB_PCI_RELAXED_ORDERING (0/1/2, default 2): the HA variable wins, the source is kept
// for the log lines, a bad value is WARNed about (variable, value, default) and the default used.
BOOST_FIXTURE_TEST_CASE(dmabuf_and_relaxed_ordering_settings, CleanEnv) {
  Config c = Config::from_env();
  BOOST_TEST(c.dmabuf_enable == 1);
  BOOST_TEST(c.relaxed_ordering == 2);
  BOOST_TEST(contains(describe(c), "HA_NCCL_DMABUF_ENABLE=1 HA_NCCL_IB_PCI_RELAXED_ORDERING=2"), describe(c));
  env.set("NCCL_DMABUF_ENABLE", "0");
  env.set("NCCL_IB_PCI_RELAXED_ORDERING", "0");
  c = Config::from_env();
  BOOST_TEST(c.dmabuf_enable == 0);
  BOOST_TEST(c.dmabuf_enable_var == "NCCL_DMABUF_ENABLE");
  BOOST_TEST(c.relaxed_ordering == 0);
  BOOST_TEST(c.relaxed_ordering_var == "NCCL_IB_PCI_RELAXED_ORDERING");
  env.set("HA_NCCL_DMABUF_ENABLE", "1");
  env.set("HA_NCCL_IB_PCI_RELAXED_ORDERING", "1");
  c = Config::from_env();
  BOOST_TEST(c.dmabuf_enable == 1);
  BOOST_TEST(c.dmabuf_enable_var == "HA_NCCL_DMABUF_ENABLE");
  BOOST_TEST(c.relaxed_ordering == 1);
  BOOST_TEST(c.relaxed_ordering_var == "HA_NCCL_IB_PCI_RELAXED_ORDERING");
  BOOST_TEST(contains(describe(c), "HA_NCCL_DMABUF_ENABLE=1 HA_NCCL_IB_PCI_RELAXED_ORDERING=1"), describe(c));
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  struct Bad { const char* var; const char* value; const char* def; };
  for (const Bad& b : {Bad{"HA_NCCL_DMABUF_ENABLE", "2", "1"}, Bad{"HA_NCCL_DMABUF_ENABLE", "yes", "1"},
                       Bad{"HA_NCCL_IB_PCI_RELAXED_ORDERING", "3", "2"}, Bad{"HA_NCCL_IB_PCI_RELAXED_ORDERING", "-1", "2"},
                       Bad{"HA_NCCL_IB_PCI_RELAXED_ORDERING", "on", "2"}}) {
    BOOST_TEST_CONTEXT(b.var << "='" << b.value << "'") {
      log.clear();
      env.set(b.var, b.value);
      c = Config::from_env();
      BOOST_TEST((std::string(b.var) == "HA_NCCL_DMABUF_ENABLE" ? c.dmabuf_enable : c.relaxed_ordering) ==
                 std::stoi(b.def));
      BOOST_TEST(log.count(LogLevel::warn, {b.var, std::string("'") + b.value + "'",
                                            std::string("using the default ") + b.def}) == 1u,
                 log.dump());
      env.set(b.var, "1");  // valid again for the next case
    }
  }
}

BOOST_FIXTURE_TEST_CASE(socket_ifname_falls_back_to_nccl_socket_ifname, CleanEnv) {
  env.set("NCCL_SOCKET_IFNAME", "^docker");
  BOOST_TEST(Config::from_env().socket_ifname == "^docker");
  BOOST_TEST(Config::from_env().socket_ifname_var == "NCCL_SOCKET_IFNAME");
  env.set("HA_NCCL_SOCKET_IFNAME", "eth");
  BOOST_TEST(Config::from_env().socket_ifname == "eth");
  BOOST_TEST(Config::from_env().socket_ifname_var == "HA_NCCL_SOCKET_IFNAME");
}

BOOST_FIXTURE_TEST_CASE(socket_family_follows_nccl_and_ha_wins, CleanEnv) {
  BOOST_TEST(Config::from_env().socket_family == 0);
  env.set("NCCL_SOCKET_FAMILY", "AF_INET6");
  BOOST_TEST(Config::from_env().socket_family == AF_INET6);
  env.set("HA_NCCL_SOCKET_FAMILY", "AF_INET");
  BOOST_TEST(Config::from_env().socket_family == AF_INET);
  BOOST_TEST(Config::from_env().socket_family_var == "HA_NCCL_SOCKET_FAMILY");
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  env.set("HA_NCCL_SOCKET_FAMILY", "ipv6");  // NCCL's spelling only: WARN, either family
  BOOST_TEST(Config::from_env().socket_family == 0);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 1u, log.dump());
  BOOST_TEST(contains(log.dump(), "HA_NCCL_SOCKET_FAMILY='ipv6'"), log.dump());
}

BOOST_FIXTURE_TEST_CASE(integer_bounds_are_inclusive, CleanEnv) {
  for (const auto& v : kInts) {
    BOOST_TEST_CONTEXT(v.name) {
      env.set(v.name, std::to_string(v.min));
      BOOST_TEST((Config::from_env().*v.field) == v.min);
      env.set(v.name, std::to_string(v.max));
      BOOST_TEST((Config::from_env().*v.field) == v.max);
      env.unset(v.name);
    }
  }
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(bad_integers_warn_and_use_the_default, CleanEnv) {
  const Config defaults;
  for (const auto& v : kInts) {
    const std::string fallback = std::to_string(defaults.*v.field);
    for (const std::string& bad : {std::to_string(v.min - 1), std::to_string(static_cast<long long>(v.max) + 1),
                                   std::string("12abc"), std::string(""), std::string("1.5")}) {
      BOOST_TEST_CONTEXT(v.name << "='" << bad << "'") {
        log.clear();
        env.set(v.name, bad);
        BOOST_TEST((Config::from_env().*v.field) == defaults.*v.field);
        // The WARN names the variable, the bad value and the default used instead.
        BOOST_TEST(log.count(LogLevel::warn, {v.name, "'" + bad + "'", "default " + fallback}) == 1u, log.dump());
      }
    }
    env.unset(v.name);
  }
}

BOOST_FIXTURE_TEST_CASE(booleans_accept_numbers_and_words, CleanEnv) {
  for (const auto& v : kBools) {
    for (const char* yes : {"1", "true", "TRUE", "yes", "Yes", "on"}) {
      BOOST_TEST_CONTEXT(v.name << "=" << yes) {
        env.set(v.name, yes);
        BOOST_TEST((Config::from_env().*v.field));
      }
    }
    for (const char* no : {"0", "false", "False", "no", "NO", "off"}) {
      BOOST_TEST_CONTEXT(v.name << "=" << no) {
        env.set(v.name, no);
        BOOST_TEST(!(Config::from_env().*v.field));
      }
    }
    env.unset(v.name);
  }
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(bad_booleans_warn_and_use_the_default, CleanEnv) {
  const Config defaults;
  for (const auto& v : kBools) {
    const std::string fallback = defaults.*v.field ? "1" : "0";
    for (const char* bad : {"2", "-1", "maybe", "", " 1", "y", "01"}) {
      BOOST_TEST_CONTEXT(v.name << "='" << bad << "'") {
        log.clear();
        env.set(v.name, bad);
        BOOST_TEST((Config::from_env().*v.field) == defaults.*v.field);
        BOOST_TEST(log.count(LogLevel::warn, {v.name, std::string("'") + bad + "'", "default " + fallback}) == 1u,
                   log.dump());
      }
    }
    env.unset(v.name);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(config_from_lookup)


BOOST_FIXTURE_TEST_CASE(reads_only_the_lookup, CleanEnv) {
  env.set("HA_NCCL_RTO_MS", "777");  // the process environment is not consulted
  MapEnv m;
  m.vars = {{"HA_NCCL_HEARTBEAT_MS", "250"}, {"NCCL_IB_SL", "3"}, {"HA_NCCL_ENABLE_STANDBY", "off"},
            {"NCCL_SOCKET_IFNAME", "=eth2"}, {"HA_NCCL_SOCKET_FAMILY", "AF_INET6"}, {"HA_NCCL_STANDBY_MAP", "a:b"},
            {"HA_NCCL_TEST_ACK_DELAY_MS", "1500"}};
  const Config c = Config::from_lookup(m.lookup());
  BOOST_TEST(c.rto_ms == 1000);
  BOOST_TEST(c.heartbeat_ms == 250);
  BOOST_TEST(c.ib_sl == 3);
  BOOST_TEST(!c.enable_standby);
  BOOST_TEST(c.socket_ifname == "=eth2");
  BOOST_TEST(c.socket_ifname_var == "NCCL_SOCKET_IFNAME");
  BOOST_TEST(c.socket_family == AF_INET6);
  BOOST_TEST(c.standby_map == "a:b");
  // The test hooks are not Config's (test_hooks.hpp, State::hooks): not asked for here (HA_NCCL_TEST_MAX_POLL
  // is no hook, the old name of HA_NCCL_MAX_POLL), never described.
  BOOST_TEST(count_containing(m.asked, "HA_NCCL_TEST_") == count_containing(m.asked, "HA_NCCL_TEST_MAX_POLL"));
  BOOST_TEST(!contains(describe(c), "HA_NCCL_TEST_"));
  for (const auto& v : kInts) BOOST_TEST(count_containing(m.asked, v.name) >= 1u, v.name);
  for (const auto& v : kBools) BOOST_TEST(count_containing(m.asked, v.name) >= 1u, v.name);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(bad_values_warn_as_from_env, CleanEnv) {
  MapEnv m;
  m.vars = {{"HA_NCCL_IB_SL", "16"}, {"HA_NCCL_IB_TC", "-2"}, {"HA_NCCL_FORCE_FLUSH", "maybe"},
            {"NCCL_SOCKET_FAMILY", "AF_UNIX"}, {"HA_NCCL_LOG_LEVEL", "verbose"}};
  const Config c = Config::from_lookup(m.lookup());
  const Config defaults;
  BOOST_TEST(c.ib_sl == defaults.ib_sl);
  BOOST_TEST(c.ib_tc == defaults.ib_tc);
  BOOST_TEST(c.force_flush == defaults.force_flush);
  BOOST_TEST(c.socket_family == 0);
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 5u, log.dump());
}

// HA_NCCL_MAX_POLL, a production setting once named HA_NCCL_TEST_MAX_POLL: the old name is still
// read, with a WARN that it is deprecated; with both set the new one wins and the old is WARNed
// about as ignored. describe() names the new one.
BOOST_FIXTURE_TEST_CASE(max_poll_and_its_deprecated_name, CleanEnv) {
  MapEnv m;
  m.vars = {{"HA_NCCL_MAX_POLL", "8"}};
  Config c = Config::from_lookup(m.lookup());
  BOOST_TEST(c.max_poll == 8);
  BOOST_TEST(contains(describe(c), "HA_NCCL_MAX_POLL=8 "), describe(c));
  BOOST_TEST(!contains(describe(c), "HA_NCCL_TEST_MAX_POLL"));
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());

  m.vars = {{"HA_NCCL_TEST_MAX_POLL", "4"}};
  c = Config::from_lookup(m.lookup());
  BOOST_TEST(c.max_poll == 4);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_TEST_MAX_POLL is deprecated", "use HA_NCCL_MAX_POLL", "'4'"}) == 1u,
             log.dump());
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 1u, log.dump());

  log.clear();
  m.vars = {{"HA_NCCL_TEST_MAX_POLL", "4"}, {"HA_NCCL_MAX_POLL", "32"}};
  c = Config::from_lookup(m.lookup());
  BOOST_TEST(c.max_poll == 32);
  BOOST_TEST(
      log.count(LogLevel::warn, {"HA_NCCL_TEST_MAX_POLL='4' is deprecated and ignored", "HA_NCCL_MAX_POLL is set"}) == 1u,
      log.dump());
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 1u, log.dump());

  log.clear();
  m.vars = {{"HA_NCCL_TEST_MAX_POLL", "65"}};  // the old name, out of range: both WARNs, the default
  BOOST_TEST(Config::from_lookup(m.lookup()).max_poll == 16);
  BOOST_TEST(log.count(LogLevel::warn, {"HA_NCCL_TEST_MAX_POLL", "'65'", "default 16"}) == 1u, log.dump());
}

// HA_NCCL_LOG_LEVEL (the logger's, read by the reactor): a level name in any case is accepted
// silently; anything else gets one WARN naming the value and the accepted names.
BOOST_FIXTURE_TEST_CASE(unknown_log_level_is_warned_about, CleanEnv) {
  const std::pair<const char*, LogLevel> good[] = {{"ERROR", LogLevel::error}, {"WARN", LogLevel::warn},
                                                   {"info", LogLevel::info},   {"Debug", LogLevel::debug},
                                                   {"TRACE", LogLevel::trace}};
  for (const auto& [name, level] : good) {
    BOOST_TEST_CONTEXT("HA_NCCL_LOG_LEVEL=" << name) {
      BOOST_TEST((parse_log_level(name) == level));
      MapEnv m;
      m.vars = {{"HA_NCCL_LOG_LEVEL", name}};
      (void)Config::from_lookup(m.lookup());
      BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
    }
  }
  for (const char* bad : {"verbose", "", "WARNING", "2", " INFO"}) {
    BOOST_TEST_CONTEXT("HA_NCCL_LOG_LEVEL='" << bad << "'") {
      BOOST_TEST(!parse_log_level(bad));
      log.clear();
      MapEnv m;
      m.vars = {{"HA_NCCL_LOG_LEVEL", bad}};
      (void)Config::from_lookup(m.lookup());
      BOOST_TEST(log.count(LogLevel::warn, {std::string("HA_NCCL_LOG_LEVEL='") + bad + "'",
                                            "expected ERROR, WARN, INFO, DEBUG or TRACE"}) == 1u,
                 log.dump());
      BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 1u, log.dump());
    }
  }
}

// HA_NCCL_IB_MERGE_VFS overrides NCCL_IB_MERGE_VFS; default 1 (NCCL's); a bad value WARNs naming
// the variable it came from, the value and the default, and keeps the default.
BOOST_FIXTURE_TEST_CASE(ib_merge_vfs, CleanEnv) {
  BOOST_TEST(Config{}.ib_merge_vfs);
  BOOST_TEST(contains(describe(Config{}), "HA_NCCL_IB_MERGE_VFS=1"));
  struct Case {
    std::map<std::string, std::string> vars;
    bool merge;
    const char* var;
  };
  const Case cases[] = {{{{"NCCL_IB_MERGE_VFS", "0"}}, false, "NCCL_IB_MERGE_VFS"},
                        {{{"NCCL_IB_MERGE_VFS", "0"}, {"HA_NCCL_IB_MERGE_VFS", "1"}}, true, "HA_NCCL_IB_MERGE_VFS"},
                        {{{"NCCL_IB_MERGE_VFS", "1"}, {"HA_NCCL_IB_MERGE_VFS", "0"}}, false, "HA_NCCL_IB_MERGE_VFS"}};
  for (const auto& k : cases) {
    MapEnv m;
    m.vars = k.vars;
    const Config c = Config::from_lookup(m.lookup());
    BOOST_TEST(c.ib_merge_vfs == k.merge);
    BOOST_TEST(c.ib_merge_vfs_var == k.var);
    BOOST_TEST(contains(describe(c), std::string("HA_NCCL_IB_MERGE_VFS=") + (k.merge ? "1" : "0")));
  }
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
  for (const char* bad : {"2", "yes", "", "-1"}) {
    LogCapture bad_log;
    MapEnv m;
    m.vars = {{"HA_NCCL_IB_MERGE_VFS", bad}, {"NCCL_IB_MERGE_VFS", "0"}};
    const Config c = Config::from_lookup(m.lookup());
    BOOST_TEST(c.ib_merge_vfs, bad);
    BOOST_TEST(bad_log.count(LogLevel::warn, {"HA_NCCL_IB_MERGE_VFS", std::string("'") + bad + "'", "default 1"}) == 1u,
               bad_log.dump());
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(config_checks)

BOOST_AUTO_TEST_CASE(hardware_retry_window) {
  BOOST_TEST(hw_retry_window_ms(14, 7) == 4.096e-3 * 16384 * 8, boost::test_tools::tolerance(1e-9));  // ~537 ms
  BOOST_TEST(hw_retry_window_ms(17, 6) == 4.096e-3 * 131072 * 7, boost::test_tools::tolerance(1e-9));  // ~3.76 s
  BOOST_TEST(hw_retry_window_ms(1, 0) == 4.096e-3 * 2, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(hw_retry_window_ms(0, 7) == 0.0);  // timeout 0: no ACK timeout at all
}

BOOST_AUTO_TEST_CASE(sane_settings_give_no_warnings) {
  Config c;
  c.rto_ms = 1100;  // > 2 x 537 ms
  BOOST_TEST(config_warnings(c, 14, 7).empty(), joined(config_warnings(c, 14, 7)));
  c.rto_ms = 600;  // > 2 x 268 ms
  BOOST_TEST(config_warnings(c, 13, 7).empty(), joined(config_warnings(c, 13, 7)));
}

BOOST_AUTO_TEST_CASE(rto_below_twice_the_hardware_window) {
  Config c;  // the defaults: RTO 1000 ms against 14/7 (2 x 537 ms = 1074 ms)
  auto w = config_warnings(c, 14, 7);
  BOOST_TEST(w.size() == 1u, joined(w));
  BOOST_TEST(count_containing(w, "HA_NCCL_RTO_MS=1000") == 1u, joined(w));
  BOOST_TEST(count_containing(w, "at least 1074") == 1u, joined(w));
  // Soft-RoCE's timeout 17 / retry count 6: 2 x 3758 ms.
  w = config_warnings(c, 17, 6);
  BOOST_TEST(count_containing(w, "at least 7517") == 1u, joined(w));
  c.rto_ms = 7517;
  BOOST_TEST(count_containing(config_warnings(c, 17, 6), "HA_NCCL_RTO_MS") == 0u);
}

BOOST_AUTO_TEST_CASE(heartbeat_too_slow_for_the_rto) {
  Config c;
  c.rto_ms = 1200;
  c.heartbeat_ms = 400;  // 3 x 400 = 1200: just fits
  BOOST_TEST(config_warnings(c, 14, 7).empty(), joined(config_warnings(c, 14, 7)));
  c.heartbeat_ms = 401;
  auto w = config_warnings(c, 14, 7);
  BOOST_TEST(w.size() == 1u, joined(w));
  BOOST_TEST(count_containing(w, "HA_NCCL_HEARTBEAT_MS=401") == 1u, joined(w));
}

BOOST_AUTO_TEST_CASE(no_failovers_allowed) {
  Config c;
  c.rto_ms = 2000;
  c.max_retries = 0;
  auto w = config_warnings(c, 14, 7);
  BOOST_TEST(w.size() == 1u, joined(w));
  BOOST_TEST(count_containing(w, "HA_NCCL_MAX_RETRIES=0") == 1u, joined(w));
}

BOOST_AUTO_TEST_CASE(failback_hold_shorter_than_three_heartbeats) {
  Config c;
  c.rto_ms = 2000;
  c.enable_failback = true;
  c.failback_hold_ms = 600;  // = 3 x 200
  BOOST_TEST(config_warnings(c, 14, 7).empty(), joined(config_warnings(c, 14, 7)));
  c.failback_hold_ms = 599;
  auto w = config_warnings(c, 14, 7);
  BOOST_TEST(w.size() == 1u, joined(w));
  BOOST_TEST(count_containing(w, "HA_NCCL_FAILBACK_HOLD_MS=599") == 1u, joined(w));
  c.enable_failback = false;  // the hold time is irrelevant then
  BOOST_TEST(config_warnings(c, 14, 7).empty(), joined(config_warnings(c, 14, 7)));
}

BOOST_AUTO_TEST_CASE(qp_timeout_zero_waits_for_ever) {
  Config c;
  auto w = config_warnings(c, 0, 7);
  BOOST_TEST(w.size() == 1u, joined(w));  // no RTO-vs-window warning: there is no window
  BOOST_TEST(count_containing(w, "QP timeout 0") == 1u, joined(w));
}

BOOST_AUTO_TEST_CASE(standby_disabled_silences_the_failover_checks) {
  Config c;
  c.enable_standby = false;
  c.rto_ms = 10;
  c.heartbeat_ms = 60000;
  c.max_retries = 0;
  c.enable_failback = false;  // what from_env makes of an unset HA_NCCL_ENABLE_FAILBACK without HA
  BOOST_TEST(config_warnings(c, 20, 7).empty(), joined(config_warnings(c, 20, 7)));
  c.enable_failback = true;
  auto w = config_warnings(c, 20, 7);
  BOOST_TEST(w.size() == 1u, joined(w));
  BOOST_TEST(count_containing(w, "HA_NCCL_ENABLE_FAILBACK=1 has no effect") == 1u, joined(w));
}

BOOST_AUTO_TEST_CASE(describe_lists_every_setting_once) {
  const Config c;
  BOOST_TEST(describe(c) ==
             "HA_NCCL_MAX_POLL=16 HA_NCCL_HANDSHAKE_TIMEOUT_MS=30000 HA_NCCL_SOCKET_IFNAME=\"\" HA_NCCL_SOCKET_FAMILY=any "
             "HA_NCCL_DEBUG=0 HA_NCCL_ENABLE_STANDBY=1 HA_NCCL_HEARTBEAT_MS=200 HA_NCCL_RTO_MS=1000 "
             "HA_NCCL_MAX_RETRIES=10 HA_NCCL_RETRY_WINDOW_MS=600000 HA_NCCL_ENABLE_FAILBACK=1 HA_NCCL_FAILBACK_HOLD_MS=5000 "
             "HA_NCCL_USE_PROGRESS_THREAD=1 HA_NCCL_FAILOVER_TIMEOUT_MS=1000 HA_NCCL_RESCUE_TIMEOUT_MS=10000 HA_NCCL_STANDBY_MAP=\"\" "
             "HA_NCCL_ISLAND_PREFIX_LEN=unset HA_NCCL_STATS_FILE=\"\" HA_NCCL_PROM_FILE=\"\" HA_NCCL_PROM_INTERVAL_MS=10000 "
             "HA_NCCL_FORCE_IB_TIMEOUT=0 HA_NCCL_FORCE_FLUSH=0 HA_NCCL_IB_TC=unset HA_NCCL_IB_SL=unset HA_NCCL_IB_FIFO_TC=unset HA_NCCL_IB_MERGE_VFS=1 HA_NCCL_IB_DEVICE_PCI_ORDER=1 "
             "HA_NCCL_IB_MERGE_NICS=1 HA_NCCL_STRIPE_WEIGHTS_FILE=\"\" HA_NCCL_DMABUF_ENABLE=1 HA_NCCL_IB_PCI_RELAXED_ORDERING=2 HA_NCCL_IB_GDR_FLUSH_DISABLE=0 HA_NCCL_IB_ECE_ENABLE=1 "
             "HA_NCCL_IB_QPS_PER_CONNECTION=1 HA_NCCL_IB_SPLIT_DATA_ON_QPS=0 HA_NCCL_IB_ADAPTIVE_ROUTING=auto HA_NCCL_IB_AR_THRESHOLD=8192");
}

BOOST_AUTO_TEST_CASE(qos_follows_nccl_names_and_rules) {
  CleanEnv clean;
  // NCCL's variables are honoured; the HA_ ones win.
  clean.env.set("NCCL_IB_TC", "96");
  clean.env.set("NCCL_IB_SL", "3");
  Config c = Config::from_env();
  BOOST_TEST(c.ib_tc == 96);
  BOOST_TEST(c.ib_sl == 3);
  clean.env.set("HA_NCCL_IB_TC", "40");
  c = Config::from_env();
  BOOST_TEST(c.ib_tc == 40);
  BOOST_TEST(c.ib_sl == 3);
  // The variable beats the communicator's trafficClass (NCCL's rule) ...
  Qos q = resolve_qos(c, 104);
  BOOST_TEST(q.traffic_class == 40);
  BOOST_TEST(q.service_level == 3);
  // ... which is used when no variable is set, also as the SL when it fits 4 bits.
  const Config unset;
  q = resolve_qos(unset, 104);
  BOOST_TEST(q.traffic_class == 104);
  BOOST_TEST(q.service_level == 0);
  q = resolve_qos(unset, 5);
  BOOST_TEST(q.traffic_class == 5);
  BOOST_TEST(q.service_level == 5);
  q = resolve_qos(unset, -1);  // NCCL_NET_TRAFFIC_CLASS_UNDEF
  BOOST_TEST(q.traffic_class == 0);
  BOOST_TEST(q.service_level == 0);
  // Out of range: WARN, the default (unset).
  clean.env.set("HA_NCCL_IB_TC", "300");
  clean.env.set("NCCL_IB_SL", "16");
  c = Config::from_env();
  BOOST_TEST(c.ib_tc == -1);
  BOOST_TEST(c.ib_sl == -1);
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_TC", "'300'"}) == 1u, clean.log.dump());
  BOOST_TEST(clean.log.count(LogLevel::warn, {"NCCL_IB_SL", "'16'"}) == 1u, clean.log.dump());
}

// NCCL_IB_* settings net_ib would act on and this plugin does not: each named with what the plugin
// does instead; values that ask for net_ib's default behaviour, and unset ones, are not.
BOOST_AUTO_TEST_CASE(unhonoured_nccl_settings_are_named) {
  MapEnv m;
  BOOST_TEST(unhonoured_nccl_settings(m.lookup()).empty());
  m.vars = {{"NCCL_IB_QPS_PER_CONNECTION", "1"}, {"NCCL_IB_ADAPTIVE_ROUTING", "0"}, {"NCCL_IB_TC", "96"}};
  BOOST_TEST(unhonoured_nccl_settings(m.lookup()).empty());
  m.vars = {{"NCCL_IB_QPS_PER_CONNECTION", "4"}, {"NCCL_IB_ADAPTIVE_ROUTING", "1"}, {"NCCL_IB_ROCE_VERSION_NUM", "2"},
            {"NCCL_IB_TIMEOUT", "22"}, {"NCCL_IB_ECE_ENABLE", "0"}};
  const auto u = unhonoured_nccl_settings(m.lookup());
  BOOST_TEST_REQUIRE(u.size() == 1u);  // QPs per connection, adaptive routing and ECE are honoured (*_as_net_ib)
  BOOST_TEST(contains(u[0], "NCCL_IB_ROCE_VERSION_NUM=2 (the GID: HA_NCCL_IB_GID_INDEX"), u[0]);
  m.vars = {{"NCCL_IB_USE_INLINE", "1"}, {"NCCL_IB_SPLIT_DATA_ON_QPS", "1"}};
  const auto v = unhonoured_nccl_settings(m.lookup());
  BOOST_TEST_REQUIRE(v.size() == 1u);
  BOOST_TEST(v[0] == "NCCL_IB_USE_INLINE=1 (no inline data)");
}

// NCCL_IB_QPS_PER_CONNECTION / NCCL_IB_SPLIT_DATA_ON_QPS (HA_ names first) with net_ib's meaning:
// 1 QP and no split by default; a count beyond the 8 an endpoint carries is WARNed about and 8
// taken; a count below 1, or no integer, is WARNed about and 1 taken; the split 0/1.
BOOST_AUTO_TEST_CASE(qps_per_connection_as_net_ib) {
  CleanEnv clean;
  Config c = Config::from_env();
  BOOST_TEST(c.qps_per_connection == 1);
  BOOST_TEST(!c.split_data_on_qps);
  clean.env.set("NCCL_IB_QPS_PER_CONNECTION", "4");
  clean.env.set("NCCL_IB_SPLIT_DATA_ON_QPS", "1");
  c = Config::from_env();
  BOOST_TEST(c.qps_per_connection == 4);
  BOOST_TEST(c.split_data_on_qps);
  BOOST_TEST(contains(describe(c), "HA_NCCL_IB_QPS_PER_CONNECTION=4 HA_NCCL_IB_SPLIT_DATA_ON_QPS=1"), describe(c));
  BOOST_TEST(clean.log.count(LogLevel::warn, {}) == 0u, clean.log.dump());
  clean.env.set("HA_NCCL_IB_QPS_PER_CONNECTION", "2");  // the HA_ names win
  clean.env.set("HA_NCCL_IB_SPLIT_DATA_ON_QPS", "0");
  c = Config::from_env();
  BOOST_TEST(c.qps_per_connection == 2);
  BOOST_TEST(!c.split_data_on_qps);
  clean.env.set("HA_NCCL_IB_QPS_PER_CONNECTION", "128");  // net_ib's most
  BOOST_TEST(Config::from_env().qps_per_connection == 8);
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_QPS_PER_CONNECTION=128", "at most 8 QPs"}) == 1u,
             clean.log.dump());
  clean.env.set("HA_NCCL_IB_QPS_PER_CONNECTION", "0");
  BOOST_TEST(Config::from_env().qps_per_connection == 1);
  clean.env.set("HA_NCCL_IB_QPS_PER_CONNECTION", "four");
  BOOST_TEST(Config::from_env().qps_per_connection == 1);
  clean.env.set("HA_NCCL_IB_SPLIT_DATA_ON_QPS", "2");
  BOOST_TEST(!Config::from_env().split_data_on_qps);
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_QPS_PER_CONNECTION", "'0'"}) == 1u, clean.log.dump());
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_QPS_PER_CONNECTION", "'four'"}) >= 1u, clean.log.dump());
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_SPLIT_DATA_ON_QPS", "'2'"}) >= 1u, clean.log.dump());
}

// NCCL_IB_ADAPTIVE_ROUTING / NCCL_IB_AR_THRESHOLD (HA_ names first) with net_ib's meaning: -2 (the
// default) on for InfiniBand ports only, any other non-zero value on, 0 off; the threshold 8192
// unless set (-2: the default too); a message is split only when larger than it. Bad values: WARN,
// the default.
BOOST_AUTO_TEST_CASE(adaptive_routing_as_net_ib) {
  CleanEnv clean;
  Config c = Config::from_env();
  BOOST_TEST(c.adaptive_routing == -2);
  BOOST_TEST(ar_threshold_for(c, IBV_LINK_LAYER_INFINIBAND) == 8192u);
  BOOST_TEST(ar_threshold_for(c, IBV_LINK_LAYER_ETHERNET) == kNoAdaptiveRouting);
  clean.env.set("NCCL_IB_ADAPTIVE_ROUTING", "1");
  clean.env.set("NCCL_IB_AR_THRESHOLD", "65536");
  c = Config::from_env();
  BOOST_TEST(ar_threshold_for(c, IBV_LINK_LAYER_ETHERNET) == 65536u);
  BOOST_TEST(ar_threshold_for(c, IBV_LINK_LAYER_INFINIBAND) == 65536u);
  BOOST_TEST(contains(describe(c), "HA_NCCL_IB_ADAPTIVE_ROUTING=1 HA_NCCL_IB_AR_THRESHOLD=65536"), describe(c));
  clean.env.set("NCCL_IB_ADAPTIVE_ROUTING", "7");  // net_ib: any non-zero value but -2
  BOOST_TEST(ar_threshold_for(Config::from_env(), IBV_LINK_LAYER_ETHERNET) == 65536u);
  clean.env.set("HA_NCCL_IB_ADAPTIVE_ROUTING", "0");  // the HA_ name wins
  clean.env.set("HA_NCCL_IB_AR_THRESHOLD", "0");
  c = Config::from_env();
  BOOST_TEST(ar_threshold_for(c, IBV_LINK_LAYER_INFINIBAND) == kNoAdaptiveRouting);
  BOOST_TEST(c.ar_threshold == 0u);
  clean.env.set("HA_NCCL_IB_ADAPTIVE_ROUTING", "-2");
  clean.env.set("HA_NCCL_IB_AR_THRESHOLD", "-2");
  c = Config::from_env();
  BOOST_TEST(ar_threshold_for(c, IBV_LINK_LAYER_INFINIBAND) == 8192u);
  BOOST_TEST(ar_threshold_for(c, IBV_LINK_LAYER_ETHERNET) == kNoAdaptiveRouting);
  BOOST_TEST(clean.log.count(LogLevel::warn, {}) == 0u, clean.log.dump());
  for (const char* bad : {"-1", "-5", "4294967296", "8k"}) {
    clean.env.set("HA_NCCL_IB_AR_THRESHOLD", bad);
    BOOST_TEST(Config::from_env().ar_threshold == 8192u, bad);
  }
  BOOST_TEST(clean.log.count(LogLevel::warn, {"threshold of -1"}) == 1u, clean.log.dump());
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_AR_THRESHOLD", "'-5'"}) == 1u, clean.log.dump());
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_AR_THRESHOLD", "'8k'"}) == 1u, clean.log.dump());
  clean.env.set("NCCL_IB_ADAPTIVE_ROUTING", "on");
  clean.env.unset("HA_NCCL_IB_ADAPTIVE_ROUTING");
  BOOST_TEST(Config::from_env().adaptive_routing == -2);
  BOOST_TEST(clean.log.count(LogLevel::warn, {"NCCL_IB_ADAPTIVE_ROUTING", "'on'"}) == 1u, clean.log.dump());
}

// NCCL_IB_ECE_ENABLE (HA_NCCL_IB_ECE_ENABLE first) with net_ib's meaning: on unless 0 (any other
// integer is on); a value that is not an integer: WARN, the default.
BOOST_AUTO_TEST_CASE(ece_enable_as_net_ib) {
  CleanEnv clean;
  BOOST_TEST(Config::from_env().ece_enable);
  clean.env.set("NCCL_IB_ECE_ENABLE", "0");
  BOOST_TEST(!Config::from_env().ece_enable);
  BOOST_TEST(contains(describe(Config::from_env()), "HA_NCCL_IB_ECE_ENABLE=0"), describe(Config::from_env()));
  clean.env.set("HA_NCCL_IB_ECE_ENABLE", "2");  // the HA_ name wins; any non-zero value is on
  BOOST_TEST(Config::from_env().ece_enable);
  clean.env.set("HA_NCCL_IB_ECE_ENABLE", "-1");
  BOOST_TEST(Config::from_env().ece_enable);
  BOOST_TEST(clean.log.count(LogLevel::warn, {}) == 0u, clean.log.dump());
  clean.env.set("HA_NCCL_IB_ECE_ENABLE", "off");
  BOOST_TEST(Config::from_env().ece_enable);
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_ECE_ENABLE", "'off'"}) == 1u, clean.log.dump());
}

// NCCL_IB_FIFO_TC (HA_NCCL_IB_FIFO_TC first): a receive comm's traffic class on RoCE, the SL and
// the connector's class otherwise kept; on InfiniBand, or unset, the connector's QoS as it is.
BOOST_AUTO_TEST_CASE(fifo_tc_is_the_receivers_class_on_roce) {
  CleanEnv clean;
  const Qos connector{96, 3};
  BOOST_TEST((receiver_qos(Config::from_env(), connector, true) == connector));
  clean.env.set("NCCL_IB_FIFO_TC", "104");
  Config c = Config::from_env();
  BOOST_TEST(c.ib_fifo_tc == 104);
  BOOST_TEST(contains(describe(c), "HA_NCCL_IB_FIFO_TC=104"), describe(c));
  BOOST_TEST((receiver_qos(c, connector, true) == Qos{104, 3}));
  BOOST_TEST((receiver_qos(c, connector, false) == connector));
  clean.env.set("HA_NCCL_IB_FIFO_TC", "0");
  BOOST_TEST((receiver_qos(Config::from_env(), connector, true) == Qos{0, 3}));
  BOOST_TEST(clean.log.count_at_or_above(LogLevel::warn) == 0u, clean.log.dump());
  clean.env.set("HA_NCCL_IB_FIFO_TC", "256");
  BOOST_TEST(Config::from_env().ib_fifo_tc == -1);
  BOOST_TEST(clean.log.count(LogLevel::warn, {"HA_NCCL_IB_FIFO_TC", "'256'"}) == 1u, clean.log.dump());
}

BOOST_AUTO_TEST_CASE(describe_shows_the_effective_values) {
  Config c;
  c.socket_ifname = "eth0";
  c.standby_map = "rxe0:rxe1";
  c.stats_file = "/tmp/my stats";
  c.prom_file = "/var/lib/node_exporter/nccl_ha_%h_%p.prom";
  c.prom_interval_ms = 250;
  c.enable_standby = false;
  c.rto_ms = 1500;
  c.debug = 2;
  const std::string s = describe(c);
  for (const char* part : {"HA_NCCL_SOCKET_IFNAME=eth0 ", "HA_NCCL_STANDBY_MAP=rxe0:rxe1 ",
                           "HA_NCCL_STATS_FILE=\"/tmp/my stats\" ",
                           "HA_NCCL_PROM_FILE=/var/lib/node_exporter/nccl_ha_%h_%p.prom ", "HA_NCCL_PROM_INTERVAL_MS=250 ",
                           "HA_NCCL_ENABLE_STANDBY=0 ", "HA_NCCL_RTO_MS=1500 ",
                           "HA_NCCL_DEBUG=2 "})
    BOOST_TEST(contains(s, part), s << " lacks " << part);
  BOOST_TEST(s.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// root/class/infiniband/<dev>/ports/<n>/{apm_enable,cap_mask}
struct ApmSysfs {
  fs::path root;
  ApmSysfs() {
    std::string tmpl = (fs::temp_directory_path() / "nccl-ha-apm-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
  }
  ~ApmSysfs() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void port_file(const std::string& dev, int port, const std::string& name, const std::string& text) const {
    const fs::path p = root / "class/infiniband" / dev / "ports" / std::to_string(port) / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string r() const { return root.string(); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(apm)

BOOST_FIXTURE_TEST_CASE(apm_enable_file, ApmSysfs) {
  port_file("mlx5_0", 1, "apm_enable", "1\n");
  port_file("mlx5_0", 2, "apm_enable", "0\n");
  port_file("mlx5_1", 1, "apm_enable", "garbage\n");
  port_file("mlx5_1", 2, "apm_enable", "");
  port_file("mlx5_2", 1, "cap_mask", "0x00000020\n");  // a stock kernel: no apm_enable file at all
  BOOST_TEST(apm_enabled(r(), "mlx5_0", 1));
  BOOST_TEST(!apm_enabled(r(), "mlx5_0", 2));
  BOOST_TEST(!apm_enabled(r(), "mlx5_1", 1));
  BOOST_TEST(!apm_enabled(r(), "mlx5_1", 2));
  BOOST_TEST(!apm_enabled(r(), "mlx5_2", 1));
  BOOST_TEST(!apm_enabled(r(), "mlx5_0", 3));
  BOOST_TEST(!apm_enabled(r(), "absent", 1));
  BOOST_TEST(!apm_enabled(r() + "/nowhere", "mlx5_0", 1));
}

BOOST_FIXTURE_TEST_CASE(apm_capability_bit, ApmSysfs) {
  port_file("mlx5_0", 1, "cap_mask", "0x02510868\n");  // bit 5 (0x20) set
  port_file("mlx5_0", 2, "cap_mask", "0x2651e848\n");  // bit 5 clear
  port_file("mlx5_1", 1, "cap_mask", "garbage\n");
  port_file("mlx5_1", 2, "cap_mask", "0x\n");
  port_file("rxe0", 1, "cap_mask", "0x00000020 trailing\n");
  BOOST_TEST(apm_supported(r(), "mlx5_0", 1));
  BOOST_TEST(!apm_supported(r(), "mlx5_0", 2));
  BOOST_TEST(!apm_supported(r(), "mlx5_1", 1));
  BOOST_TEST(!apm_supported(r(), "mlx5_1", 2));
  BOOST_TEST(!apm_supported(r(), "rxe0", 1));
  BOOST_TEST(!apm_supported(r(), "absent", 1));
  // Supported is not enabled.
  BOOST_TEST(!apm_enabled(r(), "mlx5_0", 1));
}

BOOST_AUTO_TEST_SUITE_END()

// GPU peer-memory detection (gdr.hpp) against a fixture sysfs tree.
BOOST_AUTO_TEST_SUITE(gdr)

BOOST_FIXTURE_TEST_CASE(peer_memory_marks, ApmSysfs) {
  auto mark = [&](const std::string& rel) {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "1.0\n";
  };
  BOOST_TEST(gpu_peer_memory(r()) == "");  // a host without a GPU peer-memory client
  fs::create_directories(root / "module/nvidia");  // the GPU driver alone is not enough
  fs::create_directories(root / "module/nvidia_peermem");  // nor a module directory without its version
  BOOST_TEST(gpu_peer_memory(r()) == "");
  mark("kernel/mm/memory_peers/nv_mem_nc/version");
  BOOST_TEST(gpu_peer_memory(r()) == r() + "/kernel/mm/memory_peers/nv_mem_nc/version");
  mark("kernel/mm/memory_peers/nv_mem/version");
  BOOST_TEST(gpu_peer_memory(r()) == r() + "/kernel/mm/memory_peers/nv_mem/version");
  mark("module/nvidia_peermem/version");
  BOOST_TEST(gpu_peer_memory(r()) == r() + "/module/nvidia_peermem/version");
  BOOST_TEST(gpu_peer_memory(r() + "/nowhere") == "");
}

BOOST_AUTO_TEST_SUITE_END()
