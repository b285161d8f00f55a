// A Device's own teardown. Its members are RAII owners (context, PD, MR cache), but the
// completion channel is destroyed here: ibv_destroy_comp_channel fails while a CQ still uses it
// (a comm never released), and that is said rather than leaked silently.
#include "device.hpp"

#include <cstring>

#include "log.hpp"

namespace nccl_ha::plugin {

Device::~Device() {
  if (!channel) return;
  if (int rc = ibv_destroy_comp_channel(channel.get()); rc != 0)
    HA_WARN("NET/HA: %s: completion channel still in use at finalize (%s): a comm was not released",
            port.id().c_str(), std::strerror(rc));
  (void)channel.release();
}

}  // namespace nccl_ha::plugin
