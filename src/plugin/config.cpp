#include "config.hpp"

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::plugin {

Config Config::from_env() {
  Config c;
  c.test_max_poll = static_cast<int>(net::env_int({"HA_NCCL_TEST_MAX_POLL"}, c.test_max_poll, 1, 64));
  c.handshake_timeout_ms =
      static_cast<int>(net::env_int({"HA_NCCL_HANDSHAKE_TIMEOUT_MS"}, c.handshake_timeout_ms, 100, 3600000));
  c.socket_ifname = net::env_string({"HA_NCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}).value_or("");
  c.debug = net::env_int({"HA_NCCL_DEBUG"}, 0, 0, 1) != 0;
  return c;
}

}  // namespace nccl_ha::plugin
