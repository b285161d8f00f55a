#include "nccl_ha/reactor/log.hpp"

#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace nccl_ha {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "ERROR";
    case LogLevel::warn: return "WARN";
    case LogLevel::info: return "INFO";
    case LogLevel::debug: return "DEBUG";
    case LogLevel::trace: return "TRACE";
  }
  return "?";
}

void stderr_sink(LogLevel level, const char* file, int line, const char* message) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const char* base = std::strrchr(file, '/');
  std::fprintf(stderr, "%ld.%06ld nccl-ha %s %s:%d %s\n", static_cast<long>(ts.tv_sec),
               static_cast<long>(ts.tv_nsec / 1000), level_name(level), base ? base + 1 : file, line,
               message);
}

LogLevel initial_level() {
  const char* v = std::getenv("HA_NCCL_LOG_LEVEL");
  return v ? parse_log_level(v).value_or(LogLevel::warn) : LogLevel::warn;
}

std::atomic<LogSink> g_sink{&stderr_sink};
std::atomic<int> g_level{static_cast<int>(initial_level())};

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) noexcept {
  for (const LogLevel l : {LogLevel::error, LogLevel::warn, LogLevel::info, LogLevel::debug, LogLevel::trace}) {
    const std::string_view want = level_name(l);
    if (name.size() == want.size() && !strncasecmp(name.data(), want.data(), want.size())) return l;
  }
  return std::nullopt;
}

void set_log_sink(LogSink sink) noexcept { g_sink.store(sink ? sink : &stderr_sink); }
void set_log_level(LogLevel level) noexcept { g_level.store(static_cast<int>(level)); }
LogLevel log_level() noexcept { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log_line(LogLevel level, const char* file, int line, const char* fmt, ...) noexcept {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_sink.load()(level, file, line, buf);
}

}  // namespace nccl_ha
