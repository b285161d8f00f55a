// GID index selection for RoCE and IB ports.
//
// Ethernet (RoCE) ports, in order of preference:
//   1. RoCE v2 with an IPv4-mapped address (::ffff:a.b.c.d) - routable, what NCCL prefers
//   2. RoCE v2 with a global (non-link-local) IPv6 address
//   3. RoCE v2, any
//   4. RoCE v1 (non-zero GID)
// InfiniBand ports: index 0. HA_NCCL_IB_GID_INDEX (or NCCL_IB_GID_INDEX) overrides; an override
// naming an entry that does not exist is an error.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::net {

enum class GidType : std::uint8_t { ib, roce_v1, roce_v2 };

struct GidEntry {
  std::uint32_t index = 0;
  ibv_gid gid{};
  GidType type = GidType::ib;
};

bool is_ipv4_mapped(const ibv_gid& gid) noexcept;
bool is_link_local(const ibv_gid& gid) noexcept;
bool is_zero(const ibv_gid& gid) noexcept;
std::string gid_to_string(const ibv_gid& gid);

Expected<std::uint32_t> select_gid_index(std::span<const GidEntry> table, int link_layer,
                                         std::optional<std::int64_t> override_index);

// Reads the port's valid GID entries (ibv_query_gid_table).
Expected<std::vector<GidEntry>> query_gid_table(ibv_context* ctx, std::uint32_t port);

}  // namespace nccl_ha::net
