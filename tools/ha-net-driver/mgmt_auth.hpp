// ha-net-driver: who may be the peer on the management connection (mgmt_wire.hpp's exchange).
// Both ranks hold the same token (--token or HA_NET_DRIVER_TOKEN; none: the empty one, and then
// anyone who speaks the protocol can be rank 1). Rank 0 admits its peer here (admit_peer); rank 1 proves
// itself as it connects (Mgmt::connect_peer, mgmt.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "common.hpp"

namespace hnd {


// A connection must prove the token within this long after it was accepted (at most the deadline).
constexpr double kAuthStepS = 5;
// Connections rank 0 checks at once; when one more comes, the oldest is dropped.
constexpr std::size_t kMaxPendingPeers = 16;

// Rank 0: accepts connections on `listen_fd` until one proves the token, answers it with rank 0's
// proof and returns it (the caller owns it). Every other connection is closed: one that sends
// anything but a proof, a wrong proof (told "authentication failed" and nothing more), or nothing
// within kAuthStepS. They are checked side by side (kMaxPendingPeers at most, the oldest dropped
// for a new one), so strangers do not delay the real peer.
// Throws DriverError(timeout) at the deadline, counting what was dropped.
int admit_peer(int listen_fd, const std::string& token, const Deadline& d, double timeout_s, unsigned port);

}  // namespace hnd
