// Bridge from nccl-ha's logging (HA_WARN/HA_INFO/...) to NCCL's logger, subsystem NET, with
// the "NET/HA" prefix, so `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET` shows the plugin's lines.
#pragma once

#include <string>

#include "nccl_net_abi.h"

namespace nccl_ha::plugin {

void install_nccl_logger(ncclDebugLogger_t logger);

// The one line an operator needs at start-up, tagged INIT|NET like NCCL's own "NET/IB : Using ..."
// line, so plain NCCL_DEBUG=INFO shows it (NCCL's default NCCL_DEBUG_SUBSYS includes INIT, not
// NET). Without NCCL's logger it goes to the plugin's own log at INFO.
void log_init_line(const std::string& line);

}  // namespace nccl_ha::plugin
