// ha-net-driver --fault flood: connectors that are not a plugin. Raw TCP connections to the
// handshake address of a listen handle, each doing one wrong thing (garbage, another token, half
// a frame, a hello without the secret's proof, nothing at all ...), to be dropped by the listener
// without a byte sent back (they never prove the handle's secret; src/plugin/setup/handshake_auth.hpp).
//
// They assume nccl-ha's handle layout (src/plugin/setup/handle.hpp: u16 family at 12, u16 port at 14,
// the address at 16, u64 token at 32) and wire format (src/net/include/nccl_ha/net/wire.hpp: a
// 24-byte header "NCHA", version 1, type, length, flags 0, token; src/plugin/core/conn_msg.hpp: the
// connection request: its head and the candidate list), as the bad-handle scenario assumes the
// handle's.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hnd {

// Where a handle's listener accepts handshakes, and its token.
struct HandshakeTarget {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::uint64_t token = 0;
  std::string text;  // "10.30.0.1:40123"
};
// Throws DriverError(plugin) for a handle that is not nccl-ha's.
HandshakeTarget handshake_target(const std::string& handle);

enum class BadKind {
  garbage,        // an HTTP request: bad magic
  wrong_token,    // a whole connection request under another token
  silent_close,   // connects and closes at once
  half_frame,     // 12 bytes of a valid header, then closes
  wrong_type,     // a valid frame of the wrong type (conn_ready first)
  oversize,       // a header announcing 1 MiB of payload
  short_request,  // a connection request of 50 bytes
  bad_sl,         // a well-formed connection request (wire v5, no hello first) with service level 16
  bad_proof,      // a hello of the right size and id whose proof is random bytes
  silent_hold,    // connects and sends nothing, holding the connection open
};
constexpr BadKind kBadRound[] = {BadKind::garbage,    BadKind::wrong_token, BadKind::silent_close,
                                 BadKind::half_frame, BadKind::wrong_type,  BadKind::oversize,
                                 BadKind::short_request, BadKind::bad_sl,   BadKind::bad_proof};
const char* bad_kind_name(BadKind k);

// One bad connector: connects, does its wrong thing, shuts its side down and reads until the
// listener closes (bounded by timeout_s); silent_hold returns the open socket instead.
struct BadOutcome {
  int fd = -1;               // silent_hold: the open socket
  std::size_t bytes_back = 0;  // what the listener sent it
};
// Throws DriverError(peer) when the listener cannot be reached.
BadOutcome bad_connect(const HandshakeTarget& t, BadKind kind, double timeout_s);

// Waits until the listener has closed every socket in `fds` (EOF or reset), polling them all;
// returns, per socket, the milliseconds from since_ns[i] (steady clock, e.g. its connect) to the
// moment its close was seen, or -1 for one still open after timeout_s; adds what the listener sent
// them to `bytes_back`. Closes them all.
std::vector<double> wait_closed_by_peer(const std::vector<int>& fds, const std::vector<std::int64_t>& since_ns,
                                        double timeout_s, std::size_t& bytes_back);

}  // namespace hnd
