// Who may talk to a listener: the proof that opens a handshake, and the MAC on every frame after it.
//
// The handle (handle.hpp) carries a random 32-byte secret; NCCL ships it to the connector out of
// band. The secret itself never crosses the handshake socket:
//
//   connector                                          listener
//   hello {Nc, mac(secret, "hello", id, Nc)}   --->    checks the proof within the admission
//                                                      deadline (admission.hpp) and that Nc is
//                                                      new to it; anything else: the socket is
//                                                      closed without a byte sent
//                                              <---    hello_reply {Nl, mac(secret, "hello reply",
//                                                      id, Nc, Nl)}
//   checks the listener's proof
//   both: session key = derive(secret, "session", id, Nc, Nl), rescue key = derive(secret,
//   "rescue", id, Nc, Nl); every later frame of this socket, either way (conn_request ...
//   standby_up, error frames), ends with a 16-byte MAC under the session key over its
//   direction, its sequence number, its type and its payload (Channel).
//
// A captured hello replayed to the same listener is refused (its nonce was seen); one replayed
// after that listener forgot the nonce (NonceLog keeps the last kNonceMemory) gets the listener's
// reply, but nothing more: the next frame needs the session key, which needs the secret.
// `id` is the handle's public listener id (the frames' header token).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "nccl_ha/net/auth.hpp"
#include "nccl_ha/net/wire.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::plugin::hs {

using tcp = boost::asio::ip::tcp;
using Millis = std::chrono::milliseconds;

constexpr std::size_t kHelloSize = net::kNonceSize + net::kMacSize;  // hello and hello_reply payloads
constexpr std::size_t kSealSize = 16;                                // the MAC at the end of a sealed frame
constexpr std::size_t kMaxSealedPayload = net::kMaxPayload - kSealSize;

// What both ends derive from a proven hello.
struct SessionKeys {
  net::Key session{};  // the MACs of this socket's later frames
  net::Key rescue{};   // the connection's rescue messages (rescue.hpp)
};

// ---- pure: the proofs (fuzzed and unit-tested without sockets)
std::vector<std::uint8_t> make_hello(const net::Key& secret, std::uint64_t id, const net::Nonce& nc);
// The connector's nonce, if `payload` is a hello proving `secret` for listener `id`.
std::optional<net::Nonce> check_hello(const net::Key& secret, std::uint64_t id, std::span<const std::uint8_t> payload);
std::vector<std::uint8_t> make_hello_reply(const net::Key& secret, std::uint64_t id, const net::Nonce& nc,
                                           const net::Nonce& nl);
// The listener's nonce, if `payload` answers our hello `nc` with a proof of `secret`.
std::optional<net::Nonce> check_hello_reply(const net::Key& secret, std::uint64_t id, const net::Nonce& nc,
                                            std::span<const std::uint8_t> payload);
SessionKeys derive_keys(const net::Key& secret, std::uint64_t id, const net::Nonce& nc, const net::Nonce& nl);

// The connector nonces a listener has accepted, the last kNonceMemory of them.
class NonceLog {
 public:
  static constexpr std::size_t kNonceMemory = 4096;
  // True (and remembered) if `n` was not seen; false for a replay.
  bool first_time(const net::Nonce& n);

 private:
  std::set<net::Nonce> seen_;
  std::deque<net::Nonce> order_;
};

// The frames of one proven handshake socket, sealed both ways. Progress thread only.
class Channel {
 public:
  Channel(tcp::socket& sock, const net::Key& session, std::uint64_t id, bool connector)
      : sock_(sock), key_(session), id_(id), connector_(connector) {}
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  tcp::socket& socket() noexcept { return sock_; }
  // The frame's bytes with its MAC (the next sequence number), for a caller that writes them itself.
  std::vector<std::uint8_t> seal(std::uint16_t type, std::span<const std::uint8_t> payload);
  boost::asio::awaitable<Status> send(std::uint16_t type, std::span<const std::uint8_t> payload, Millis timeout);
  // The next frame, its MAC checked and stripped (a frame that fails is an error, and the channel is
  // then of no further use). An error frame of the peer becomes Errc::peer_error with its reason.
  boost::asio::awaitable<Expected<net::Frame>> recv(Millis timeout);
  // The same, and it must be of `type`.
  boost::asio::awaitable<Expected<net::Frame>> recv_of(std::uint16_t type, Millis timeout);

  // Pure halves of send / recv (unit tests, fuzzer): the MAC of a frame, and the check of one read.
  Expected<net::Frame> open(net::Frame f);

 private:
  net::Mac frame_mac(bool from_connector, std::uint64_t seq, std::uint16_t type, std::span<const std::uint8_t> payload) const;
  tcp::socket& sock_;
  net::Key key_;
  std::uint64_t id_;
  bool connector_;
  std::uint64_t sent_ = 0;
  std::uint64_t received_ = 0;
};

// Connector: sends the hello on a connected socket and checks the listener's reply.
boost::asio::awaitable<Expected<SessionKeys>> connector_hello(tcp::socket& sock, net::Key secret, std::uint64_t id,
                                                              Millis timeout);

// Connector, from the start: connects `sock` to the listener at `peer` and proves the secret, within
// `timeout`. A listener that closes the connection before it answers (it closed a socket it had
// not read a proof from: its process's places for unproven sockets were taken - a burst of
// connections from this host on a loaded machine - or a stale handle) is connected to again, with
// a new proof, up to kProofAttempts times in all while the time lasts (an INFO line each time):
// enough for a host whose 256 connectors were all starved past the listener's deadline at once
// (failover-scale gave up once after 4), few enough that a stale handle fails fast.
constexpr int kProofAttempts = 8;
boost::asio::awaitable<Expected<SessionKeys>> connect_and_prove(std::optional<tcp::socket>& sock, tcp::endpoint peer,
                                                                net::Key secret, std::uint64_t id, Millis timeout);

// Listener, in two steps: read_hello reads the hello within `deadline` and checks it (nothing is
// sent; an error means: close the socket without a word, admission.hpp says so, rate-limited);
// the connector's nonce once it proved the secret, when the caller gives its admission place back
// (Admission::Ticket::proven: from then on the socket is no stranger's, never evicted). Then
// answer_hello writes the reply and gives the session keys. listener_hello: both.
// A hello that is whole in the socket's buffer when the deadline fires is still read
// (net::read_first_frame: the listener's process was busy, not the connector silent).
boost::asio::awaitable<Expected<net::Nonce>> read_hello(tcp::socket& sock, net::Key secret, std::uint64_t id,
                                                        NonceLog& nonces, Millis deadline);
boost::asio::awaitable<Expected<SessionKeys>> answer_hello(tcp::socket& sock, net::Key secret, std::uint64_t id,
                                                           net::Nonce nc, Millis deadline);
boost::asio::awaitable<Expected<SessionKeys>> listener_hello(tcp::socket& sock, net::Key secret, std::uint64_t id,
                                                             NonceLog& nonces, Millis deadline);

}  // namespace nccl_ha::plugin::hs
