// ha-net-driver: the NCCL-style logger handed to the plugin's init(), and the driver's own
// stderr messages (the profiler callback: profiler_standin.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl_net_abi.h"

namespace hnd::log {

// Reads NCCL_DEBUG (VERSION|WARN|INFO|ABORT|TRACE; unset = WARN), NCCL_DEBUG_SUBSYS
// (comma list of INIT,NET,...; leading ^ excludes; unset = NCCL's default) and, as NCCL does,
// NCCL_DEBUG_TIMESTAMP_LEVELS (levels whose lines start with the wall clock: a comma list of
// VERSION,WARN,INFO,ABORT,TRACE or ALL; unset = none, where NCCL's default is WARN) and
// NCCL_DEBUG_TIMESTAMP_FORMAT (strftime, %Nf = N digits of the second's fraction; "[%F %T] ").
// `rank` is printed as [rank].
void configure(int rank);

// ncclDebugLogger_t for the plugin. Lines look like NCCL's:
//   host:pid:tid [rank] NCCL INFO <msg>
//   host:pid:tid [rank] file:line NCCL WARN <msg>
//   host:pid:tid [rank] <ms> file:line NCCL TRACE <msg>
// Thread-safe (one write(2) per line).
ncclDebugLogger_t logger();

std::uint64_t plugin_warnings();       // WARN lines the plugin logged (printed or not)
// The text of the first kMaxWarningLines WARN lines the plugin logged (printed or not), as
// "file:line message".
constexpr std::size_t kMaxWarningLines = 100;
std::vector<std::string> plugin_warning_lines();

// Driver messages: "ha-net-driver[rank]: ..." on stderr; warn() always, info() unless
// HA_NET_DRIVER_QUIET=1.
void info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace hnd::log
