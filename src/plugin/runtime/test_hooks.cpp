#include "runtime/test_hooks.hpp"

#if NCCL_HA_TEST_HOOKS
#include <algorithm>
#include <cctype>
#include <charconv>

#include "nccl_ha/reactor/log.hpp"
#endif

namespace nccl_ha::plugin {

#if NCCL_HA_TEST_HOOKS

namespace {

int env_ms(const net::EnvLookup& env, const char* name) {
  return static_cast<int>(net::env_int(env, {name}, 0, 0, 60000));
}

// HA_NCCL_TEST_FLUSH_QP_ERROR_MS=T[,T...]: at most 8 times, each 0..600000 ms; a malformed list is
// WARNed about and ignored as a whole.
std::vector<int> flush_qp_errors(const net::EnvLookup& env) {
  const auto v = net::env_string(env, {"HA_NCCL_TEST_FLUSH_QP_ERROR_MS"});
  if (!v || v->empty()) return {};
  std::vector<int> times;
  for (std::size_t pos = 0; pos <= v->size();) {
    const std::size_t end = std::min(v->find(',', pos), v->size());
    int ms = -1;
    const auto [ptr, ec] = std::from_chars(v->data() + pos, v->data() + end, ms);
    if (ec != std::errc{} || ptr != v->data() + end || ms < 0 || ms > 600000 || times.size() == 8) {
      HA_WARN("NET/HA: HA_NCCL_TEST_FLUSH_QP_ERROR_MS='%s' is invalid (expected up to 8 times in ms, 0..600000, "
              "comma-separated); ignored", v->c_str());
      return {};
    }
    times.push_back(ms);
    pos = end + 1;
  }
  std::sort(times.begin(), times.end());
  return times;
}

void read_failback_stall_at(const net::EnvLookup& env, TestHooks::Values& v) {
  const auto at = net::env_string(env, {"HA_NCCL_TEST_FAILBACK_STALL_AT"});
  if (!at) return;
  std::string lower = *at;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "switch")
    v.failback_stall_at = TestHooks::stall_switch;
  else if (lower == "finish")
    v.failback_stall_at = TestHooks::stall_finish;
  else
    HA_WARN("NET/HA: HA_NCCL_TEST_FAILBACK_STALL_AT='%s' is invalid (expected switch or finish); using switch",
            at->c_str());
}

// HA_NCCL_TEST_REAPER_DELAY_MS=MS[:down], MS 0..600000.
void read_reaper_delay(const net::EnvLookup& env, TestHooks::Values& v) {
  const auto d = net::env_string(env, {"HA_NCCL_TEST_REAPER_DELAY_MS"});
  if (!d || d->empty()) return;
  const std::string_view s(*d);
  const bool down = s.size() > 5 && s.substr(s.size() - 5) == ":down";
  const std::string_view ms_text = down ? s.substr(0, s.size() - 5) : s;
  int ms = -1;
  const auto [ptr, ec] = std::from_chars(ms_text.data(), ms_text.data() + ms_text.size(), ms);
  if (ec != std::errc{} || ptr != ms_text.data() + ms_text.size() || ms < 0 || ms > 600000) {
    HA_WARN("NET/HA: HA_NCCL_TEST_REAPER_DELAY_MS='%s' is invalid (expected MS or MS:down, MS 0..600000); ignored",
            d->c_str());
    return;
  }
  v.reaper_delay_ms = ms;
  v.reaper_delay_down_only = down;
}

std::string ms_list(std::span<const int> times) {
  std::string list;
  for (const int ms : times) list += (list.empty() ? "" : ",") + std::to_string(ms);
  return list;
}

const char* stall_name(TestHooks::FailbackStall at) { return at == TestHooks::stall_finish ? "finish" : "switch"; }

// Each hook that is on: its "NAME=value" and what it does.
template <class Fn>
void for_each_on(const TestHooks& h, Fn&& fn) {
  if (const int ms = h.ack_delay_ms())
    fn("HA_NCCL_TEST_ACK_DELAY_MS=" + std::to_string(ms),
       "every accepted handshake waits " + std::to_string(ms) + " ms before its acknowledgement");
  if (const int ms = h.standby_delay_ms())
    fn("HA_NCCL_TEST_STANDBY_DELAY_MS=" + std::to_string(ms),
       "every new comm connects its standby " + std::to_string(ms) + " ms late");
  if (const int ms = h.reprotect_delay_ms())
    fn("HA_NCCL_TEST_REPROTECT_DELAY_MS=" + std::to_string(ms),
       "no re-protection attempt within " + std::to_string(ms) + " ms of a standby's loss");
  if (const auto times = h.flush_qp_error_ms(); !times.empty())
    fn("HA_NCCL_TEST_FLUSH_QP_ERROR_MS=" + ms_list(times),
       "the active slot's flush QP is moved to ERROR at these ms after a receive comm's flush QPs are built");
  if (const int ms = h.failback_stall_ms())
    fn("HA_NCCL_TEST_FAILBACK_STALL_MS=" + std::to_string(ms) + " HA_NCCL_TEST_FAILBACK_STALL_AT=" +
           stall_name(h.failback_stall_at()),
       "the sender of a failback stalls " + std::to_string(ms) + " ms " +
           (h.failback_stall_at() == TestHooks::stall_finish ? "after the receiver's report" : "before its notice"));
  if (const int ms = h.reaper_delay_ms())
    fn("HA_NCCL_TEST_REAPER_DELAY_MS=" + std::to_string(ms) + (h.reaper_delay_down_only() ? ":down" : ""),
       std::string("QP destructions") + (h.reaper_delay_down_only() ? " on ports that are down" : "") +
           " are delayed");
}

}  // namespace

TestHooks TestHooks::from_lookup(const net::EnvLookup& env) {
  Values v;
  v.ack_delay_ms = env_ms(env, "HA_NCCL_TEST_ACK_DELAY_MS");
  v.failback_stall_ms = env_ms(env, "HA_NCCL_TEST_FAILBACK_STALL_MS");
  read_failback_stall_at(env, v);
  v.standby_delay_ms = env_ms(env, "HA_NCCL_TEST_STANDBY_DELAY_MS");
  v.reprotect_delay_ms = env_ms(env, "HA_NCCL_TEST_REPROTECT_DELAY_MS");
  v.flush_qp_error_ms = flush_qp_errors(env);
  read_reaper_delay(env, v);
  return TestHooks(std::move(v));
}

std::string TestHooks::settings() const {
  std::string s;
  for_each_on(*this, [&s](const std::string& set, const std::string&) { s += (s.empty() ? "" : " ") + set; });
  return s;
}

std::string TestHooks::effects() const {
  std::string s;
  for_each_on(*this, [&s](const std::string& set, const std::string& does) {
    s += (s.empty() ? "" : "; ") + set + ": " + does;
  });
  return s;
}

#else  // a build without test hooks: nothing is read, nothing is on

TestHooks TestHooks::from_lookup(const net::EnvLookup&) { return {}; }
std::string TestHooks::settings() const { return {}; }
std::string TestHooks::effects() const { return {}; }

#endif

}  // namespace nccl_ha::plugin
