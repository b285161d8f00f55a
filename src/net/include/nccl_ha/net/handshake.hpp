// Frame I/O over TCP as coroutines on the reactor, each bounded by a timeout.
//
// Any failure (timeout, EOF, a malformed frame) is returned as an Error and logged at the call
// site by the caller; callers drop the connection on error. Progress-thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <span>

#include "nccl_ha/net/wire.hpp"

namespace nccl_ha::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Millis = std::chrono::milliseconds;

asio::awaitable<Status> write_frame(tcp::socket& socket, std::uint16_t type, std::uint64_t token,
                                    std::span<const std::uint8_t> payload, Millis timeout);

// Writes bytes already encoded (a whole frame), bounded by `timeout`.
asio::awaitable<Status> write_bytes(tcp::socket& socket, std::span<const std::uint8_t> bytes, Millis timeout);

asio::awaitable<Expected<Frame>> read_frame(tcp::socket& socket, std::uint64_t expected_token, Millis timeout,
                                            std::size_t max_payload = kMaxPayload);

// A stranger's first frame, of at most `max_payload` bytes, within `deadline`; when the deadline
// fires with a whole frame of that size waiting in the socket's buffer (the reading process was
// busy past the deadline, the sender was not late), it is still read: nothing is waited for
// beyond the deadline.
asio::awaitable<Expected<Frame>> read_first_frame(tcp::socket& socket, std::uint64_t expected_token, Millis deadline,
                                                  std::size_t max_payload);

// Reads a frame of the given type; an error frame from the peer becomes Errc::peer_error with
// the peer's reason, any other type Errc::bad_type.
asio::awaitable<Expected<Frame>> read_frame_of(tcp::socket& socket, std::uint16_t type, std::uint64_t expected_token,
                                               Millis timeout, std::size_t max_payload = kMaxPayload);

// Connects, retrying refused/unreachable attempts every `retry_every` until `timeout` has
// passed (a peer that starts later is fine; a peer that never comes is a timeout error).
asio::awaitable<Expected<tcp::socket>> connect_with_retry(tcp::endpoint peer, Millis timeout,
                                                          Millis retry_every = Millis(200));

// One attempt, bounded by `timeout`: a refused connection is an error at once (a peer that is gone).
asio::awaitable<Expected<tcp::socket>> connect_once(tcp::endpoint peer, Millis timeout);

// Exchanges Endpoints: writes ours, reads theirs.
asio::awaitable<Expected<Endpoint>> exchange_endpoints(tcp::socket& socket, std::uint64_t token,
                                                       const Endpoint& local, Millis timeout);

// Splits "host" or "host:port" (exactly one ':'; a bare IPv6 address has more and is all host).
// Pure: an empty host, or a port that is not a whole decimal in 1..65535, is an error.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
Expected<HostPort> parse_host_port(const std::string& spec, std::uint16_t default_port);

// Resolves "host" or "host:port" (numeric or via getaddrinfo) - blocking, for setup only.
Expected<tcp::endpoint> resolve_endpoint(const std::string& host, std::uint16_t default_port);

}  // namespace nccl_ha::net
