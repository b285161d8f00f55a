// The proof that opens a handshake and the sealed frames after it (handshake_auth.hpp).
#include "setup/handshake_auth.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>

#include "nccl_ha/net/handshake.hpp"
#include "nccl_ha/reactor/log.hpp"
#include "setup/handle.hpp"

namespace nccl_ha::plugin::hs {

namespace asio = boost::asio;

namespace {

constexpr std::string_view kHelloLabel = "nccl-ha/6 hello";
constexpr std::string_view kReplyLabel = "nccl-ha/6 hello reply";
constexpr std::string_view kSessionLabel = "nccl-ha/6 session";
constexpr std::string_view kRescueLabel = "nccl-ha/6 rescue";
constexpr std::string_view kFrameLabel = "nccl-ha/6 frame";

std::vector<std::uint8_t> nonce_and_mac(const net::Nonce& n, const net::Mac& m) {
  std::vector<std::uint8_t> out(n.begin(), n.end());
  out.insert(out.end(), m.begin(), m.end());
  return out;
}

// The nonce and MAC of a hello-shaped payload (exactly kHelloSize bytes).
bool split(std::span<const std::uint8_t> payload, net::Nonce& n, net::Bytes& m) {
  if (payload.size() != kHelloSize) return false;
  std::memcpy(n.data(), payload.data(), n.size());
  m = payload.subspan(n.size());
  return true;
}

}  // namespace

std::vector<std::uint8_t> make_hello(const net::Key& secret, std::uint64_t id, const net::Nonce& nc) {
  return nonce_and_mac(nc, net::mac(secret, kHelloLabel, {net::bytes_of(id), nc}));
}

std::optional<net::Nonce> check_hello(const net::Key& secret, std::uint64_t id, std::span<const std::uint8_t> payload) {
  net::Nonce nc;
  net::Bytes proof;
  if (!split(payload, nc, proof)) return std::nullopt;
  if (!net::mac_equal(proof, net::mac(secret, kHelloLabel, {net::bytes_of(id), nc}))) return std::nullopt;
  return nc;
}

std::vector<std::uint8_t> make_hello_reply(const net::Key& secret, std::uint64_t id, const net::Nonce& nc,
                                           const net::Nonce& nl) {
  return nonce_and_mac(nl, net::mac(secret, kReplyLabel, {net::bytes_of(id), nc, nl}));
}

std::optional<net::Nonce> check_hello_reply(const net::Key& secret, std::uint64_t id, const net::Nonce& nc,
                                            std::span<const std::uint8_t> payload) {
  net::Nonce nl;
  net::Bytes proof;
  if (!split(payload, nl, proof)) return std::nullopt;
  if (!net::mac_equal(proof, net::mac(secret, kReplyLabel, {net::bytes_of(id), nc, nl}))) return std::nullopt;
  return nl;
}

SessionKeys derive_keys(const net::Key& secret, std::uint64_t id, const net::Nonce& nc, const net::Nonce& nl) {
  return {net::derive(secret, kSessionLabel, {net::bytes_of(id), nc, nl}),
          net::derive(secret, kRescueLabel, {net::bytes_of(id), nc, nl})};
}

bool NonceLog::first_time(const net::Nonce& n) {
  if (!seen_.insert(n).second) return false;
  order_.push_back(n);
  if (order_.size() > kNonceMemory) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

// ---- Channel

net::Mac Channel::frame_mac(bool from_connector, std::uint64_t seq, std::uint16_t type,
                            std::span<const std::uint8_t> payload) const {
  const std::uint8_t dir = from_connector ? 'c' : 'l';
  return net::mac(key_, kFrameLabel,
                  {net::bytes_of(id_), net::Bytes(&dir, 1), net::bytes_of(seq), net::bytes_of(type), payload});
}

std::vector<std::uint8_t> Channel::seal(std::uint16_t type, std::span<const std::uint8_t> payload) {
  const std::size_t n = std::min(payload.size(), kMaxSealedPayload);  // callers' payloads are far below it
  std::vector<std::uint8_t> body(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(n));
  const net::Mac m = frame_mac(connector_, sent_++, type, body);
  body.insert(body.end(), m.begin(), m.begin() + kSealSize);
  return net::encode_frame(type, id_, body);
}

Expected<net::Frame> Channel::open(net::Frame f) {
  if (f.payload.size() < kSealSize) return make_error(Errc::bad_token, "a frame without its MAC");
  const std::span<const std::uint8_t> all(f.payload);
  const auto body = all.first(all.size() - kSealSize);
  if (!net::mac_equal(all.last(kSealSize), frame_mac(!connector_, received_, f.type, body), kSealSize))
    return make_error(Errc::bad_token, "a frame whose MAC does not verify (not from the peer that proved the secret)");
  ++received_;
  f.payload.resize(body.size());
  return f;
}

asio::awaitable<Status> Channel::send(std::uint16_t type, std::span<const std::uint8_t> payload, Millis timeout) {
  if (payload.size() > kMaxSealedPayload) co_return make_error(Errc::bad_length, "a handshake frame too long to seal");
  const std::vector<std::uint8_t> bytes = seal(type, payload);
  co_return co_await net::write_bytes(sock_, bytes, timeout);
}

asio::awaitable<Expected<net::Frame>> Channel::recv(Millis timeout) {
  auto f = co_await net::read_frame(sock_, id_, timeout);
  if (!f) co_return f;
  auto opened = open(std::move(f).value());
  if (!opened) co_return opened;
  if (opened->type == static_cast<std::uint16_t>(net::MsgType::error))
    co_return make_error(Errc::peer_error,
                         "peer reported: " + std::string(opened->payload.begin(), opened->payload.end()));
  co_return opened;
}

asio::awaitable<Expected<net::Frame>> Channel::recv_of(std::uint16_t type, Millis timeout) {
  auto f = co_await recv(timeout);
  if (f && f->type != type)
    co_return make_error(Errc::bad_type, "unexpected message type " + std::to_string(f->type) + " (expected " +
                                             std::to_string(type) + ")");
  co_return f;
}

// ---- the two ends of the hello

asio::awaitable<Expected<SessionKeys>> connector_hello(tcp::socket& sock, net::Key secret, std::uint64_t id,
                                                       Millis timeout) {
  const net::Nonce nc = net::random_nonce();
  const auto hello = make_hello(secret, id, nc);
  if (auto s = co_await net::write_frame(sock, static_cast<std::uint16_t>(HandshakeMsg::hello), id, hello, timeout); !s)
    co_return std::move(s).error();
  auto reply = co_await net::read_frame_of(sock, static_cast<std::uint16_t>(HandshakeMsg::hello_reply), id, timeout,
                                           kHelloSize);
  if (!reply)  // a listener says nothing to a connector whose proof fails
    co_return make_error(reply.error().code, "no answer to our proof of the handle's secret (" + reply.error().message +
                                                 "): a stale or foreign handle, or the listener is gone");
  const auto nl = check_hello_reply(secret, id, nc, reply->payload);
  if (!nl) co_return make_error(Errc::bad_token, "the listener did not prove the handle's secret (not the listener of this handle)");
  co_return derive_keys(secret, id, nc, *nl);
}

asio::awaitable<Expected<SessionKeys>> connect_and_prove(std::optional<tcp::socket>& sock, tcp::endpoint peer,
                                                         net::Key secret, std::uint64_t id, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int attempt = 1;; ++attempt) {
    const Millis left = std::max(std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now()), Millis(1));
    auto connected = co_await net::connect_with_retry(peer, left);
    if (!connected) co_return std::move(connected).error();
    sock.emplace(std::move(*connected));
    auto keys = co_await connector_hello(*sock, secret, id, left);
    const bool closed_unanswered = !keys && keys.error().code == Errc::closed;
    if (keys || !closed_unanswered || attempt == kProofAttempts || std::chrono::steady_clock::now() >= deadline)
      co_return keys;
    HA_INFO("NET/HA: connect to %s:%u: the listener closed the connection before answering our proof (attempt %d of "
            "%d); connecting again", peer.address().to_string().c_str(), static_cast<unsigned>(peer.port()), attempt,
            kProofAttempts);
    boost::asio::steady_timer pause(co_await boost::asio::this_coro::executor, Millis(20 * attempt));
    auto [ignored] = co_await pause.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    (void)ignored;
  }
}

asio::awaitable<Expected<net::Nonce>> read_hello(tcp::socket& sock, net::Key secret, std::uint64_t id, NonceLog& nonces,
                                                 Millis deadline) {
  auto hello = co_await net::read_first_frame(sock, id, deadline, kHelloSize);
  if (!hello) co_return std::move(hello).error();
  if (hello->type != static_cast<std::uint16_t>(HandshakeMsg::hello))
    co_return make_error(Errc::bad_type, "a first frame that is not a hello (type " + std::to_string(hello->type) + ")");
  const auto nc = check_hello(secret, id, hello->payload);
  if (!nc) co_return make_error(Errc::bad_token, "a hello without a proof of the handle's secret");
  if (!nonces.first_time(*nc)) co_return make_error(Errc::bad_token, "a replayed hello (its nonce was seen before)");
  co_return *nc;
}

asio::awaitable<Expected<SessionKeys>> answer_hello(tcp::socket& sock, net::Key secret, std::uint64_t id, net::Nonce nc,
                                                    Millis deadline) {
  const net::Nonce nl = net::random_nonce();
  const auto reply = make_hello_reply(secret, id, nc, nl);
  if (auto s = co_await net::write_frame(sock, static_cast<std::uint16_t>(HandshakeMsg::hello_reply), id, reply, deadline); !s)
    co_return std::move(s).error();
  co_return derive_keys(secret, id, nc, nl);
}

asio::awaitable<Expected<SessionKeys>> listener_hello(tcp::socket& sock, net::Key secret, std::uint64_t id,
                                                      NonceLog& nonces, Millis deadline) {
  auto nc = co_await read_hello(sock, secret, id, nonces, deadline);
  if (!nc) co_return std::move(nc).error();
  const net::Nonce proven = *nc;
  co_return co_await answer_hello(sock, secret, id, proven, deadline);
}

}  // namespace nccl_ha::plugin::hs
