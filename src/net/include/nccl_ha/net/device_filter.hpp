// Device/port selection with NCCL_IB_HCA's syntax:
//   "mlx5"            every device whose name starts with mlx5, all ports
//   "mlx5_0:1,mlx5_1" device mlx5_0 port 1, and every port of devices starting with mlx5_1
//   "=mlx5_0"         exact name match only (applies to the whole list)
//   "^mlx5_3"         everything except matching entries ("^=" for exact exclusion)
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
    std::optional<std::uint32_t> port;
  };

  DeviceFilter() = default;  // matches everything

  // Parses the syntax above; malformed entries (empty name, bad port) are an error.
  static Expected<DeviceFilter> parse(const std::string& spec);

  // From the environment; a malformed value is WARNed about and the match-all filter used.
  static DeviceFilter from_env();
  static DeviceFilter from_lookup(const EnvLookup& env);

  bool matches(const std::string& device, std::uint32_t port) const;

  bool exclude() const noexcept { return exclude_; }
  bool exact() const noexcept { return exact_; }
  const std::vector<Entry>& entries() const noexcept { return entries_; }

 private:
  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

}  // namespace nccl_ha::net
