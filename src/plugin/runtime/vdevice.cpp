#include "runtime/vdevice.hpp"

#include <algorithm>

#include "nccl_ha/net/discovery.hpp"

namespace nccl_ha::plugin {

Expected<std::vector<int>> plane_indices(std::span<const std::int16_t> planes) {
  std::vector<std::int16_t> seen{-1};  // index 0: the undefined plane
  std::vector<int> out;
  out.reserve(planes.size());
  for (std::int16_t plane : planes) {
    auto it = std::find(seen.begin(), seen.end(), plane);
    if (it == seen.end()) {
      if (plane & kPlaneVirtBit)
        return make_error(Errc::invalid_argument,
                          "plane id " + std::to_string(plane) + " has bit 14 set (NCCL keeps it for fused devices)");
      if (static_cast<int>(seen.size()) == kMaxPlaneIndex - 1)
        return make_error(Errc::invalid_argument,
                          "more than " + std::to_string(kMaxPlaneIndex - 1) + " plane ids (NCCL's limit)");
      seen.push_back(plane);
      it = seen.end() - 1;
    }
    out.push_back(static_cast<int>(it - seen.begin()));
  }
  return out;
}

Expected<VDevice> merge_ports(std::span<const MemberFacts> ports, std::span<const int> want, int max_members) {
  const auto n = static_cast<int>(want.size());
  if (n < 1) return make_error(Errc::invalid_argument, "a virtual device needs at least one port");
  const int limit = std::min(max_members, kMaxVDeviceMembers);
  if (n > limit)
    return make_error(Errc::invalid_argument, std::to_string(n) + " ports, at most " + std::to_string(limit) +
                                                  " fuse into one device (NCCL_NET_MAX_DEVS_PER_NIC)");
  VDevice v;
  for (int i = 0; i < n; ++i) {
    const int d = want[static_cast<std::size_t>(i)];
    if (d < 0 || d >= static_cast<int>(ports.size()))
      return make_error(Errc::not_found, "device " + std::to_string(d) + " is no port of this plugin (it has " +
                                             std::to_string(ports.size()) + ")");
    if (std::find(want.begin(), want.begin() + i, d) != want.begin() + i)
      return make_error(Errc::invalid_argument, "port " + std::to_string(d) + " (" +
                                                    ports[static_cast<std::size_t>(d)].name + ") named twice");
    v.members[static_cast<std::size_t>(i)] = d;
  }
  v.count = n;
  const MemberFacts& first = ports[static_cast<std::size_t>(want[0])];
  v.rail_id = first.rail_id;
  v.plane_id = n > 1 ? kPlaneVirtBit : first.plane_id;
  for (int d : v.member_span()) {
    const MemberFacts& m = ports[static_cast<std::size_t>(d)];
    if (m.link_layer != first.link_layer)
      return make_error(Errc::unsupported, "ports of different link layers cannot fuse: " + first.name + " is " +
                                               net::link_layer_name(first.link_layer) + ", " + m.name + " is " +
                                               net::link_layer_name(m.link_layer));
    if (n > 1 && (m.plane_idx < 0 || m.plane_idx >= kMaxPlaneIndex))
      return make_error(Errc::invalid_argument, m.name + " has no usable plane index");
    if (!v.name.empty()) v.name += '+';
    v.name += m.name;
    v.speed += m.speed;
    if (m.rail_id == -1 || m.rail_id != v.rail_id) v.rail_id = -1;  // a fused device of mixed rails has none
    if (n > 1) v.plane_id = static_cast<std::int16_t>(v.plane_id | (1 << m.plane_idx));
  }
  return v;
}

Expected<int> VDeviceTable::add(VDevice v) {
  std::lock_guard lock(mutex_);
  const int n = count_.load(std::memory_order_relaxed);
  if (n == kMaxVDevices)
    return make_error(Errc::oversized, "no more virtual devices (" + std::to_string(kMaxVDevices) + " made)");
  entries_[static_cast<std::size_t>(n)] = std::make_unique<const VDevice>(std::move(v));
  count_.store(n + 1, std::memory_order_release);
  return first_ + n;
}

const VDevice* VDeviceTable::find(int index) const noexcept {
  const int i = index - first_;
  if (i < 0 || i >= count_.load(std::memory_order_acquire)) return nullptr;
  return entries_[static_cast<std::size_t>(i)].get();
}

}  // namespace nccl_ha::plugin
