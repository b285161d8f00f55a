// Bridge from nccl-ha's logging (HA_WARN/HA_INFO/...) to NCCL's logger, subsystem NET, with
// the "NET/HA" prefix, so `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET` shows the plugin's lines.
#pragma once

#include "nccl_net_abi.h"

namespace nccl_ha::plugin {

void install_nccl_logger(ncclDebugLogger_t logger);

}  // namespace nccl_ha::plugin
