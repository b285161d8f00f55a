#include "report.hpp"

#include <algorithm>
#include <cmath>

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

std::string upper(const char* s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void json_string(std::FILE* out, const std::string& s) {
  std::fputc('"', out);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') std::fprintf(out, "\\%c", c);
    else if (c < 0x20) std::fprintf(out, "\\u%04x", c);
    else std::fputc(c, out);
  }
  std::fputc('"', out);
}

}  // namespace

void print_text(const Report& r, std::FILE* out) {
  if (!r.fatal.empty()) {
    std::fprintf(out, "ha-ping: %s\n", r.fatal.c_str());
    return;
  }
  if (r.rails.empty()) std::fprintf(out, "ha-ping: no rails to check (no RDMA ports on either host)\n");
  for (const auto& rail : r.rails) {
    for (const auto& s : rail.sizes) {
      if (!s.has_latency && !s.has_bandwidth) continue;  // the server side measures nothing
      std::fprintf(out, "rail %zu %s -> %s size %llu", rail.index, rail.local.c_str(), rail.peer.c_str(),
                   static_cast<unsigned long long>(s.size));
      if (s.has_latency)
        std::fprintf(out, " lat min/median/p99 %.1f/%.1f/%.1f us", s.latency.min_us, s.latency.median_us, s.latency.p99_us);
      if (s.has_bandwidth) std::fprintf(out, " bw %.2f MiB/s", s.bw_mib_s);
      std::fputc('\n', out);
    }
    std::fprintf(out, "rail %zu %s%s%s: %s%s%s\n", rail.index, rail.local.c_str(), rail.local_netdev.empty() ? "" : " on ",
                 rail.local_netdev.c_str(), upper(to_string(rail.health)).c_str(), rail.reason.empty() ? "" : " - ",
                 rail.reason.c_str());
  }
}

void print_json(const Report& r, std::FILE* out) {
  std::fprintf(out, "{\"tool\":\"ha-ping\",\"role\":");
  json_string(out, r.role);
  std::fprintf(out, ",\"peer\":");
  json_string(out, r.peer);
  std::fprintf(out, ",\"ok\":%s", exit_code(r) == 0 ? "true" : "false");
  if (!r.fatal.empty()) {
    std::fprintf(out, ",\"error\":");
    json_string(out, r.fatal);
  }
  std::fprintf(out, ",\"rails\":[");
  for (std::size_t i = 0; i < r.rails.size(); ++i) {
    const auto& rail = r.rails[i];
    std::fprintf(out, "%s{\"index\":%zu,\"local\":", i ? "," : "", rail.index);
    json_string(out, rail.local);
    std::fprintf(out, ",\"netdev\":");
    json_string(out, rail.local_netdev);
    std::fprintf(out, ",\"peer\":");
    json_string(out, rail.peer);
    std::fprintf(out, ",\"status\":\"%s\",\"reason\":", to_string(rail.health));
    json_string(out, rail.reason);
    std::fprintf(out, ",\"post_send_us\":{\"calls\":%zu,\"median\":%.3f,\"max\":%.3f}", rail.post_send_calls,
                 rail.post_send_median_us, rail.post_send_max_us);
    std::fprintf(out, ",\"results\":[");
    for (std::size_t j = 0; j < rail.sizes.size(); ++j) {
      const auto& s = rail.sizes[j];
      std::fprintf(out, "%s{\"size\":%llu", j ? "," : "", static_cast<unsigned long long>(s.size));
      if (s.has_latency)
        std::fprintf(out, ",\"latency_us\":{\"min\":%.3f,\"median\":%.3f,\"p99\":%.3f,\"samples\":%u}", s.latency.min_us,
                     s.latency.median_us, s.latency.p99_us, s.latency.samples);
      if (s.has_bandwidth) std::fprintf(out, ",\"bw_mib_s\":%.3f", s.bw_mib_s);
      std::fputc('}', out);
    }
    std::fprintf(out, "]}");
  }
  std::fprintf(out, "]}\n");
}

int exit_code(const Report& r) {
  if (!r.fatal.empty()) return 2;
  if (r.rails.empty()) return 1;
  for (const auto& rail : r.rails)
    if (rail.health != Health::healthy) return 1;
  return 0;
}

}  // namespace ha_ping
