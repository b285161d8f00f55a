// Logging for nccl-ha. One process-wide sink; the plugin points it at NCCL's logger,
// tools and tests at stderr (the default). Thread-safe: may be called from any thread.
#pragma once

#include <atomic>
#include <cstdarg>
#include <optional>
#include <string_view>

namespace nccl_ha {

enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

// The sink receives an already formatted line without trailing newline.
using LogSink = void (*)(LogLevel level, const char* file, int line, const char* message);

void set_log_sink(LogSink sink) noexcept;       // nullptr restores the stderr sink
void set_log_level(LogLevel level) noexcept;    // lines above this level are dropped early
LogLevel log_level() noexcept;

// A level by name, as HA_NCCL_LOG_LEVEL gives it (the initial level; WARN when unset or unknown):
// ERROR, WARN, INFO, DEBUG or TRACE, in any case (kLogLevelNames); nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view name) noexcept;
inline constexpr const char* kLogLevelNames = "ERROR, WARN, INFO, DEBUG or TRACE";
inline bool log_enabled(LogLevel level) noexcept { return static_cast<int>(level) <= static_cast<int>(log_level()); }

void log_line(LogLevel level, const char* file, int line, const char* fmt, ...) noexcept
    __attribute__((format(printf, 4, 5)));

}  // namespace nccl_ha

#define HA_LOG(level, ...)                                                  \
  do {                                                                      \
    if (::nccl_ha::log_enabled(level))                                      \
      ::nccl_ha::log_line(level, __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)
#define HA_ERROR(...) HA_LOG(::nccl_ha::LogLevel::error, __VA_ARGS__)
#define HA_WARN(...) HA_LOG(::nccl_ha::LogLevel::warn, __VA_ARGS__)
#define HA_INFO(...) HA_LOG(::nccl_ha::LogLevel::info, __VA_ARGS__)
#define HA_DEBUG(...) HA_LOG(::nccl_ha::LogLevel::debug, __VA_ARGS__)
#define HA_TRACE(...) HA_LOG(::nccl_ha::LogLevel::trace, __VA_ARGS__)
