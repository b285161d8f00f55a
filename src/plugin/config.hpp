// HA_NCCL_* settings read once at init. A bad value is WARNed about and the default used.
#pragma once

#include <string>

namespace nccl_ha::plugin {

struct Config {
  int test_max_poll = 16;          // HA_NCCL_TEST_MAX_POLL: CQ entries test() reaps per call (1..64)
  int handshake_timeout_ms = 30000;// HA_NCCL_HANDSHAKE_TIMEOUT_MS: bound of one connect/accept handshake
  std::string socket_ifname;       // HA_NCCL_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME: handshake interface
  bool debug = false;              // HA_NCCL_DEBUG: log the budget computation and more at INFO

  static Config from_env();
};

}  // namespace nccl_ha::plugin
