#include "runtime/log.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::plugin {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

void nccl_sink(LogLevel level, const char* file, int line, const char* message) {
  ncclDebugLogger_t logger = g_logger.load();
  if (!logger) return;
  ncclDebugLogLevel l = level <= LogLevel::warn ? NCCL_LOG_WARN : level == LogLevel::info ? NCCL_LOG_INFO : NCCL_LOG_TRACE;
  // Lines written as "NET/HA: ..." already carry the prefix.
  const char* prefix = std::strncmp(message, "NET/HA", 6) == 0 ? "" : "NET/HA : ";
  logger(l, NCCL_NET, file, line, "%s%s", prefix, message);
}

}  // namespace

void log_init_line(const std::string& line) {
  if (ncclDebugLogger_t logger = g_logger.load())
    logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, __FILE__, __LINE__, "%s", line.c_str());
  else
    HA_INFO("%s", line.c_str());
}

void install_nccl_logger(ncclDebugLogger_t logger) {
  if (!logger) return;
  g_logger.store(logger);
  set_log_sink(&nccl_sink);
  // NCCL filters by NCCL_DEBUG itself; pass INFO through when it or HA_NCCL_DEBUG asks for it.
  const char* dbg = std::getenv("NCCL_DEBUG");
  const char* ha = std::getenv("HA_NCCL_DEBUG");
  if ((ha && *ha && std::strcmp(ha, "0") != 0) || (dbg && (!strcasecmp(dbg, "INFO") || !strcasecmp(dbg, "TRACE"))))
    set_log_level((dbg && !strcasecmp(dbg, "TRACE")) ? LogLevel::trace : LogLevel::info);
  else
    set_log_level(LogLevel::warn);
}

}  // namespace nccl_ha::plugin
