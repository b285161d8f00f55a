// Device/port selection with NCCL_IB_HCA's syntax:
//   "mlx5"            every device whose name starts with mlx5, all ports
//   "mlx5_0:1,mlx5_1" device mlx5_0 port 1, and every port of devices starting with mlx5_1
//   "=mlx5_0"         exact name match only (applies to the whole list)
//   "^mlx5_3"         everything except matching entries ("^=" for exact exclusion)
//   "mlx5_0:1:3:0"    NCCL 2.30's full entry dev:port:rail:plane: port 1 of mlx5_0, rail 3, plane 0;
//                     an empty field is unset ("mlx5_0::2": every port, rail 2; "mlx5_0:::1": plane 1)
// The rail and plane of the entry that selects a port become its railId / planeId (NCCL's rule:
// only an including list names them; with '^' the selected ports matched no entry).
// Read from HA_NCCL_IB_HCA, falling back to NCCL_IB_HCA. An empty filter matches everything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nccl_ha/net/env.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::net {

class DeviceFilter {
 public:
  struct Entry {
    std::string name;
    std::optional<std::uint32_t> port;   // 1..255
    std::optional<std::int16_t> rail;    // 0..kMaxRail
    std::optional<std::int16_t> plane;   // 0..kMaxPlane
  };
  // railId / planeId are int16 in ncclNetProperties_v12; NCCL's IB transport refuses a plane with
  // bit 14 set (it marks its own fused devices' planes).
  static constexpr int kMaxRail = 32767;
  static constexpr int kMaxPlane = 16383;

  DeviceFilter() = default;  // matches everything

  // Parses the syntax above; malformed entries (empty name, bad port) are an error.
  static Expected<DeviceFilter> parse(const std::string& spec);

  // From the environment; a malformed value is WARNed about and the match-all filter used.
  static DeviceFilter from_env();
  static DeviceFilter from_lookup(const EnvLookup& env);

  bool matches(const std::string& device, std::uint32_t port) const;
  // The first entry naming this port when the list includes (no '^'), else nullptr (no list, an
  // excluding list, or no entry matches).
  const Entry* selecting_entry(const std::string& device, std::uint32_t port) const;

  bool exclude() const noexcept { return exclude_; }
  bool exact() const noexcept { return exact_; }
  const std::vector<Entry>& entries() const noexcept { return entries_; }

 private:
  static Expected<Entry> parse_entry(const std::string& item);
  const Entry* first_match(const std::string& device, std::uint32_t port) const;

  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

}  // namespace nccl_ha::net
