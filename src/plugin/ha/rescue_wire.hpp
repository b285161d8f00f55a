// The rescue service's frames (rescue.hpp), as pure functions: sealed with the connection's rescue
// key, which both ends derived from the handle's secret and the handshake's nonces
// (handshake_auth.hpp) and which never crosses the wire.
//
// request (to the service), frame type kRescueMsg, header token = the receiving comm's rescue id:
//   offset size
//        0   64 ReprotectMsg (its own checksum inside)
//       64   32 mac(key, "rescue request", id, the 64 bytes)
// answer (from the service), on the same connection, header token = the same id:
//        0    n the body: a ReprotectMsg (kRescueMsg), or a reason (net::MsgType::error)
//      n+0   32 mac(key, "rescue answer", id, the request's MAC, type, the body)
// The answer is bound to the request it answers; neither can be replayed as the other.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/comm.hpp"
#include "nccl_ha/net/auth.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::plugin {

constexpr std::uint16_t kRescueMsg = 0x240;  // frame type of requests and answers
constexpr std::size_t kRescueRequestSize = sizeof(ReprotectMsg) + net::kMacSize;
constexpr std::size_t kRescueMaxAnswer = 1024 + net::kMacSize;  // a reason is cut at 1024 bytes

struct RescueRequest {
  ReprotectMsg msg;  // checksum verified
  net::Mac tag{};    // the request's MAC (binds the answer to it)
};

std::vector<std::uint8_t> seal_rescue_request(const net::Key& key, std::uint64_t id, const ReprotectMsg& m);
// The request, if `payload` is one sealed with `key` for `id`, its record whole (read_record).
std::optional<RescueRequest> open_rescue_request(const net::Key& key, std::uint64_t id, std::span<const std::uint8_t> payload);

std::vector<std::uint8_t> seal_rescue_answer(const net::Key& key, std::uint64_t id, const net::Mac& request_tag,
                                             std::uint16_t type, std::span<const std::uint8_t> body);
// The body, if `payload` answers the request `request_tag` under `key` with a frame of `type`.
std::optional<std::vector<std::uint8_t>> open_rescue_answer(const net::Key& key, std::uint64_t id, const net::Mac& request_tag,
                                                            std::uint16_t type, std::span<const std::uint8_t> payload);

// The service's read of one connection: a request frame within `deadline`, for an id `key_for`
// knows (the key of that connection; nullopt: none here), sealed with that key. Any error means:
// close without a word (admission.hpp).
struct ProvenRequest {
  std::uint64_t id = 0;
  RescueRequest request;
  std::vector<std::uint8_t> raw;  // the ReprotectMsg's 64 bytes as sent
};
using RescueKeyLookup = std::function<std::optional<net::Key>(std::uint64_t id)>;
boost::asio::awaitable<Expected<ProvenRequest>> read_rescue_request(boost::asio::ip::tcp::socket& sock,
                                                                    const RescueKeyLookup& key_for,
                                                                    std::chrono::milliseconds deadline);

}  // namespace nccl_ha::plugin
