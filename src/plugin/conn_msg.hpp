// The connection request and reply of the plugin's handshake (connect.cpp), as pure functions:
// what the bytes mean, and what a listener or connector accepts from a peer it cannot trust.
//
// conn_request (connector -> listener), kRequestSize = 102 bytes, little-endian:
//   offset size field
//        0   32 primary endpoint (net::encode_endpoint)
//       32    4 flags: bit 0 (kOfferStandby) = a standby endpoint follows; the other bits are 0
//       36   32 standby endpoint; all zero without kOfferStandby
//       68    8 FIFO address (the connector's clear-to-send FIFO), not 0
//       76    8 FIFO rkey per device slot (u32 x kConnSlots; 0 for a slot without device)
//       84    8 control block address, not 0
//       92    8 control block rkey per device slot
//      100    1 traffic class (0..255): the connector decides the connection's QoS
//      101    1 service level (0..15)
// conn_reply (listener -> connector), kReplySize = 84 bytes: primary endpoint, flags, standby
// endpoint (as above), control block address (not 0) and rkeys.
//
// decode_* never trust the peer: a wrong size, a malformed endpoint, unknown flag bits, standby
// bytes without the flag, a zero address or a service level above 15 is an Error naming the
// field. What decodes re-encodes to the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "config.hpp"
#include "nccl_ha/net/wire.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::plugin {

constexpr int kConnSlots = 2;                 // device slots of a comm (comm.hpp kSlots)
constexpr std::uint32_t kOfferStandby = 1;    // flag bit in requests, replies and handles
constexpr std::size_t kRemoteKeysSize = 8 + 4 * kConnSlots;
constexpr std::size_t kRequestSize = 2 * net::kEndpointSize + 4 + 2 * kRemoteKeysSize + 2;
constexpr std::size_t kReplySize = 2 * net::kEndpointSize + 4 + kRemoteKeysSize;
constexpr std::uint8_t kMaxServiceLevel = 15;

// A remote buffer: its address and its rkey on every device slot.
struct RemoteKeys {
  std::uint64_t addr = 0;
  std::uint32_t rkey[kConnSlots] = {};
  friend bool operator==(const RemoteKeys&, const RemoteKeys&) = default;
};

struct ConnRequest {
  net::Endpoint primary{};
  std::optional<net::Endpoint> standby;  // offered by the connector
  RemoteKeys fifo;
  RemoteKeys ctrl;
  Qos qos;
};

struct ConnReply {
  net::Endpoint primary{};
  std::optional<net::Endpoint> standby;  // offered by the listener
  RemoteKeys ctrl;
};

std::vector<std::uint8_t> encode_request(const ConnRequest& r);
Expected<ConnRequest> decode_request(std::span<const std::uint8_t> payload);
std::vector<std::uint8_t> encode_reply(const ConnReply& r);
Expected<ConnReply> decode_reply(std::span<const std::uint8_t> payload);

// Field by field (an Endpoint's GID as bytes).
bool same_endpoint(const net::Endpoint& a, const net::Endpoint& b);
bool operator==(const ConnRequest& a, const ConnRequest& b);
bool operator==(const ConnReply& a, const ConnReply& b);

}  // namespace nccl_ha::plugin
