// The connection handle listen() fills and NCCL ships to the peer's connect() (<= 128 bytes).
//
//   offset size field
//        0    4 magic    kHandleMagic
//        4    2 version  kHandleVersion
//        6    2 length   sizeof(Handle): a shorter or foreign layout is rejected
//        8    4 flags    bit 0: the listener offers a standby path (issue #4)
//       12    2 family   AF_INET / AF_INET6
//       14    2 port     listener TCP port, host order
//       16   16 addr     listener address (IPv4 in the first 4 bytes)
//       32    8 id       random, not 0: names the listener in the frames of its handshakes (not a
//                        secret: it crosses the wire in every frame header)
//       40    8 stage    connector-local: id of the connect in progress (0 on the wire)
//       48    4 scope    IPv6 link-local only: the listener's interface index, which the connector
//                        uses as its own scope id (NCCL ships sockaddr_in6 whole, same rule); else 0
//       52   32 secret   random, not all zero: the key a connector proves it holds before the
//                        listener answers anything (handshake_auth.hpp); it never crosses our sockets
//       84    1 members  the listener's ports: 1, or a fused device's members (2..8): the
//                        connector makes that many connections, member i its request's `member`
//       85   43 -        zero
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <span>
#include <string>

#include "nccl_ha/net/auth.hpp"
#include "nccl_ha/reactor/expected.hpp"
#include "nccl_net_abi.h"
#include "runtime/vdevice.hpp"

namespace nccl_ha::plugin {

constexpr std::uint32_t kHandleMagic = 0x31484148u;  // "HAH1"
// 2: control records with checksums, control writes with immediate data (issue #9); a peer
// speaking 1 is refused at connect, never half understood.
// 3: the connection request carries the connection's traffic class and service level (#11).
// 4: request and reply carry each side's candidate ports (rail, island, NIC, load: topology.hpp),
// the listener chooses the standby pair both ends reach and offers it in the reply; conn_ready
// carries the connector's standby (conn_msg.hpp, #12).
// 6: the handle carries the listener's secret; a connector proves it holds it (HMAC-SHA256 over
// fresh nonces) in its first frame, every later frame of the handshake carries a MAC under a key
// derived from it, and the rescue service's messages one under the connection's own key (#31).
// 7: data immediates carry kArImm (adaptive-routing mode's size notice) and the ControlBlock the
// sizes it announces (rdma_records.hpp, #32): a v6 receiver would misread a v7 sender's notices.
// 8: every endpoint carries its QP's ECE (net/wire.hpp: 44 bytes), and a connector's standby_up
// its endpoint when both standby QPs offer ECE (handshake_common.hpp, #32).
// 9: an endpoint names up to 8 QPs and whether its side splits data across them (72 bytes;
// NCCL_IB_QPS_PER_CONNECTION, #32): a v8 peer would refuse every message that carries one.
// 10: the handle names the listener's ports (a fused device's members), the connection request
// which of them it is for (ConnRequest::member, #33).
constexpr std::uint16_t kHandleVersion = 10;

struct Handle {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t length;
  std::uint32_t flags;
  std::uint16_t family;
  std::uint16_t port;
  std::uint8_t addr[16];
  std::uint64_t token;
  std::uint64_t stage;
  std::uint32_t scope_id;
  std::uint8_t secret[32];
  std::uint8_t members;
  std::uint8_t zero[43];
};
static_assert(sizeof(Handle) == NCCL_NET_HANDLE_MAXSIZE);

// The handle of a listener at `listener` (its address and port; an IPv6 address's scope id goes
// into scope_id) with `token` and `flags` (kOfferStandby) on `members` ports, stage 0. Pure.
Handle make_handle(const boost::asio::ip::tcp::endpoint& listener, std::uint64_t token, const net::Key& secret,
                   std::uint32_t flags, int members = 1);
// The handle's secret.
net::Key handle_secret(const Handle& h);
// Checks magic, version, length, family, port, token (not 0; its value is checked by the
// listener), the secret (not all zero), members (1..kMaxVDeviceMembers), the zero bytes, and the
// address: not unspecified (0.0.0.0 / :: would reach this host), not multicast or broadcast, and a
// link-local IPv6 address only with its scope id. Pure.
Status validate_handle(const Handle& h);
// The same on the bytes NCCL hands to connect(): NCCL_NET_HANDLE_MAXSIZE of them, any alignment.
Expected<Handle> decode_handle(std::span<const std::uint8_t> bytes);
// The listener's address of a validated handle.
boost::asio::ip::tcp::endpoint handle_endpoint(const Handle& h);
std::string handle_address(const Handle& h);  // "a.b.c.d:port", "[fd00::1]:port", "[fe80::1%eth0]:port"

// Handshake message types (nccl-ha wire frames, net/wire.hpp).
enum class HandshakeMsg : std::uint16_t {
  hello = 0x206,        // connector -> listener, first: its nonce and proof (handshake_auth.hpp)
  hello_reply = 0x207,  // listener -> connector: its nonce and proof
  conn_request = 0x200,  // connector -> listener: ConnRequest (conn_msg.hpp)
  conn_reply = 0x201,    // listener -> connector: ConnReply, with the standby offer
  conn_ready = 0x202,  // payload: ConnReady (the connector's standby, conn_msg.hpp)
  conn_ack = 0x203,  // the listener queued the comm for accept(): only now may connect() succeed
  standby_up = 0x204,      // phase two: this side's standby QP is RTS
  standby_failed = 0x205,  // phase two: it is not (payload: why)
};

}  // namespace nccl_ha::plugin
