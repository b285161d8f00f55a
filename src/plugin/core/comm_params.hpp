#pragma once

#include <cstdint>

namespace nccl_ha::plugin {

// What NCCL tells the plugin about the communicator a connection belongs to: v11+ pass it once
// to init() (commId, config) and the context to listen/connect; v10 passes the config to every
// connect(); older versions nothing (the defaults).
struct CommParams {
  std::uint64_t comm_id = 0;  // NCCL's communicator id (v11+; 0: not given)
  int traffic_class = -1;     // ncclNetCommConfig.trafficClass (NCCL_NET_TRAFFIC_CLASS_UNDEF: -1)
};

}  // namespace nccl_ha::plugin
