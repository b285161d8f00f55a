// NCCL's fused NICs (makeVDevice, API v9+): one virtual device over several ports, merged the way
// NCCL's own IB transport merges them, so that NCCL's topology sees the same device it would see
// with net_ib: its name the members' names joined by '+', its speed their sum, a rail only when
// every member has the same one, a virtual plane (the member planes' bits), the rest taken from
// the first member. Device numbers 0..n-1 are the ports themselves; each virtual device gets the
// next number after them (and after the virtual devices made before it).
//
// merge_ports is pure; VDeviceTable is the process's list, read without a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::plugin {

// NCCL_NET_MAX_DEVS_PER_NIC of the newest API (v12); v9-v11 allow 4 (the table's vProps says).
constexpr int kMaxVDeviceMembers = 8;
// Virtual devices one process may make (net_ib: MAX_IB_VDEVS, 256, its single ports included).
constexpr int kMaxVDevices = 256;
// net_ib's NCCL_IB_PLANE_VIRT_BIT: set in a fused device's planeId, so that it never equals a
// physical plane; the members' plane indices are the bits below it.
constexpr std::int16_t kPlaneVirtBit = 1 << 14;
constexpr int kMaxPlaneIndex = 14;  // plane indices 0..13 (0: the undefined plane)

// What merging needs to know of one port (its getProperties facts).
struct MemberFacts {
  std::string name;           // Device::name ("mlx5_0", "rxe1")
  int speed = 0;              // Mbps
  int link_layer = 0;         // IBV_LINK_LAYER_*: only ports of one link layer fuse
  std::int16_t rail_id = -1;  // NCCL_NET_ID_UNDEF: -1
  std::int16_t plane_id = -1;
  int plane_idx = 0;          // plane_indices(): the plane's bit in a fused device's planeId
};

// A virtual device: its member ports (NCCL device numbers, in NCCL's order) and what
// getProperties reports for it besides what the first member gives.
struct VDevice {
  std::array<int, kMaxVDeviceMembers> members{};
  int count = 0;
  std::string name;  // "mlx5_0+mlx5_1"
  int speed = 0;     // the members' speeds summed
  std::int16_t rail_id = -1;
  std::int16_t plane_id = -1;
  std::span<const int> member_span() const noexcept { return {members.data(), static_cast<std::size_t>(count)}; }
};

// net_ib's plane index of each port, in device order: the undefined plane is index 0, each other
// plane id the next index at its first appearance. A plane id with the virtual bit, or more than
// kMaxPlaneIndex - 1 distinct planes: an error naming it (NCCL refuses both too).
Expected<std::vector<int>> plane_indices(std::span<const std::int16_t> planes);

// The virtual device over ports `want` (NCCL device numbers into `ports`), at most `max_members`
// of them (the API version's NCCL_NET_MAX_DEVS_PER_NIC). Refused, with a message that names the
// reason: no member, too many, a number that is no port, a port named twice, ports of different
// link layers (net_ib: "select NICs of only one link type"). One member: that port as it is.
Expected<VDevice> merge_ports(std::span<const MemberFacts> ports, std::span<const int> want, int max_members);

// The virtual devices made so far, numbered from `first` (the number of ports). add() runs under
// a mutex (makeVDevice is rare); find() is lock-free: an entry never changes once published.
class VDeviceTable {
 public:
  explicit VDeviceTable(int first) : first_(first) {}
  // Its device number; an error once kMaxVDevices exist.
  Expected<int> add(VDevice v);
  // The virtual device numbered `index`, or null (a port's number, or none made).
  const VDevice* find(int index) const noexcept;
  int first() const noexcept { return first_; }
  int size() const noexcept { return count_.load(std::memory_order_acquire); }

 private:
  int first_;
  std::mutex mutex_;
  std::array<std::unique_ptr<const VDevice>, kMaxVDevices> entries_;
  std::atomic<int> count_{0};  // entries_[0, count_) are published (release / acquire)
};

}  // namespace nccl_ha::plugin
