#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "nccl_ha/version.hpp"
#include "report_json.hpp"

namespace ha_ping {

const char* to_string(Health h) noexcept {
  switch (h) {
    case Health::healthy: return "healthy";
    case Health::down: return "down";
    case Health::degraded: return "degraded";
    case Health::unreachable: return "unreachable";
    case Health::error: return "error";
  }
  return "?";
}

LatencyStats summarize_rtt(std::vector<double> rtt_us) {
  LatencyStats s;
  if (rtt_us.empty()) return s;
  std::sort(rtt_us.begin(), rtt_us.end());
  auto at = [&](double q) {
    auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(rtt_us.size()))) ;
    return rtt_us[std::min(rtt_us.size() - 1, i == 0 ? 0 : i - 1)] / 2;
  };
  s.samples = static_cast<std::uint32_t>(rtt_us.size());
  s.min_us = rtt_us.front() / 2;
  s.median_us = at(0.5);
  s.p99_us = at(0.99);
  return s;
}

namespace {

using nccl_ha::net::JsonWriter;

std::string upper(const char* s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string join_sizes(const std::vector<std::uint64_t>& sizes) {
  std::string out;
  for (auto s : sizes) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

std::string min_bw_text(const Settings& s) {
  if (s.min_bw <= 0) return "none";
  char buf[64];
  std::snprintf(buf, sizeof buf, s.min_bw_percent ? "%g%% of link speed" : "%g MiB/s", s.min_bw);
  return buf;
}

}  // namespace

void stamp(Report& r) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) r.host = host;
  const auto now = std::chrono::system_clock::now();
  r.time_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(r.time_unix_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(r.time_unix_ms % 1000));
  r.time_iso = buf;
}

double bw_in_unit(double mib_s, bool gbits) noexcept { return gbits ? mib_s * 1048576.0 * 8.0 / 1e9 : mib_s; }
const char* bw_unit(bool gbits) noexcept { return gbits ? "Gb/s" : "MiB/s"; }

void print_text(const Report& r, std::FILE* out) {
  const auto& st = r.settings;
  std::fprintf(out, "ha-ping %s %s on %s, %s%s", NCCL_HA_VERSION_STRING, r.role.c_str(), r.host.c_str(),
               r.time_iso.c_str(), r.client ? "" : "\n");
  if (r.client) std::fprintf(out, ", client %llu from %s\n", static_cast<unsigned long long>(r.client), r.peer.c_str());
  if (!r.fatal.empty()) {
    std::fprintf(out, "ha-ping: %s\n", r.fatal.c_str());
    return;
  }
  std::fprintf(out,
               "settings: sizes %s, iters %u, %s, tx-depth %u, timeout %u s, min-bw %s, tclass %u (%s), sl %u (%s), "
               "gid-index %s\n",
               join_sizes(st.sizes).c_str(), st.iters,
               st.duration_s ? ("duration " + std::to_string(st.duration_s) + " s").c_str()
                             : ("bw-iters " + std::to_string(st.bw_iters)).c_str(),
               st.tx_depth, st.timeout_s, min_bw_text(st).c_str(), st.tclass, st.tclass_source.c_str(), st.sl,
               st.sl_source.c_str(), st.gid_index ? std::to_string(*st.gid_index).c_str() : "auto");
  if (r.rails.empty()) std::fprintf(out, "ha-ping: no rails to check (no RDMA ports on either host)\n");
  for (const auto& rail : r.rails) {
    for (const auto& s : rail.sizes) {
      if (!s.has_latency && !s.has_bandwidth) continue;  // the server side measures nothing
      std::fprintf(out, "rail %zu %s -> %s size %llu", rail.index, rail.local.c_str(), rail.peer.c_str(),
                   static_cast<unsigned long long>(s.size));
      if (s.has_latency)
        std::fprintf(out, " lat min/median/p99 %.1f/%.1f/%.1f us", s.latency.min_us, s.latency.median_us, s.latency.p99_us);
      if (s.has_bandwidth)
        std::fprintf(out, " bw %.2f %s", bw_in_unit(s.bw_mib_s, st.report_gbits), bw_unit(st.report_gbits));
      std::fputc('\n', out);
    }
    if (rail.has_qos) {
      // A device may not keep what was asked (Soft-RoCE keeps no SL): say so, the read-back is the truth.
      std::string note;
      if (rail.qos_tclass >= 0 && static_cast<unsigned>(rail.qos_tclass) != rail.qos_requested_tclass)
        note += " tclass " + std::to_string(rail.qos_requested_tclass);
      if (static_cast<unsigned>(rail.qos_sl) != rail.qos_requested_sl) note += " sl " + std::to_string(rail.qos_requested_sl);
      std::fprintf(out, "rail %zu %s qos (read back from the QP): tclass %d sl %d gid-index %d%s%s%s\n", rail.index,
                   rail.local.c_str(), rail.qos_tclass, rail.qos_sl, rail.qos_gid_index,
                   note.empty() ? "" : " (requested", note.c_str(), note.empty() ? "" : "; the device did not keep it)");
    }
    else if (!rail.qos_error.empty())
      std::fprintf(out, "rail %zu %s qos: %s\n", rail.index, rail.local.c_str(), rail.qos_error.c_str());
    std::fprintf(out, "rail %zu %s%s%s: %s%s%s\n", rail.index, rail.local.c_str(), rail.local_netdev.empty() ? "" : " on ",
                 rail.local_netdev.c_str(), upper(to_string(rail.health)).c_str(), rail.reason.empty() ? "" : " - ",
                 rail.reason.c_str());
  }
}

namespace {

using ha_tools::members;
using ha_tools::object;
using ha_tools::object_or_null;
using ha_tools::objects;

void settings_members(JsonWriter& j, const Settings& st) {
  j.kv_list("sizes", st.sizes);
  members(j, "iters", st.iters, "bw_iters", st.bw_iters, "duration_s", st.duration_s, "tx_depth", st.tx_depth,
          "timeout_s", st.timeout_s);
  object_or_null(j, "min_bw", st.min_bw > 0, [&] {
    j.kv("value", st.min_bw);
    j.kv("unit", st.min_bw_percent ? "percent_of_link_speed" : "MiB/s");
  });
  members(j, "tclass", st.tclass, "tclass_source", st.tclass_source, "sl", st.sl, "sl_source", st.sl_source,
          "gid_index", st.gid_index, "ib_dev", st.ib_dev, "ib_port", st.ib_port, "bw_unit", bw_unit(st.report_gbits));
}

// The members of one size's result: latency and bandwidth when measured (the server measures neither).
void size_members(JsonWriter& j, const SizeResult& s, bool gbits) {
  j.kv("size", static_cast<unsigned long long>(s.size));
  if (s.has_latency)
    object(j, "latency_us", [&] {
      j.kv("min", s.latency.min_us);
      j.kv("median", s.latency.median_us);
      j.kv("p99", s.latency.p99_us);
      j.kv("samples", s.latency.samples);
    });
  if (s.has_bandwidth) {
    j.kv("bw_mib_s", s.bw_mib_s);
    j.kv("bw", bw_in_unit(s.bw_mib_s, gbits));
    j.kv("bw_unit", bw_unit(gbits));
  }
}

void rail_members(JsonWriter& j, const RailReport& rail, bool gbits) {
  j.kv("index", static_cast<unsigned long long>(rail.index));
  j.kv("local", rail.local);
  j.kv("netdev", rail.local_netdev);
  j.kv("peer", rail.peer);
  j.kv("status", to_string(rail.health));
  j.kv("reason", rail.reason);
  j.kv("speed_mbps", rail.speed_mbps);
  j.kv("min_bw_mib_s", rail.min_bw_mib_s);
  object_or_null(j, "qos", rail.has_qos, [&] {
    j.kv("tclass", rail.qos_tclass);
    j.kv("sl", rail.qos_sl);
    j.kv("gid_index", rail.qos_gid_index);
    j.kv("requested_tclass", rail.qos_requested_tclass);
    j.kv("requested_sl", rail.qos_requested_sl);
  });
  if (!rail.qos_error.empty()) j.kv("qos_error", rail.qos_error);
  object(j, "post_send_us", [&] {
    j.kv("calls", static_cast<unsigned long long>(rail.post_send_calls));
    j.kv("median", rail.post_send_median_us);
    j.kv("max", rail.post_send_max_us);
  });
  objects(j, "results", rail.sizes, [&](const SizeResult& s) { size_members(j, s, gbits); });
}

}  // namespace

std::string to_json(const Report& r) {
  JsonWriter j;
  j.open('{');
  j.kv("tool", "ha-ping");
  j.kv("version", NCCL_HA_VERSION_STRING);
  j.kv("host", r.host);
  object(j, "time", [&] {
    j.kv("iso", r.time_iso);
    j.kv("unix_ms", static_cast<long long>(r.time_unix_ms));
  });
  j.kv("role", r.role);
  if (r.client) j.kv("client", static_cast<unsigned long long>(r.client));
  j.kv("peer", r.peer);
  j.kv("ok", exit_code(r) == 0);
  if (!r.fatal.empty()) j.kv("error", r.fatal);
  object(j, "settings", [&] { settings_members(j, r.settings); });
  objects(j, "rails", r.rails, [&](const RailReport& rail) { rail_members(j, rail, r.settings.report_gbits); });
  j.close('}');
  return j.take();
}

void print_json(const Report& r, std::FILE* out) {
  const std::string line = to_json(r) + "\n";
  std::fputs(line.c_str(), out);
}

int exit_code(const Report& r) {
  if (!r.fatal.empty()) return 2;
  if (r.rails.empty()) return 1;
  for (const auto& rail : r.rails)
    if (rail.health != Health::healthy) return 1;
  return 0;
}

}  // namespace ha_ping
