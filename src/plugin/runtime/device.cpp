// A Device's registration rules, decided at init, and its own teardown. Its members are RAII owners (context, PD, MR cache), but the
// completion channel is destroyed here: ibv_destroy_comp_channel fails while a CQ still uses it
// (a comm never released), and that is said rather than leaked silently.
#include "runtime/device.hpp"

#include <cstring>

#include "runtime/config.hpp"
#include "runtime/log.hpp"

namespace nccl_ha::plugin {

void decide_registration(const Config& c, const MrOps& ops, Device& d, bool log_ro) {
  const DmabufProbe probe = probe_dmabuf(ops, d.pd.get());
  d.dmabuf = probe.supported;
  d.dmabuf_offered = offer_dmabuf(probe.supported, c);
  const std::string off = probe.supported && !d.dmabuf_offered ? "; not offered: " + c.dmabuf_enable_var + "=0" : "";
  HA_INFO("NET/HA: %s: dma-buf %s (%s)%s", d.port.id().c_str(), probe.supported ? "supported" : "unsupported",
          probe.why.c_str(), off.c_str());
  const bool capable = relaxed_ordering_capable(ops);
  d.relaxed_ordering = relaxed_ordering_on(c.relaxed_ordering, capable, !d.port.soft_roce());
  if (c.relaxed_ordering == 2 && capable && d.port.soft_roce())
    HA_INFO("NET/HA: %s: relaxed ordering off: Soft-RoCE writes no buffer by PCIe DMA (%s=2: auto)",
            d.port.id().c_str(), c.relaxed_ordering_var.c_str());
  if (!log_ro) return;
  static constexpr const char* kModes[] = {"off", "on", "auto"};
  const char* mode = c.relaxed_ordering >= 0 && c.relaxed_ordering <= 2 ? kModes[c.relaxed_ordering] : "?";
  if (c.relaxed_ordering == 1 && !capable)
    HA_WARN("NET/HA: %s=1 asks for relaxed ordering, but libibverbs has no ibv_reg_mr_iova2 (IBVERBS_1.8): off",
            c.relaxed_ordering_var.c_str());
  // The rule for hardware devices; a Soft-RoCE device in auto says so on its own line above.
  HA_INFO("NET/HA: relaxed ordering %s for NCCL's buffers (%s=%d: %s; libibverbs %s ibv_reg_mr_iova2%s)",
          relaxed_ordering_on(c.relaxed_ordering, capable) ? "on" : "off", c.relaxed_ordering_var.c_str(),
          c.relaxed_ordering, mode, capable ? "has" : "lacks",
          c.relaxed_ordering == 2 && capable ? "; Soft-RoCE devices off" : "");
}

Device::~Device() {
  if (!channel) return;
  if (int rc = ibv_destroy_comp_channel(channel.get()); rc != 0)
    HA_WARN("NET/HA: %s: completion channel still in use at finalize (%s): a comm was not released",
            port.id().c_str(), std::strerror(rc));
  (void)channel.release();
}

}  // namespace nccl_ha::plugin
