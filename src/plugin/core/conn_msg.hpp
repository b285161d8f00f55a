// The messages of the plugin's handshake (handshake_common.hpp), as pure functions: what the bytes mean,
// and what a listener or connector accepts from a peer it cannot trust. Wire format v5
// (kHandleVersion 5): each side lists its candidate ports (topology.hpp) and the listener
// chooses the standby pair both ends can reach (rank_standby_pairs).
//
// All integers little-endian; "0" fields must be zero. Every message decodes only whole: its
// size is exactly what its counts say.
//
// conn_request (connector -> listener), kRequestHeadSize + n * kCandidateSize bytes:
//   offset size field
//        0   32 primary endpoint (net::encode_endpoint)
//       32    4 flags: bit 0 (kOfferStandby) = offer_standby; the other bits are 0
//       36    8 FIFO address (the connector's clear-to-send FIFO), not 0
//       44    4 FIFO rkey on the primary's device, not 0
//       48    4 0 (slot 1: the rkey on the standby's device travels in conn_ready)
//       52    8 control block address, not 0
//       60    4 control block rkey on the primary's device, not 0
//       64    4 0
//       68    1 traffic class (0..255): the connector decides the connection's QoS
//       69    1 service level (0..15)
//       70    1 n: candidate count, 1..kMaxCandidates
//       71    1 0
//       72 52*n candidates (below): the connector's ports
//  72+52n   12 rescue (below): the connector's
// conn_reply (listener -> connector), kReplyHeadSize + n * kCandidateSize bytes:
//        0   32 primary endpoint
//       32    4 flags: bit 0 (kOfferStandby) = a standby offer follows; bit 1 (kStartOnStandby, only
//                with bit 0) = the connection starts on the standby pair; the other bits are 0
//       36    8 control block address, not 0
//       44    4 control block rkey on the primary's device, not 0
//       48    4 0
//       52    1 standby pair.a: the connector's device       (52..91: the standby offer,
//       53    1 standby pair.b: the listener's device         all 40 bytes zero without
//       54    2 0                                              kOfferStandby)
//       56    4 standby control block rkey on pair.b's device, not 0
//       60   32 standby endpoint (the listener's QP on pair.b)
//       92    1 n: candidate count, 1..kMaxCandidates
//       93    3 0
//       96 52*n candidates: the listener's ports
//  96+52n   12 rescue: the listener's
// conn_ready (connector -> listener), kReadySize = 44 bytes:
//        0    4 flags: bit 0 (kOfferStandby) = the connector built its standby; bit 1
//                (kStartOnStandby, only with bit 0) = the connection starts on the standby pair
//                (the reply said so, or the connector could not connect its primary); the other bits are 0
//        4   32 standby endpoint (the connector's QP on pair.a)   (4..43: all zero
//       36    4 FIFO rkey on pair.a's device, not 0                 without the flag)
//       40    4 control block rkey on pair.a's device, not 0
// rescue, kRescueSize = 12 bytes: where the sender's process takes re-protection requests over TCP
// when no RDMA path of the connection is left (rescue.hpp), on the address its handshake socket has:
//        0    2 TCP port (0: no rescue service, HA off)
//        2    2 0
//        4    8 the sender's token for this connection (0 exactly when the port is 0)
// candidate, kCandidateSize = 52 bytes:
//        0    1 dev: the owner's NCCL device index
//        1    1 link layer: 1 (InfiniBand) or 2 (Ethernet)
//        2    1 flags: kCandUp | kCandPrimary | kCandPreferred; the other bits are 0
//        3    1 known: bit 0 = the rail is known, bit 1 = the island is; the other bits are 0
//        4    2 load
//        6    1 rail prefix length (0..128)
//        7    1 island prefix length (0..128)
//        8   16 rail address (network order; IPv4 as ::ffff:a.b.c.d; host bits zero)
//       24   16 island address (same rules)
//       40    4 nic (topo_hash)
//       44    4 pcie (topo_hash, 0 unknown)
//       48    4 numa (int32, -1 unknown, else 0..kMaxNumaNode)
//
// decode_* never trust the peer. An Error names the field for: a wrong size (Errc::truncated
// when short, Errc::bad_length when long), a malformed endpoint, unknown flag bits, bytes in a
// zero field or in an absent standby, a zero address or rkey, a service level above 15; and in
// the candidate lists: a count of 0 or above kMaxCandidates, a link layer other than 1 or 2, a
// prefix longer than 128, host bits set, an unknown prefix that is not all zero, a known island
// without a known rail or that does not contain the rail, a NUMA node below -1 or above
// kMaxNumaNode, a device listed twice, not exactly one kCandPrimary, a candidate both primary and
// preferred, more than one preferred, a primary endpoint whose link layer is not the primary
// candidate's. decode_reply also checks the offer against the reply's own list: pair.b is one of
// its candidates, kCandUp, of the standby endpoint's link layer. What it cannot see (pair.a is
// among the connector's ports, the pair is not the active one, the two ports reach each other)
// the connector checks with check_standby_offer(). What decodes re-encodes to the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "nccl_ha/net/wire.hpp"
#include "nccl_ha/reactor/expected.hpp"
#include "runtime/config.hpp"
#include "runtime/topology.hpp"
#include "runtime/vdevice.hpp"

namespace nccl_ha::plugin {

constexpr int kConnSlots = 2;                 // device slots of a comm (comm.hpp kSlots)
constexpr std::uint32_t kOfferStandby = 1;    // flag bit in requests, replies, conn_ready and handles
// Flag bit in replies and conn_ready: the connection's own pair is down, or its primary QP could
// not be connected: it starts on the standby pair (handshake_common.hpp start_on_standby).
constexpr std::uint32_t kStartOnStandby = 2;
constexpr std::size_t kRemoteKeysSize = 8 + 4 * kConnSlots;
constexpr std::size_t kCandidateSize = 52;
constexpr std::size_t kRescueSize = 12;
constexpr std::size_t kRequestHeadSize = net::kEndpointSize + 4 + 2 * kRemoteKeysSize + 4;
constexpr std::size_t kStandbyOfferSize = 8 + net::kEndpointSize;
constexpr std::size_t kReplyHeadSize = net::kEndpointSize + 4 + kRemoteKeysSize + kStandbyOfferSize + 4;
constexpr std::size_t kReadySize = 4 + net::kEndpointSize + 8;
constexpr std::uint8_t kMaxServiceLevel = 15;
constexpr std::int32_t kMaxNumaNode = 65535;
static_assert(kReplyHeadSize + kMaxCandidates * kCandidateSize + kRescueSize <= net::kMaxPayload);

// A remote buffer: its address and its rkey on every device slot.
struct RemoteKeys {
  std::uint64_t addr = 0;
  std::uint32_t rkey[kConnSlots] = {};
  friend bool operator==(const RemoteKeys&, const RemoteKeys&) = default;
};

// A side's rescue service for one connection (rescue.hpp): its TCP port (0: none) and token.
struct RescuePoint {
  std::uint16_t port = 0;
  std::uint64_t token = 0;
  friend bool operator==(const RescuePoint&, const RescuePoint&) = default;
};

struct ConnRequest {            // connector -> listener
  net::Endpoint primary{};
  bool offer_standby = false;   // the connector can build a standby (HA on, a standby port exists)
  RemoteKeys fifo;              // slot 0 keys only (rkey[1] is 0)
  RemoteKeys ctrl;              // slot 0 keys only
  Qos qos;
  std::vector<Candidate> candidates;  // the connector's ports (exactly one with kCandPrimary: its primary), <= kMaxCandidates
  RescuePoint rescue;                 // the connector's
  // Which of the listener's ports (its handle's `members`: a fused device) this connection is for.
  std::uint8_t member = 0;            // < kMaxVDeviceMembers
};

struct StandbyOffer {           // the listener's decision, in the reply
  PortPair pair;                // (connector device, listener device), each 0..255
  net::Endpoint endpoint{};     // the listener's standby QP on pair.b
  std::uint32_t ctrl_rkey = 0;  // the listener's control block on pair.b's device (not 0)
};

struct ConnReply {              // listener -> connector
  net::Endpoint primary{};
  std::optional<StandbyOffer> standby;
  bool start_on_standby = false;  // with a standby only: the connection starts there
  RemoteKeys ctrl;              // slot 0 key only
  std::vector<Candidate> candidates;  // the listener's ports (exactly one kCandPrimary)
  RescuePoint rescue;                 // the listener's
};

struct ConnReady {              // connector -> listener, after the reply
  std::optional<net::Endpoint> standby;  // the connector's standby QP on pair.a (none: it could not build it)
  bool start_on_standby = false;  // with a standby only: the connection starts there
  std::uint32_t fifo_rkey = 0;  // with a standby: the connector's FIFO and control block on pair.a's device (not 0)
  std::uint32_t ctrl_rkey = 0;
};

std::vector<std::uint8_t> encode_request(const ConnRequest& r);
Expected<ConnRequest> decode_request(std::span<const std::uint8_t> payload);
std::vector<std::uint8_t> encode_reply(const ConnReply& r);
Expected<ConnReply> decode_reply(std::span<const std::uint8_t> payload);
std::vector<std::uint8_t> encode_ready(const ConnReady& r);
Expected<ConnReady> decode_ready(std::span<const std::uint8_t> payload);

// The connector's check of a decoded reply against the request it sent: a standby offer only
// when it offered one, pair.a one of its kCandUp candidates, the pair not the active one
// (both primaries), and the two ports reachable(). Errc::invalid_argument naming what is wrong.
Status check_standby_offer(const ConnRequest& sent, const ConnReply& reply);

// Field by field (an Endpoint's GID as bytes).
bool same_endpoint(const net::Endpoint& a, const net::Endpoint& b);
bool operator==(const ConnRequest& a, const ConnRequest& b);
bool operator==(const StandbyOffer& a, const StandbyOffer& b);
bool operator==(const ConnReply& a, const ConnReply& b);
bool operator==(const ConnReady& a, const ConnReady& b);

}  // namespace nccl_ha::plugin
