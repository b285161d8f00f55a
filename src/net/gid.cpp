#include "nccl_ha/net/gid.hpp"

#include <arpa/inet.h>

#include <array>
#include <cerrno>

namespace nccl_ha::net {

bool is_ipv4_mapped(const ibv_gid& gid) noexcept {
  for (int i = 0; i < 10; ++i)
    if (gid.raw[i] != 0) return false;
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

bool is_link_local(const ibv_gid& gid) noexcept { return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80; }

bool is_zero(const ibv_gid& gid) noexcept {
  for (auto b : gid.raw)
    if (b) return false;
  return true;
}

std::string gid_to_string(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, buf, sizeof buf);
  return buf;
}

Expected<std::uint32_t> select_gid_index(std::span<const GidEntry> table, int link_layer,
                                         std::optional<std::int64_t> override_index) {
  if (override_index) {
    const bool representable = *override_index >= 0 && *override_index <= 0xffffffffll;  // no wrap to a valid index
    for (const auto& e : table)
      if (representable && e.index == static_cast<std::uint32_t>(*override_index) && !is_zero(e.gid)) return e.index;
    return make_error(Errc::not_found, "GID index " + std::to_string(*override_index) + " (from the environment) is not a valid entry of this port");
  }
  if (link_layer != IBV_LINK_LAYER_ETHERNET) return std::uint32_t{0};
  // Rank every entry; lowest rank wins, ties go to the lowest index.
  auto rank = [](const GidEntry& e) -> int {
    if (is_zero(e.gid)) return 99;
    if (e.type == GidType::roce_v2) {
      if (is_ipv4_mapped(e.gid)) return 0;
      if (!is_link_local(e.gid)) return 1;
      return 2;
    }
    if (e.type == GidType::roce_v1) return 3;
    return 98;
  };
  const GidEntry* best = nullptr;
  for (const auto& e : table)
    if (rank(e) < 99 && (!best || rank(e) < rank(*best) || (rank(e) == rank(*best) && e.index < best->index))) best = &e;
  if (!best) return make_error(Errc::not_found, "the port has no usable RoCE GID (no IP address on its netdev?)");
  return best->index;
}

Expected<std::vector<GidEntry>> query_gid_table(ibv_context* ctx, std::uint32_t port) {
  std::array<ibv_gid_entry, 256> raw{};
  ssize_t n = ibv_query_gid_table(ctx, raw.data(), raw.size(), 0);
  if (n < 0) return errno_error(Errc::verbs, "ibv_query_gid_table", static_cast<int>(-n));
  std::vector<GidEntry> out;
  for (ssize_t i = 0; i < n; ++i) {
    if (raw[static_cast<std::size_t>(i)].port_num != port) continue;
    const auto& r = raw[static_cast<std::size_t>(i)];
    GidEntry e;
    e.index = r.gid_index;
    e.gid = r.gid;
    e.type = r.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidType::roce_v2
             : r.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::roce_v1
                                                  : GidType::ib;
    out.push_back(e);
  }
  return out;
}

}  // namespace nccl_ha::net
