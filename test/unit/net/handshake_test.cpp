// Frame I/O over real loopback TCP (127.0.0.1, ephemeral ports) on a running reactor:
// round trips, malformed and truncated input, silent peers, wrong tokens, connect retries,
// the endpoint exchange, cancellation at stop, and resolve_endpoint's parsing.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "alloc_tracker.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;
using namespace nccl_ha::test;
using Bytes = std::vector<std::uint8_t>;

namespace {

constexpr std::uint64_t kToken = 0x5eed5eed5eed5eedull;
constexpr std::uint16_t kAppType = kAppTypeBase + 7;

struct Fixture {
  LogCapture log;
  Reactor r;
  Fixture() { r.start(); }
};

struct Sockets {
  tcp::socket client;
  tcp::socket server;
};

// A connected loopback pair (connect completes against the listen backlog, then accept).
asio::awaitable<Sockets> connected_pair() {
  auto ex = co_await asio::this_coro::executor;
  tcp::acceptor acceptor(ex, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket client(ex);
  co_await client.async_connect(acceptor.local_endpoint(), asio::use_awaitable);
  tcp::socket server = co_await acceptor.async_accept(asio::use_awaitable);
  co_return Sockets{std::move(client), std::move(server)};
}

asio::awaitable<void> send_raw(tcp::socket& s, const Bytes& bytes) {
  co_await asio::async_write(s, asio::buffer(bytes), asio::use_awaitable);
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// A loopback port with (almost certainly) no listener: bound once, then released.
std::uint16_t unused_port() {
  asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  return a.local_endpoint().port();
}

Bytes pattern(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 31 + 7);
  return b;
}

Endpoint endpoint_with(std::uint32_t qpn, std::uint8_t gid_byte) {
  Endpoint ep;
  ep.qpn = qpn;
  ep.psn = qpn ^ 0xabcdeu;
  std::memset(ep.gid.raw, gid_byte, sizeof ep.gid.raw);
  ep.lid = static_cast<std::uint16_t>(qpn & 0xffff);
  ep.port = 1;
  ep.gid_index = 1;
  ep.link_layer = IBV_LINK_LAYER_ETHERNET;
  ep.mtu = IBV_MTU_1024;
  return ep;
}

bool same(const Endpoint& a, const Endpoint& b) {
  return a.qpn == b.qpn && a.psn == b.psn && std::memcmp(a.gid.raw, b.gid.raw, 16) == 0 && a.lid == b.lid &&
         a.port == b.port && a.gid_index == b.gid_index && a.link_layer == b.link_layer && a.mtu == b.mtu;
}

// Result of a read together with how long it took (measured on the progress thread).
struct Timed {
  std::optional<Expected<Frame>> result;
  long long ms = 0;
};

template <class T>
Errc code_of(const Expected<T>& e) {
  BOOST_REQUIRE_MESSAGE(!e.ok(), "expected an error, got success");
  return e.error().code;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(handshake_frames)

BOOST_AUTO_TEST_CASE(write_frame_read_frame_round_trip) {
  Fixture f;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{32}, std::size_t{1000}, kMaxPayload}) {
    BOOST_TEST_CONTEXT("payload " << n) {
      auto [status, frame] = run_co(f.r, [n]() -> asio::awaitable<std::pair<Status, Expected<Frame>>> {
        auto s = co_await connected_pair();
        const Bytes payload = pattern(n);
        auto st = co_await write_frame(s.client, kAppType, kToken, payload, 5s);
        auto fr = co_await read_frame(s.server, kToken, 5s);
        co_return std::pair{std::move(st), std::move(fr)};
      });
      BOOST_TEST(status.ok());
      BOOST_REQUIRE_MESSAGE(frame.ok(), test::err_msg(frame));
      BOOST_TEST(frame->type == kAppType);
      BOOST_TEST(frame->token == kToken);
      BOOST_TEST(frame->payload == pattern(n), boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(frames_back_to_back_in_both_directions) {
  Fixture f;
  auto frames = run_co(f.r, []() -> asio::awaitable<std::vector<Expected<Frame>>> {
    auto s = co_await connected_pair();
    for (std::uint16_t i = 0; i < 3; ++i)
      (void)co_await write_frame(s.client, static_cast<std::uint16_t>(kAppType + i), kToken, pattern(i * 10u), 5s);
    (void)co_await write_frame(s.server, kAppType, kToken, pattern(5), 5s);
    std::vector<Expected<Frame>> out;
    for (int i = 0; i < 3; ++i) out.push_back(co_await read_frame(s.server, kToken, 5s));
    out.push_back(co_await read_frame(s.client, kToken, 5s));
    co_return out;
  });
  BOOST_REQUIRE(frames.size() == 4u);
  for (std::uint16_t i = 0; i < 3; ++i) {
    BOOST_REQUIRE(frames[i].ok());
    BOOST_TEST(frames[i]->type == kAppType + i);
    BOOST_TEST(frames[i]->payload == pattern(i * 10u), boost::test_tools::per_element());
  }
  BOOST_REQUIRE(frames[3].ok());
  BOOST_TEST(frames[3]->payload == pattern(5), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(garbage_is_bad_magic) {
  Fixture f;
  auto r = run_co(f.r, []() -> asio::awaitable<Expected<Frame>> {
    auto s = co_await connected_pair();
    co_await send_raw(s.client, Bytes(64, 0xAB));
    co_return co_await read_frame(s.server, kToken, 5s);
  });
  BOOST_TEST((code_of(r) == Errc::bad_magic));
}

BOOST_AUTO_TEST_CASE(half_a_header_then_close_is_truncated) {
  Fixture f;
  for (std::size_t sent : {std::size_t{1}, std::size_t{10}, kHeaderSize - 1}) {
    auto r = run_co(f.r, [sent]() -> asio::awaitable<Expected<Frame>> {
      auto s = co_await connected_pair();
      Bytes whole = encode_frame(kAppType, kToken, pattern(8));
      whole.resize(sent);
      co_await send_raw(s.client, whole);
      s.client.close();
      co_return co_await read_frame(s.server, kToken, 10s);
    });
    BOOST_TEST((code_of(r) == Errc::truncated), "after " << sent << " header bytes");
  }
}

BOOST_AUTO_TEST_CASE(partial_payload_then_close_is_truncated) {
  Fixture f;
  auto r = run_co(f.r, []() -> asio::awaitable<Expected<Frame>> {
    auto s = co_await connected_pair();
    Bytes whole = encode_frame(kAppType, kToken, pattern(100));
    whole.resize(kHeaderSize + 50);
    co_await send_raw(s.client, whole);
    s.client.close();
    co_return co_await read_frame(s.server, kToken, 10s);
  });
  BOOST_TEST((code_of(r) == Errc::truncated));
}

BOOST_AUTO_TEST_CASE(close_without_sending_is_closed) {
  Fixture f;
  auto r = run_co(f.r, []() -> asio::awaitable<Expected<Frame>> {
    auto s = co_await connected_pair();
    s.client.close();
    co_return co_await read_frame(s.server, kToken, 10s);
  });
  BOOST_TEST((code_of(r) == Errc::closed));
}

BOOST_AUTO_TEST_CASE(silent_peer_times_out_within_the_bound) {
  Fixture f;
  constexpr auto kBound = 500ms;
  for (bool send_header : {false, true}) {
    BOOST_TEST_CONTEXT("header sent: " << send_header) {
      auto t = run_co(f.r, [send_header, kBound]() -> asio::awaitable<Timed> {
        auto s = co_await connected_pair();
        if (send_header) {  // a header announcing 100 bytes that never come
          Bytes whole = encode_frame(kAppType, kToken, pattern(100));
          whole.resize(kHeaderSize);
          co_await send_raw(s.client, whole);
        }
        const auto t0 = Clock::now();
        Timed out;
        out.result.emplace(co_await read_frame(s.server, kToken, kBound));
        out.ms = ms_since(t0);
        co_return out;
      });
      BOOST_REQUIRE(t.result.has_value());
      BOOST_TEST((code_of(*t.result) == Errc::timeout));
      BOOST_TEST(t.ms >= kBound.count() - 5);  // not before the bound (timer granularity slack)
      BOOST_TEST(t.ms < 5 * kBound.count());  // and the whole read is bounded, header + payload
    }
  }
}

BOOST_AUTO_TEST_CASE(wrong_token_is_bad_token) {
  Fixture f;
  auto r = run_co(f.r, []() -> asio::awaitable<Expected<Frame>> {
    auto s = co_await connected_pair();
    (void)co_await write_frame(s.client, kAppType, kToken ^ 1, pattern(4), 5s);
    co_return co_await read_frame(s.server, kToken, 5s);
  });
  BOOST_TEST((code_of(r) == Errc::bad_token));
}

BOOST_AUTO_TEST_CASE(oversized_claim_is_refused_without_allocating_or_waiting) {
  Fixture f;
  AllocationWatch watch;
  auto r = run_co(f.r, []() -> asio::awaitable<Expected<Frame>> {
    auto s = co_await connected_pair();
    Bytes header = encode_frame(kAppType, kToken, {});
    header[8] = header[9] = header[10] = header[11] = 0xff;  // length 0xffffffff, nothing follows
    co_await send_raw(s.client, header);
    co_return co_await read_frame(s.server, kToken, std::chrono::hours(1));  // must not wait for it
  });
  BOOST_TEST((code_of(r) == Errc::oversized));
  BOOST_TEST(watch.largest() < 1024u * 1024u);
  // A reader's own smaller limit applies too.
  auto small = run_co(f.r, []() -> asio::awaitable<Expected<Frame>> {
    auto s = co_await connected_pair();
    (void)co_await write_frame(s.client, kAppType, kToken, pattern(100), 5s);
    co_return co_await read_frame(s.server, kToken, 5s, 99);
  });
  BOOST_TEST((code_of(small) == Errc::oversized));
}

BOOST_AUTO_TEST_CASE(read_frame_of_checks_the_type_and_surfaces_peer_errors) {
  Fixture f;
  auto [ok, wrong, peer] = run_co(f.r, []() -> asio::awaitable<std::tuple<Expected<Frame>, Expected<Frame>, Expected<Frame>>> {
    auto s = co_await connected_pair();
    (void)co_await write_frame(s.client, kAppType, kToken, pattern(3), 5s);
    (void)co_await write_frame(s.client, kAppType + 1, kToken, pattern(3), 5s);
    const std::string reason = "no such device";
    (void)co_await write_frame(s.client, static_cast<std::uint16_t>(MsgType::error), kToken,
                               std::span(reinterpret_cast<const std::uint8_t*>(reason.data()), reason.size()), 5s);
    auto a = co_await read_frame_of(s.server, kAppType, kToken, 5s);
    auto b = co_await read_frame_of(s.server, kAppType, kToken, 5s);
    auto c = co_await read_frame_of(s.server, kAppType, kToken, 5s);
    co_return std::tuple{std::move(a), std::move(b), std::move(c)};
  });
  BOOST_REQUIRE(ok.ok());
  BOOST_TEST(ok->payload == pattern(3), boost::test_tools::per_element());
  BOOST_TEST((code_of(wrong) == Errc::bad_type));
  BOOST_TEST((code_of(peer) == Errc::peer_error));
  BOOST_TEST(peer.error().message.find("no such device") != std::string::npos, peer.error().message);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(handshake_connect)

BOOST_AUTO_TEST_CASE(connect_to_a_port_without_listener_times_out_within_the_bound) {
  Fixture f;
  const tcp::endpoint nobody(asio::ip::address_v4::loopback(), unused_port());
  constexpr auto kBound = 600ms;
  auto [res, ms] = run_co(f.r, [nobody, kBound]() -> asio::awaitable<std::pair<Expected<tcp::socket>, long long>> {
    const auto t0 = Clock::now();
    auto s = co_await connect_with_retry(nobody, kBound, 50ms);
    co_return std::pair{std::move(s), ms_since(t0)};
  });
  BOOST_TEST((code_of(res) == Errc::timeout));
  BOOST_TEST(res.error().message.find(std::to_string(nobody.port())) != std::string::npos, res.error().message);
  BOOST_TEST(ms >= kBound.count() - 5);  // it kept retrying until the bound
  BOOST_TEST(ms < 5 * kBound.count());
}

BOOST_AUTO_TEST_CASE(connect_once_fails_at_once_where_nobody_listens) {
  Fixture f;
  const tcp::endpoint nobody(asio::ip::address_v4::loopback(), unused_port());
  auto [res, ms] = run_co(f.r, [nobody]() -> asio::awaitable<std::pair<Expected<tcp::socket>, long long>> {
    const auto t0 = Clock::now();
    auto s = co_await connect_once(nobody, 10s);
    co_return std::pair{std::move(s), ms_since(t0)};
  });
  BOOST_TEST((code_of(res) == Errc::system));  // refused: no retry, no waiting out the bound
  BOOST_TEST(res.error().message.find(std::to_string(nobody.port())) != std::string::npos, res.error().message);
  BOOST_TEST(ms < 5000);
}

BOOST_AUTO_TEST_CASE(connect_retries_until_a_late_listener_appears) {
  Fixture f;
  const std::uint16_t port = unused_port();
  const tcp::endpoint peer(asio::ip::address_v4::loopback(), port);
  auto connected = spawn_future(f.r, "connect", [peer]() -> asio::awaitable<Expected<tcp::socket>> {
    co_return co_await connect_with_retry(peer, 20s, 20ms);
  });
  std::this_thread::sleep_for(300ms);  // a few refused attempts
  BOOST_TEST((connected.wait_for(0ms) == std::future_status::timeout));
  auto accepted = spawn_future(f.r, "accept", [peer]() -> asio::awaitable<bool> {
    tcp::acceptor acceptor(co_await asio::this_coro::executor, peer);
    tcp::socket s = co_await acceptor.async_accept(asio::use_awaitable);
    co_return s.is_open();
  });
  BOOST_REQUIRE(ready_within(connected));
  BOOST_REQUIRE(ready_within(accepted));
  auto sock = connected.get();
  BOOST_REQUIRE_MESSAGE(sock.ok(), test::err_msg(sock));
  BOOST_TEST(accepted.get());
  const bool nodelay = on_reactor(f.r, [&] {
    tcp::no_delay opt;
    sock->get_option(opt);
    sock->close();
    return opt.value();
  });
  BOOST_TEST(nodelay);
}

BOOST_AUTO_TEST_CASE(exchange_endpoints_both_ways) {
  Fixture f;
  std::optional<tcp::acceptor> acceptor;
  const auto where = on_reactor(f.r, [&] {
    acceptor.emplace(f.r.executor(), tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    return acceptor->local_endpoint();
  });
  const Endpoint a = endpoint_with(0x111111, 0xaa);
  const Endpoint b = endpoint_with(0x222222, 0xbb);
  auto server = spawn_future(f.r, "server", [&]() -> asio::awaitable<Expected<Endpoint>> {
    tcp::socket s = co_await acceptor->async_accept(asio::use_awaitable);
    co_return co_await exchange_endpoints(s, kToken, a, 10s);
  });
  auto client = spawn_future(f.r, "client", [&]() -> asio::awaitable<Expected<Endpoint>> {
    auto s = co_await connect_with_retry(where, 10s);
    if (!s) co_return std::move(s).error();
    co_return co_await exchange_endpoints(*s, kToken, b, 10s);
  });
  BOOST_REQUIRE(ready_within(server));
  BOOST_REQUIRE(ready_within(client));
  auto got_by_server = server.get();
  auto got_by_client = client.get();
  BOOST_REQUIRE_MESSAGE(got_by_server.ok(), test::err_msg(got_by_server));
  BOOST_REQUIRE_MESSAGE(got_by_client.ok(), test::err_msg(got_by_client));
  BOOST_TEST(same(*got_by_server, b));
  BOOST_TEST(same(*got_by_client, a));
  on_reactor(f.r, [&] { acceptor.reset(); });
}

BOOST_AUTO_TEST_CASE(exchange_endpoints_rejects_bad_peers) {
  Fixture f;
  // The peer's endpoint is invalid (QP number 0).
  auto invalid = run_co(f.r, []() -> asio::awaitable<Expected<Endpoint>> {
    auto s = co_await connected_pair();
    auto bad = encode_endpoint(endpoint_with(0x1, 0x1));
    bad[0] = 0;  // qpn 0
    (void)co_await write_frame(s.client, static_cast<std::uint16_t>(MsgType::endpoint), kToken, bad, 5s);
    co_return co_await exchange_endpoints(s.server, kToken, endpoint_with(0x2, 0x2), 5s);
  });
  BOOST_TEST((code_of(invalid) == Errc::invalid_argument));
  // The peer reports an error instead.
  auto peer = run_co(f.r, []() -> asio::awaitable<Expected<Endpoint>> {
    auto s = co_await connected_pair();
    const std::string reason = "port down";
    (void)co_await write_frame(s.client, static_cast<std::uint16_t>(MsgType::error), kToken,
                               std::span(reinterpret_cast<const std::uint8_t*>(reason.data()), reason.size()), 5s);
    co_return co_await exchange_endpoints(s.server, kToken, endpoint_with(0x2, 0x2), 5s);
  });
  BOOST_TEST((code_of(peer) == Errc::peer_error));
  // One side was given another token: each side rejects the other's frame.
  auto token = run_co(f.r, []() -> asio::awaitable<std::pair<Expected<Endpoint>, Expected<Frame>>> {
    auto s = co_await connected_pair();
    (void)co_await write_frame(s.server, static_cast<std::uint16_t>(MsgType::endpoint), kToken,
                               encode_endpoint(endpoint_with(0x2, 0x2)), 5s);
    auto x = co_await exchange_endpoints(s.client, kToken + 1, endpoint_with(0x1, 0x1), 5s);
    auto y = co_await read_frame_of(s.server, static_cast<std::uint16_t>(MsgType::endpoint), kToken, 5s);
    co_return std::pair{std::move(x), std::move(y)};
  });
  BOOST_TEST((code_of(token.first) == Errc::bad_token));
  BOOST_TEST((code_of(token.second) == Errc::bad_token));
  // The peer sends the wrong message type.
  auto type = run_co(f.r, []() -> asio::awaitable<Expected<Endpoint>> {
    auto s = co_await connected_pair();
    (void)co_await write_frame(s.client, kAppType, kToken, encode_endpoint(endpoint_with(0x1, 0x1)), 5s);
    co_return co_await exchange_endpoints(s.server, kToken, endpoint_with(0x2, 0x2), 5s);
  });
  BOOST_TEST((code_of(type) == Errc::bad_type));
}

BOOST_AUTO_TEST_CASE(stop_cancels_pending_reads_and_closes_their_sockets) {
  LogCapture log;
  Reactor r;
  r.start();
  // Warm the io_context's descriptors up first.
  run_co(r, []() -> asio::awaitable<void> {
    auto s = co_await connected_pair();
    co_await sleep_for(1ms);
  });
  const int warm_fds = count_fds();
  std::atomic<int> waiting{0};
  std::vector<std::future<Expected<Frame>>> reads;
  for (int i = 0; i < 3; ++i)
    reads.push_back(spawn_future(r, "reader", [&waiting]() -> asio::awaitable<Expected<Frame>> {
      auto s = co_await connected_pair();
      waiting.fetch_add(1);
      co_return co_await read_frame(s.server, kToken, std::chrono::hours(1));
    }));
  auto connecting = spawn_future(r, "connector", [&waiting]() -> asio::awaitable<Expected<tcp::socket>> {
    waiting.fetch_add(1);
    co_return co_await connect_with_retry(tcp::endpoint(asio::ip::address_v4::loopback(), unused_port()),
                                          std::chrono::hours(1), 10ms);
  });
  BOOST_REQUIRE(wait_until([&] { return waiting.load() == 4; }));
  BOOST_TEST(count_fds() >= warm_fds + 6);  // three socket pairs at least
  r.stop(std::chrono::seconds(20));
  BOOST_TEST(!log.contains(LogLevel::warn, {"did not finish"}), log.dump());
  BOOST_TEST(r.live_tasks() == 0u);
  for (auto& fut : reads) {
    BOOST_REQUIRE(ready_within(fut, 0ms));
    // Cancelled: either an exception or an error value, never a frame.
    try {
      auto res = fut.get();
      BOOST_TEST(!res.ok());
    } catch (const boost::system::system_error& e) {
      BOOST_TEST(e.code() == asio::error::operation_aborted);
    }
  }
  BOOST_REQUIRE(ready_within(connecting, 0ms));
  try {
    auto res = connecting.get();
    BOOST_TEST(!res.ok());
  } catch (const boost::system::system_error& e) {
    BOOST_TEST(e.code() == asio::error::operation_aborted);
  }
  BOOST_TEST(count_fds() == warm_fds);  // every socket the coroutines held is closed
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(handshake_resolve)

BOOST_AUTO_TEST_CASE(numeric_addresses_with_and_without_port) {
  auto a = resolve_endpoint("127.0.0.1", 4000);
  BOOST_REQUIRE(a.ok());
  BOOST_TEST(a->address().to_string() == "127.0.0.1");
  BOOST_TEST(a->port() == 4000);
  auto b = resolve_endpoint("10.1.2.3:5000", 4000);
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(b->address().to_string() == "10.1.2.3");
  BOOST_TEST(b->port() == 5000);
  auto c = resolve_endpoint("127.0.0.1:65535", 1);
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(c->port() == 65535);
  auto d = resolve_endpoint("127.0.0.1:1", 2);
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(d->port() == 1);
}

BOOST_AUTO_TEST_CASE(bare_ipv6_addresses_use_the_default_port) {
  auto a = resolve_endpoint("::1", 4000);
  BOOST_REQUIRE(a.ok());
  BOOST_TEST(a->address().is_v6());
  BOOST_TEST(a->address().is_loopback());
  BOOST_TEST(a->port() == 4000);
  auto b = resolve_endpoint("fe80::1:2", 4001);
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(b->address().to_string() == "fe80::1:2");
  BOOST_TEST(b->port() == 4001);
}

BOOST_AUTO_TEST_CASE(host_names_resolve) {
  auto a = resolve_endpoint("localhost:7000", 1);
  BOOST_REQUIRE_MESSAGE(a.ok(), test::err_msg(a));
  BOOST_TEST(a->address().is_loopback());
  BOOST_TEST(a->port() == 7000);
  auto b = resolve_endpoint("localhost", 7001);
  BOOST_REQUIRE_MESSAGE(b.ok(), test::err_msg(b));
  BOOST_TEST(b->port() == 7001);
}

BOOST_AUTO_TEST_CASE(host_port_split_is_pure) {
  auto a = parse_host_port("node7:18700", 1);
  BOOST_REQUIRE_MESSAGE(a.ok(), test::err_msg(a));
  BOOST_TEST(a->host == "node7");
  BOOST_TEST(a->port == 18700);
  auto b = parse_host_port("fe80::1:2", 9);  // more than one ':': a bare IPv6 address
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(b->host == "fe80::1:2");
  BOOST_TEST(b->port == 9);
  for (const char* spec : {"", ":80", ":"}) {
    auto r = parse_host_port(spec, 4000);
    BOOST_TEST((!r.ok() && r.error().code == Errc::invalid_argument), "'" << spec << "'");
  }
}

BOOST_AUTO_TEST_CASE(bad_ports_are_invalid_arguments) {
  for (const char* spec : {"127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:", "127.0.0.1:abc",
                           "127.0.0.1:80x", "127.0.0.1:8 0", "127.0.0.1: 80", "127.0.0.1:0x50",
                           "127.0.0.1:99999999999999999999", "localhost:80abc"}) {
    auto r = resolve_endpoint(spec, 4000);
    BOOST_TEST(!r.ok(), "'" << spec << "' accepted as port " << (r.ok() ? r->port() : 0));
    if (!r.ok()) BOOST_TEST((r.error().code == Errc::invalid_argument), spec);
  }
}

BOOST_AUTO_TEST_SUITE_END()
