#pragma once
// nccl-ha's listen handle as its plugin writes it (the layout table in src/plugin/setup/handle.hpp),
// for the error-path scenarios that corrupt it (fault.cpp: bad-handle, bad-token) or aim raw
// connections at its listener (flood.cpp). The driver does not link the plugin: these offsets
// are the one copy here, checked against the plugin by those scenarios in the VM tests.
#include <cstddef>

namespace hnd::handle_layout {

inline constexpr std::size_t kMagicOff = 0;    // u32 magic
inline constexpr std::size_t kVersionOff = 4;  // u16 version
inline constexpr std::size_t kLengthOff = 6;   // u16 length
inline constexpr std::size_t kFamilyOff = 12;  // u16 AF_INET / AF_INET6
inline constexpr std::size_t kPortOff = 14;    // u16 listener TCP port, host order
inline constexpr std::size_t kAddrOff = 16;    // 16 bytes: listener address (IPv4 in the first 4)
inline constexpr std::size_t kTokenOff = 32;   // u64 token the listener checks
inline constexpr std::size_t kScopeOff = 48;   // u32 IPv6 link-local scope (interface index)

}  // namespace hnd::handle_layout
