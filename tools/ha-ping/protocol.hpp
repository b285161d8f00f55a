// ha-ping's control protocol: nccl-ha wire frames (net/wire.hpp) with application types. Every
// frame's header token is kFrameTag, a constant naming the protocol (no secret).
//
//   client                              server
//                                    <- Challenge(version, server nonce)
//   Hello(rails, sizes, iters, duration, QoS ..., client nonce, proof) ->
//                                    <- HelloAck(rails, granted timeout, proof)
//                                       or an error frame: "authentication failed", or the
//                                       request refused (a size above the server's --max-size)
//   for each rail i:
//   RailSetup(status, endpoint, mr) <-> RailSetup(status, endpoint, mr)
//   for each size: latency phase, then bandwidth phase:
//                                    <- PhaseReady        (server's receives are posted)
//   ... RDMA traffic ...
//   PhaseDone(ok, reason)          <-> PhaseDone(ok, reason)
//   Bye                             ->
//
// The proofs (auth.hpp): HMAC-SHA256 keyed by the shared token over both nonces and the message's
// bytes before the proof, which ends the payload. The server checks the client's before it answers
// anything but "authentication failed"; the client checks the server's before it goes on.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nccl_ha/net/wire.hpp"

namespace ha_ping {

constexpr std::uint64_t kFrameTag = 0x68612d70696e6721ull;  // "ha-ping!"
// 1: no challenge, the Hello came first; 2: rail setups carried 32-byte endpoints (no ECE field);
// 3: 44-byte endpoints (no QP count, one QP each)
constexpr std::uint16_t kProtocolVersion = 4;
constexpr std::size_t kNonceSize = 32;
constexpr std::size_t kProofSize = 32;
using Nonce = std::array<std::uint8_t, kNonceSize>;
using Proof = std::array<std::uint8_t, kProofSize>;
// The protocol's bounds, whatever a server allows: what a Hello may ask for.
constexpr std::uint64_t kMaxMessageSize = 1ull << 30;
constexpr std::uint32_t kMaxIters = 1000000;
constexpr std::uint32_t kMaxDurationMs = 3600 * 1000;

enum class Msg : std::uint16_t {
  hello = nccl_ha::net::kAppTypeBase,
  hello_ack,
  rail_setup,
  phase_ready,
  phase_done,
  bye,
  challenge,
};

struct Challenge {
  std::uint16_t version = kProtocolVersion;
  Nonce nonce{};
};

struct Hello {
  std::vector<std::string> rails;  // the client's rail names, in order
  std::vector<std::uint64_t> sizes;
  std::uint32_t iters = 0;
  std::uint32_t bw_iters = 0;
  std::uint32_t window = 0;
  std::uint32_t timeout_ms = 0;
  std::uint32_t duration_ms = 0;  // bandwidth phase length per size (0: bw_iters writes)
  std::uint8_t tclass = 0;        // the client's QoS, used by a server without its own
  std::uint8_t sl = 0;
  Nonce nonce{};                  // the client's
  Proof proof{};                  // over the challenge's nonce, ours and every byte before it
};

struct HelloAck {
  std::vector<std::string> rails;  // the server's rail names, in order
  std::uint32_t timeout_ms = 0;    // the session's timeout: the client's, capped at the server's
  Proof proof{};                   // over both nonces and every byte before it
};

enum class RailStatus : std::uint8_t { ok = 0, port_down = 1, setup_failed = 2, missing = 3 };

struct RailSetup {
  RailStatus status = RailStatus::ok;
  std::string reason;
  nccl_ha::net::Endpoint endpoint;
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t length = 0;
};

struct PhaseDone {
  bool ok = true;
  bool port_down = false;  // the sender saw its own port go down
  std::string reason;
};

std::vector<std::uint8_t> encode(const Challenge& m);
std::vector<std::uint8_t> encode(const Hello& m);
std::vector<std::uint8_t> encode(const HelloAck& m);
std::vector<std::uint8_t> encode(const RailSetup& m);
std::vector<std::uint8_t> encode(const PhaseDone& m);

// Decoding checks the shape and the protocol's bounds (kMax*), not the proofs, nor a server's limits.
nccl_ha::Expected<Challenge> decode_challenge(std::span<const std::uint8_t> p);
nccl_ha::Expected<Hello> decode_hello(std::span<const std::uint8_t> p);
nccl_ha::Expected<HelloAck> decode_hello_ack(std::span<const std::uint8_t> p);
nccl_ha::Expected<RailSetup> decode_rail_setup(std::span<const std::uint8_t> p);
nccl_ha::Expected<PhaseDone> decode_phase_done(std::span<const std::uint8_t> p);

// The bytes a Hello's or HelloAck's proof covers: its payload without the proof at the end
// (empty when the payload is shorter than a proof).
std::span<const std::uint8_t> before_proof(std::span<const std::uint8_t> payload) noexcept;

}  // namespace ha_ping
