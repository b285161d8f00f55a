// ha-ping's control protocol: nccl-ha wire frames (net/wire.hpp) with application types.
//
//   client                              server
//   Hello(rails, sizes, iters, duration, QoS ...) ->
//                                    <- HelloAck(rails)
//   for each rail i:
//   RailSetup(status, endpoint, mr) <-> RailSetup(status, endpoint, mr)
//   for each size: latency phase, then bandwidth phase:
//                                    <- PhaseReady        (server's receives are posted)
//   ... RDMA traffic ...
//   PhaseDone(ok, reason)          <-> PhaseDone(ok, reason)
//   Bye                             ->
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nccl_ha/net/wire.hpp"

namespace ha_ping {

enum class Msg : std::uint16_t {
  hello = nccl_ha::net::kAppTypeBase,
  hello_ack,
  rail_setup,
  phase_ready,
  phase_done,
  bye,
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
};

struct HelloAck {
  std::vector<std::string> rails;  // the server's rail names, in order
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

std::vector<std::uint8_t> encode(const Hello& m);
std::vector<std::uint8_t> encode(const HelloAck& m);
std::vector<std::uint8_t> encode(const RailSetup& m);
std::vector<std::uint8_t> encode(const PhaseDone& m);

nccl_ha::Expected<Hello> decode_hello(std::span<const std::uint8_t> p);
nccl_ha::Expected<HelloAck> decode_hello_ack(std::span<const std::uint8_t> p);
nccl_ha::Expected<RailSetup> decode_rail_setup(std::span<const std::uint8_t> p);
nccl_ha::Expected<PhaseDone> decode_phase_done(std::span<const std::uint8_t> p);

}  // namespace ha_ping
