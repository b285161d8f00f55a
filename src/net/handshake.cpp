#include "nccl_ha/net/handshake.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <tuple>

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::net {
namespace {

using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using IoResult = std::tuple<error_code, std::size_t>;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
// Bound on reading a frame whose bytes are all in the socket's buffer already (read_first_frame).
constexpr Millis kWaitingRead{200};

// Runs one socket operation against a deadline; ec = timed_out when the deadline wins.
asio::awaitable<IoResult> with_deadline(asio::awaitable<IoResult> op, Millis timeout) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto r = co_await (std::move(op) || timer.async_wait(use_tuple));
  if (r.index() == 0) co_return std::get<0>(r);
  co_return IoResult{asio::error::timed_out, 0};
}

Error io_error(const char* what, const error_code& ec) {
  if (ec == asio::error::timed_out) return make_error(Errc::timeout, std::string(what) + ": timed out");
  if (ec == asio::error::eof || ec == asio::error::connection_reset)
    return make_error(Errc::closed, std::string(what) + ": peer closed the connection");
  return make_error(Errc::system, std::string(what) + ": " + ec.message());
}

}  // namespace

asio::awaitable<Status> write_frame(tcp::socket& socket, std::uint16_t type, std::uint64_t token,
                                    std::span<const std::uint8_t> payload, Millis timeout) {
  const auto bytes = encode_frame(type, token, payload);
  co_return co_await write_bytes(socket, bytes, timeout);
}

asio::awaitable<Status> write_bytes(tcp::socket& socket, std::span<const std::uint8_t> bytes, Millis timeout) {
  auto [ec, n] = co_await with_deadline(asio::async_write(socket, asio::buffer(bytes.data(), bytes.size()), use_tuple), timeout);
  if (ec) co_return io_error("sending a frame", ec);
  co_return Status{};
}

asio::awaitable<Expected<Frame>> read_frame(tcp::socket& socket, std::uint64_t expected_token, Millis timeout,
                                            std::size_t max_payload) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<std::uint8_t, kHeaderSize> hdr{};
  auto [ec, n] = co_await with_deadline(asio::async_read(socket, asio::buffer(hdr), use_tuple), timeout);
  if (ec) {
    if (ec == asio::error::eof && n > 0)
      co_return make_error(Errc::truncated, "frame header truncated: peer closed after " + std::to_string(n) + " bytes");
    co_return io_error("reading a frame header", ec);
  }
  auto h = decode_header(hdr, expected_token, max_payload);
  if (!h) co_return std::move(h).error();
  Frame f;
  f.type = h->type;
  f.token = h->token;
  f.payload.resize(h->length);  // bounded by max_payload above
  if (h->length > 0) {
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    auto [ec2, n2] = co_await with_deadline(asio::async_read(socket, asio::buffer(f.payload), use_tuple),
                                            std::max(left, Millis(1)));
    if (ec2) {
      if (ec2 == asio::error::eof)
        co_return make_error(Errc::truncated, "frame payload truncated: " + std::to_string(n2) + " of " +
                                                  std::to_string(h->length) + " bytes");
      co_return io_error("reading a frame payload", ec2);
    }
  }
  co_return f;
}

asio::awaitable<Expected<Frame>> read_first_frame(tcp::socket& socket, std::uint64_t expected_token, Millis deadline,
                                                  std::size_t max_payload) {
  auto f = co_await read_frame(socket, expected_token, deadline, max_payload);
  error_code ec;
  if (!f && f.error().code == Errc::timeout && socket.available(ec) >= kHeaderSize + max_payload && !ec)
    f = co_await read_frame(socket, expected_token, kWaitingRead, max_payload);  // in the buffer: no wait
  co_return f;
}

asio::awaitable<Expected<Frame>> read_frame_of(tcp::socket& socket, std::uint16_t type, std::uint64_t expected_token,
                                               Millis timeout, std::size_t max_payload) {
  auto f = co_await read_frame(socket, expected_token, timeout, max_payload);
  if (!f) co_return f;
  if (f->type == static_cast<std::uint16_t>(MsgType::error)) {
    std::string reason(f->payload.begin(), f->payload.end());
    co_return make_error(Errc::peer_error, "peer reported: " + reason);
  }
  if (f->type != type)
    co_return make_error(Errc::bad_type, "unexpected message type " + std::to_string(f->type) + " (expected " +
                                             std::to_string(type) + ")");
  co_return f;
}

namespace {

// One connect attempt of `s`, bounded by `left`; TCP_NODELAY on success.
asio::awaitable<boost::system::error_code> attempt_connect(tcp::socket& s, tcp::endpoint peer, Millis left) {
  auto [ec, n] = co_await with_deadline(
      [](tcp::socket& sock, tcp::endpoint ep) -> asio::awaitable<IoResult> {
        auto [e] = co_await sock.async_connect(ep, use_tuple);
        co_return IoResult{e, 0};
      }(s, peer),
      left);
  if (!ec) s.set_option(tcp::no_delay(true));
  co_return ec;
}

}  // namespace

asio::awaitable<Expected<tcp::socket>> connect_once(tcp::endpoint peer, Millis timeout) {
  tcp::socket s(co_await asio::this_coro::executor);
  const auto ec = co_await attempt_connect(s, peer, timeout);
  if (!ec) co_return std::move(s);
  co_return make_error(ec == asio::error::timed_out ? Errc::timeout : Errc::system,
                       "connecting to " + peer.address().to_string() + ":" + std::to_string(peer.port()) + ": " + ec.message());
}

asio::awaitable<Expected<tcp::socket>> connect_with_retry(tcp::endpoint peer, Millis timeout, Millis retry_every) {
  auto ex = co_await asio::this_coro::executor;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no attempt";
  for (;;) {
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left <= Millis(0)) break;
    tcp::socket s(ex);
    const auto ec = co_await attempt_connect(s, peer, left);
    if (!ec) co_return std::move(s);
    last = ec.message();
    if (ec == asio::error::timed_out) break;
    asio::steady_timer pause(ex, std::min(retry_every, left));
    co_await pause.async_wait(use_tuple);
  }
  co_return make_error(Errc::timeout, "connecting to " + peer.address().to_string() + ":" + std::to_string(peer.port()) +
                                          " timed out after " + std::to_string(timeout.count()) + " ms (last error: " +
                                          last + ")");
}

asio::awaitable<Expected<Endpoint>> exchange_endpoints(tcp::socket& socket, std::uint64_t token, const Endpoint& local,
                                                       Millis timeout) {
  auto payload = encode_endpoint(local);
  if (auto s = co_await write_frame(socket, static_cast<std::uint16_t>(MsgType::endpoint), token, payload, timeout); !s)
    co_return std::move(s).error();
  auto f = co_await read_frame_of(socket, static_cast<std::uint16_t>(MsgType::endpoint), token, timeout);
  if (!f) co_return std::move(f).error();
  co_return decode_endpoint(f->payload);
}

Expected<HostPort> parse_host_port(const std::string& spec, std::uint16_t default_port) {
  HostPort hp{spec, default_port};
  auto colon = spec.rfind(':');
  if (colon != std::string::npos && spec.find(':') == colon) {  // host:port (not a bare IPv6 address)
    hp.host = spec.substr(0, colon);
    auto p = parse_int(spec.substr(colon + 1));  // the whole rest: "80x" is not port 80
    if (!p || *p < 1 || *p > 65535) return make_error(Errc::invalid_argument, "bad port in '" + spec + "'");
    hp.port = static_cast<std::uint16_t>(*p);
  }
  if (hp.host.empty()) return make_error(Errc::invalid_argument, "no host in '" + spec + "'");
  return hp;
}

Expected<tcp::endpoint> resolve_endpoint(const std::string& spec, std::uint16_t default_port) {
  auto hp = parse_host_port(spec, default_port);
  if (!hp) return std::move(hp).error();
  const std::string& host = hp->host;
  const std::uint16_t port = hp->port;
  error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(addr, port);
  asio::io_context io;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) return make_error(Errc::not_found, "cannot resolve '" + host + "': " + ec.message());
  return results.begin()->endpoint();
}

}  // namespace nccl_ha::net
