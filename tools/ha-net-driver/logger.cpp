#include "logger.hpp"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common.hpp"

namespace hnd::log {
namespace {

int g_level = NCCL_LOG_WARN;
// NCCL's default NCCL_DEBUG_SUBSYS (debug.cc): INIT, BOOTSTRAP and ENV; NET lines need NCCL_DEBUG_SUBSYS=NET.
unsigned long g_mask = NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
int g_rank = -1;
bool g_quiet = false;
char g_host[64] = "?";
std::atomic<std::uint64_t> g_warnings{0};
const std::int64_t g_t0 = now_ns();
std::mutex g_lines_mutex;
std::vector<std::string> g_warning_lines;  // guarded by g_lines_mutex
// NCCL_DEBUG_TIMESTAMP_LEVELS / _FORMAT: which levels get a wall-clock prefix, and its format.
unsigned g_stamp_levels = 0;  // bit (1 << ncclDebugLogLevel)
std::string g_stamp_format = "[%F %T] ";

struct Subsys {
  const char* name;
  unsigned long bit;
};
constexpr Subsys kSubsys[] = {{"INIT", NCCL_INIT},     {"COLL", NCCL_COLL},       {"P2P", NCCL_P2P},
                              {"SHM", NCCL_SHM},       {"NET", NCCL_NET},         {"GRAPH", NCCL_GRAPH},
                              {"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV},         {"ALLOC", NCCL_ALLOC},
                              {"CALL", NCCL_CALL},     {"PROXY", NCCL_PROXY},     {"NVLS", NCCL_NVLS},
                              {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG},   {"PROFILE", NCCL_PROFILE},
                              {"RAS", NCCL_RAS},       {"DESTROY", NCCL_DESTROY}, {"ALLOC_HOST", NCCL_ALLOC_HOST},
                              {"ALL", ~0ul}};

// The wall-clock prefix: strftime(g_stamp_format) of the local time, where %Nf (N = 1..9) is
// the fraction of the second with N digits (NCCL's extension), e.g. "%s.%6f " -> "1795468583.123456 ".
std::string stamp() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::string fmt;
  const std::string& f = g_stamp_format;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 2 < f.size() && f[i + 1] >= '1' && f[i + 1] <= '9' && f[i + 2] == 'f') {
      const int digits = f[i + 1] - '0';
      char frac[16];
      std::snprintf(frac, sizeof frac, "%09ld", ts.tv_nsec);
      fmt.append(frac, static_cast<std::size_t>(digits));
      i += 2;
    } else if (f[i] == '%' && i + 1 < f.size()) {
      fmt += f[i];
      fmt += f[++i];  // any other conversion (or %%) is strftime's
    } else {
      fmt += f[i];
    }
  }
  tm local{};
  localtime_r(&ts.tv_sec, &local);
  char buf[256];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"  // the user's NCCL_DEBUG_TIMESTAMP_FORMAT, as NCCL takes it
  const std::size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &local);
#pragma GCC diagnostic pop
  return std::string(buf, n);
}

void write_line(std::string& line) {
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

__attribute__((format(printf, 5, 6))) void nccl_log(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                                    int line, const char* fmt, ...) {
  const bool warn = level == NCCL_LOG_WARN;
  const bool print =
      level <= g_level && (warn || level == NCCL_LOG_VERSION || (flags & g_mask) != 0);
  // NCCL_DEBUG=NONE: nothing is formatted, as in NCCL (a plugin's WARN arguments are not read;
  // NVIDIA's sharp plugin passes a char for a %s on a device without a PCI path, rxe's)
  if (g_level == NCCL_LOG_NONE || (!warn && !print)) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt ? fmt : "", ap);
  va_end(ap);
  if (warn) {
    g_warnings.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(g_lines_mutex);
    if (g_warning_lines.size() < kMaxWarningLines) g_warning_lines.push_back(strf("%s:%d %s", file ? file : "?", line, buf));
  }
  if (!print) return;
  long tid = ::syscall(SYS_gettid);
  std::string out = (g_stamp_levels >> level) & 1u ? stamp() : std::string();
  const char* lvl = warn ? "WARN" : level == NCCL_LOG_TRACE ? "TRACE" : "INFO";
  if (level == NCCL_LOG_TRACE)
    out += strf("%s:%d:%ld [%d] %.3f %s:%d NCCL %s ", g_host, static_cast<int>(::getpid()), tid, g_rank,
                static_cast<double>(now_ns() - g_t0) / 1e6, file ? file : "?", line, lvl);
  else if (warn)
    out += strf("%s:%d:%ld [%d] %s:%d NCCL %s ", g_host, static_cast<int>(::getpid()), tid, g_rank, file ? file : "?",
                line, lvl);
  else
    out += strf("%s:%d:%ld [%d] NCCL %s ", g_host, static_cast<int>(::getpid()), tid, g_rank, lvl);
  out += buf;
  write_line(out);
}

void driver_line(const char* tag, const char* fmt, va_list ap) {
  char buf[2048];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string out = strf("ha-net-driver[%d]%s: %s", g_rank, tag, buf);
  write_line(out);
}

}  // namespace

void configure(int rank) {
  g_rank = rank;
  ::gethostname(g_host, sizeof g_host - 1);
  g_host[sizeof g_host - 1] = '\0';
  if (const char* q = std::getenv("HA_NET_DRIVER_QUIET")) g_quiet = std::strcmp(q, "1") == 0;
  if (const char* d = std::getenv("NCCL_DEBUG")) {
    if (!strcasecmp(d, "VERSION")) g_level = NCCL_LOG_VERSION;
    else if (!strcasecmp(d, "WARN")) g_level = NCCL_LOG_WARN;
    else if (!strcasecmp(d, "INFO")) g_level = NCCL_LOG_INFO;
    else if (!strcasecmp(d, "ABORT")) g_level = NCCL_LOG_ABORT;
    else if (!strcasecmp(d, "TRACE")) g_level = NCCL_LOG_TRACE;
    else if (!strcasecmp(d, "NONE")) g_level = NCCL_LOG_NONE;
  }
  if (const char* s = std::getenv("NCCL_DEBUG_SUBSYS")) {
    std::string list(s);
    bool invert = !list.empty() && list[0] == '^';
    if (invert) list.erase(0, 1);
    unsigned long mask = 0;
    std::size_t pos = 0;
    while (pos <= list.size()) {
      std::size_t comma = list.find(',', pos);
      std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      for (const auto& e : kSubsys)
        if (!strcasecmp(tok.c_str(), e.name)) mask |= e.bit;
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    g_mask = invert ? ~mask : mask;
  }
  if (const char* s = std::getenv("NCCL_DEBUG_TIMESTAMP_LEVELS")) {
    struct Level {
      const char* name;
      ncclDebugLogLevel level;
    };
    constexpr Level kLevels[] = {{"VERSION", NCCL_LOG_VERSION}, {"WARN", NCCL_LOG_WARN}, {"INFO", NCCL_LOG_INFO},
                                 {"ABORT", NCCL_LOG_ABORT}, {"TRACE", NCCL_LOG_TRACE}};
    std::string list(s);
    std::size_t pos = 0;
    while (pos <= list.size()) {
      std::size_t comma = list.find(',', pos);
      std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      for (const auto& l : kLevels)
        if (!strcasecmp(tok.c_str(), l.name) || !strcasecmp(tok.c_str(), "ALL")) g_stamp_levels |= 1u << l.level;
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  if (const char* f = std::getenv("NCCL_DEBUG_TIMESTAMP_FORMAT")) g_stamp_format = f;
}

ncclDebugLogger_t logger() { return &nccl_log; }
std::uint64_t plugin_warnings() { return g_warnings.load(); }
std::vector<std::string> plugin_warning_lines() {
  std::lock_guard<std::mutex> lock(g_lines_mutex);
  return g_warning_lines;
}

void info(const char* fmt, ...) {
  if (g_quiet) return;
  va_list ap;
  va_start(ap, fmt);
  driver_line("", fmt, ap);
  va_end(ap);
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  driver_line(" WARN", fmt, ap);
  va_end(ap);
}

}  // namespace hnd::log
