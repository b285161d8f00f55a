// Who may talk to the plugin (handshake_auth.hpp, admission.hpp, rescue_wire.hpp): the proofs, the
// sealed frames, replays, and the admission of unproven sockets, over real loopback TCP where a
// socket is involved.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "ha/rescue_wire.hpp"
#include "nccl_ha/net/auth.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "runtime/admission.hpp"
#include "setup/handle.hpp"
#include "setup/handshake_auth.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using namespace nccl_ha::test;
namespace hs = nccl_ha::plugin::hs;
using tcp = boost::asio::ip::tcp;
using Bytes = std::vector<std::uint8_t>;

namespace {

constexpr std::uint64_t kId = 0x1d1d1d1d2e2e2e2eull;

net::Key key_of(std::uint8_t b) {
  net::Key k;
  k.fill(b);
  return k;
}

struct Fixture {
  LogCapture log;
  Reactor r;
  Fixture() { r.start(); }
};

struct Pair {
  tcp::socket client;
  tcp::socket server;
};

// A connected loopback pair; the client bound to `from` (any 127/8 address is this host).
asio::awaitable<Pair> connected_pair(const char* from = "127.0.0.1") {
  auto ex = co_await asio::this_coro::executor;
  tcp::acceptor acceptor(ex, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket client(ex);
  client.open(tcp::v4());
  client.bind(tcp::endpoint(asio::ip::make_address(from), 0));
  co_await client.async_connect(acceptor.local_endpoint(), asio::use_awaitable);
  tcp::socket server = co_await acceptor.async_accept(asio::use_awaitable);
  co_return Pair{std::move(client), std::move(server)};
}

// Everything `s` receives until the peer closes it (or `limit`): what the other side said.
asio::awaitable<Bytes> read_to_close(tcp::socket& s, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  Bytes got;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    std::uint8_t buf[256];
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    got.insert(got.end(), buf, buf + n);
    if (ec) break;
  }
  co_return got;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

template <class T>
Status status_of(const Expected<T>& e) {
  if (e.ok()) return {};
  return e.error();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(auth_primitives)

BOOST_AUTO_TEST_CASE(the_mac_covers_key_label_every_part_and_where_parts_split) {
  const Bytes ab{'a', 'b'}, c{'c'}, a{'a'}, bc{'b', 'c'};
  const net::Mac m = net::mac(key_of(1), "label", {ab, c});
  BOOST_TEST((m == net::mac(key_of(1), "label", {ab, c})));
  BOOST_TEST((m != net::mac(key_of(2), "label", {ab, c})));
  BOOST_TEST((m != net::mac(key_of(1), "label2", {ab, c})));
  BOOST_TEST((m != net::mac(key_of(1), "label", {a, bc})));  // same bytes, another split
  BOOST_TEST((m != net::mac(key_of(1), "label", {ab})));
  BOOST_TEST(net::mac_equal(m, m));
  Bytes bad(m.begin(), m.end());
  bad[31] ^= 1;
  BOOST_TEST(!net::mac_equal(bad, m));
  BOOST_TEST(net::mac_equal(net::Bytes(m.data(), 16), m, 16));
  BOOST_TEST(!net::mac_equal(net::Bytes(m.data(), 15), m, 16));  // a short tag never verifies
}

BOOST_AUTO_TEST_CASE(random_keys_are_never_zero_and_differ) {
  const net::Key a = net::random_key(), b = net::random_key();
  BOOST_TEST(!net::all_zero(a));
  BOOST_TEST((a != b));
  BOOST_TEST((net::random_nonce() != net::random_nonce()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hello_proofs)

BOOST_AUTO_TEST_CASE(a_hello_proves_the_secret_for_one_listener_only) {
  const net::Nonce nc = net::random_nonce();
  const Bytes hello = hs::make_hello(key_of(7), kId, nc);
  BOOST_TEST(hello.size() == hs::kHelloSize);
  const auto got = hs::check_hello(key_of(7), kId, hello);
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST((*got == nc));
  BOOST_TEST(!hs::check_hello(key_of(8), kId, hello).has_value());      // another secret
  BOOST_TEST(!hs::check_hello(key_of(7), kId + 1, hello).has_value());  // another listener
  for (std::size_t i = 0; i < hello.size(); ++i) {
    Bytes t = hello;
    t[i] ^= 0x40;
    BOOST_TEST(!hs::check_hello(key_of(7), kId, t).has_value(), "byte " << i);
  }
  BOOST_TEST(!hs::check_hello(key_of(7), kId, Bytes(hello.begin(), hello.end() - 1)).has_value());
  BOOST_TEST(!hs::check_hello(key_of(7), kId, Bytes(hs::kHelloSize, 0)).has_value());
}

BOOST_AUTO_TEST_CASE(the_reply_answers_one_hello_and_is_not_a_hello) {
  const net::Nonce nc = net::random_nonce(), nl = net::random_nonce();
  const Bytes reply = hs::make_hello_reply(key_of(7), kId, nc, nl);
  const auto got = hs::check_hello_reply(key_of(7), kId, nc, reply);
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST((*got == nl));
  BOOST_TEST(!hs::check_hello_reply(key_of(7), kId, net::random_nonce(), reply).has_value());  // another hello's
  BOOST_TEST(!hs::check_hello(key_of(7), kId, reply).has_value());  // reflected back as a hello
  BOOST_TEST(!hs::check_hello_reply(key_of(7), kId, nc, hs::make_hello(key_of(7), kId, nc)).has_value());
  const auto k1 = hs::derive_keys(key_of(7), kId, nc, nl), k2 = hs::derive_keys(key_of(7), kId, nc, net::random_nonce());
  BOOST_TEST((k1.session != k1.rescue));
  BOOST_TEST((k1.session != k2.session));  // every conversation has keys of its own
  BOOST_TEST((k1.rescue != k2.rescue));
}

BOOST_AUTO_TEST_CASE(the_nonce_log_refuses_replays_and_forgets_only_the_oldest) {
  hs::NonceLog log;
  const net::Nonce first = net::random_nonce();
  BOOST_TEST(log.first_time(first));
  BOOST_TEST(!log.first_time(first));
  for (std::size_t i = 0; i < hs::NonceLog::kNonceMemory - 1; ++i) BOOST_TEST_REQUIRE(log.first_time(net::random_nonce()));
  BOOST_TEST(!log.first_time(first));  // still among the last kNonceMemory
  BOOST_TEST(log.first_time(net::random_nonce()));
  BOOST_TEST(log.first_time(first));  // forgotten: the oldest went first
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sealed_frames)

BOOST_AUTO_TEST_CASE(frames_open_only_in_order_from_the_other_end_under_the_session_key) {
  Fixture f;
  run_co(f.r, []() -> asio::awaitable<void> {
    auto p = co_await connected_pair();
    hs::Channel conn(p.client, key_of(3), kId, true), lis(p.server, key_of(3), kId, false);
    const Bytes payload{1, 2, 3, 4};
    // In order, both ways.
    BOOST_TEST((co_await conn.send(0x200, payload, 5s)).ok());
    auto got = co_await lis.recv_of(0x200, 5s);
    BOOST_REQUIRE_MESSAGE(got.ok(), test::err_msg(got));
    BOOST_TEST(got->payload == payload, boost::test_tools::per_element());
    BOOST_TEST((co_await lis.send(0x201, payload, 5s)).ok());
    BOOST_TEST((co_await conn.recv_of(0x201, 5s)).ok());
    co_return;
  });
  // Pure: tampering, reordering, reflection and another session's key.
  asio::io_context io;
  tcp::socket s1(io), s2(io), s3(io);
  hs::Channel a(s1, key_of(3), kId, true), b(s2, key_of(3), kId, false), other(s3, key_of(4), kId, false);
  auto frame_of = [](const Bytes& bytes) {
    auto fr = net::decode_frame(bytes, kId);
    BOOST_REQUIRE_MESSAGE(fr.ok(), test::err_msg(fr));
    return std::move(fr).value();
  };
  const Bytes f0 = a.seal(0x200, Bytes{9, 9}), f1 = a.seal(0x202, Bytes{8});
  Bytes tampered = f0;
  tampered[net::kHeaderSize] ^= 1;
  BOOST_TEST(!b.open(frame_of(tampered)).ok());
  Bytes retyped = f0;
  retyped[6] = 0x01;  // the type is covered too
  BOOST_TEST(!b.open(frame_of(retyped)).ok());
  BOOST_TEST(!other.open(frame_of(f0)).ok());  // another session
  BOOST_TEST(!b.open(frame_of(f1)).ok());      // the second frame first: out of order
  BOOST_TEST(b.open(frame_of(f0)).ok());
  BOOST_TEST(!b.open(frame_of(f0)).ok());  // replayed within the session
  BOOST_TEST(b.open(frame_of(f1)).ok());
  hs::Channel a2(s3, key_of(3), kId, true);
  BOOST_TEST(!a2.open(frame_of(a.seal(0x200, Bytes{1}))).ok());  // a connector's frame reflected to a connector
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hello_over_sockets)

BOOST_AUTO_TEST_CASE(connector_and_listener_agree_on_keys) {
  Fixture f;
  auto [c, l] = run_co(f.r, []() -> asio::awaitable<std::pair<Expected<hs::SessionKeys>, Expected<hs::SessionKeys>>> {
    using namespace asio::experimental::awaitable_operators;
    auto p = co_await connected_pair();
    hs::NonceLog log;
    auto [conn, lis] = co_await (hs::connector_hello(p.client, key_of(5), kId, 5s) &&
                                 hs::listener_hello(p.server, key_of(5), kId, log, 5s));
    co_return std::pair{std::move(conn), std::move(lis)};
  });
  BOOST_REQUIRE_MESSAGE(c.ok(), test::err_msg(c));
  BOOST_REQUIRE_MESSAGE(l.ok(), test::err_msg(l));
  BOOST_TEST((c->session == l->session));
  BOOST_TEST((c->rescue == l->rescue));
}

// What the listener says to a connection that does not prove the secret: nothing at all.
BOOST_AUTO_TEST_CASE(a_listener_says_nothing_to_a_socket_without_the_proof) {
  Fixture f;
  struct Case {
    const char* name;
    Bytes bytes;
  };
  const net::Nonce nc = net::random_nonce();
  std::vector<Case> cases = {
      {"garbage", Bytes(24, 0xff)},
      {"an http request", Bytes{'G', 'E', 'T', ' ', '/', '\r', '\n', '\r', '\n'}},
      {"a hello under another secret",
       net::encode_frame(static_cast<std::uint16_t>(HandshakeMsg::hello), kId, hs::make_hello(key_of(6), kId, nc))},
      {"a hello for another listener",
       net::encode_frame(static_cast<std::uint16_t>(HandshakeMsg::hello), kId + 1, hs::make_hello(key_of(5), kId + 1, nc))},
      {"a conn_request first", net::encode_frame(static_cast<std::uint16_t>(HandshakeMsg::conn_request), kId, Bytes(136, 0))},
      {"a header announcing 1 MiB", Bytes{}},
      {"silence", Bytes{}},
  };
  {
    Bytes big = net::encode_frame(static_cast<std::uint16_t>(HandshakeMsg::hello), kId, {});
    const std::uint32_t len = 1u << 20;
    std::memcpy(big.data() + 8, &len, 4);
    cases[5].bytes = big;
  }
  for (const auto& k : cases) {
    BOOST_TEST_CONTEXT(k.name) {
      auto [result, heard, ms] = run_co(f.r, [&k]() -> asio::awaitable<std::tuple<Status, Bytes, long long>> {
        auto p = co_await connected_pair();
        hs::NonceLog log;
        const auto t0 = Clock::now();
        if (!k.bytes.empty()) co_await asio::async_write(p.client, asio::buffer(k.bytes), asio::use_awaitable);
        auto r = co_await hs::listener_hello(p.server, key_of(5), kId, log, 300ms);
        const long long took = ms_since(t0);
        const Status st = status_of(r);
        p.server.close();  // what the caller does on an error
        Bytes said = co_await read_to_close(p.client);
        co_return std::tuple{st, std::move(said), took};
      });
      BOOST_TEST(!result.ok());
      BOOST_TEST(heard.size() == 0u);
      BOOST_TEST(ms < 3000);  // within the deadline (300 ms) and scheduling slack
    }
  }
}

BOOST_AUTO_TEST_CASE(a_replayed_hello_gets_no_answer) {
  Fixture f;
  auto [first, replay, heard] = run_co(f.r, []() -> asio::awaitable<std::tuple<Status, Status, Bytes>> {
    hs::NonceLog log;  // one listener's
    const Bytes hello =
        net::encode_frame(static_cast<std::uint16_t>(HandshakeMsg::hello), kId, hs::make_hello(key_of(5), kId, net::random_nonce()));
    auto p1 = co_await connected_pair();
    co_await asio::async_write(p1.client, asio::buffer(hello), asio::use_awaitable);
    auto r1 = co_await hs::listener_hello(p1.server, key_of(5), kId, log, 1s);
    auto p2 = co_await connected_pair();
    co_await asio::async_write(p2.client, asio::buffer(hello), asio::use_awaitable);  // the capture, verbatim
    auto r2 = co_await hs::listener_hello(p2.server, key_of(5), kId, log, 1s);
    p2.server.close();
    // (no co_await inside an expression with conditionals: GCC 12 miscompiles that)
    const Status s1 = status_of(r1), s2 = status_of(r2);
    Bytes said = co_await read_to_close(p2.client);
    co_return std::tuple{s1, s2, std::move(said)};
  });
  BOOST_TEST(first.ok());
  BOOST_TEST(!replay.ok());
  if (!replay.ok()) BOOST_TEST(replay.error().message.find("replayed") != std::string::npos, replay.error().message);
  BOOST_TEST(heard.size() == 0u);
}

// The listener's process busy past its deadline (a starved host reading a burst): the deadline's
// timer has fired, its completion waits behind other work, and the connector's hello arrives
// before it runs. A whole hello in the buffer is still read; half of one is not waited for.
// (How it is staged: this handler blocks the progress thread past the deadline, then posts the
// write; Asio's scheduler runs its reactor, which queues the timer's completion, before the post.)
BOOST_AUTO_TEST_CASE(a_hello_waiting_in_the_buffer_when_the_deadline_fires_is_read) {
  Fixture f;
  for (const bool whole : {true, false}) {
    BOOST_TEST_CONTEXT((whole ? "a whole hello" : "half a hello")) {
      auto got = run_co(f.r, [whole]() -> asio::awaitable<Status> {
        auto ex = co_await asio::this_coro::executor;
        auto p = co_await connected_pair();
        auto log = std::make_shared<hs::NonceLog>();
        auto result = std::make_shared<std::optional<Status>>();
        asio::co_spawn(ex, [&p, log, result]() -> asio::awaitable<void> {
          auto r = co_await hs::read_hello(p.server, key_of(5), kId, *log, 100ms);
          result->emplace(status_of(r));
        }, asio::detached);
        co_await sleep_for(20ms);  // read_hello waits for the hello
        std::this_thread::sleep_for(300ms);  // busy past the deadline
        Bytes hello = net::encode_frame(static_cast<std::uint16_t>(HandshakeMsg::hello), kId,
                                        hs::make_hello(key_of(5), kId, net::random_nonce()));
        if (!whole) hello.resize(hello.size() / 2);
        asio::post(ex, [&p, hello] { asio::write(p.client, asio::buffer(hello)); });
        while (!*result) co_await sleep_for(10ms);
        co_return **result;
      });
      BOOST_TEST(got.ok() == whole, (got.ok() ? std::string("read") : got.error().message));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_connector_refuses_a_listener_that_does_not_prove_the_secret) {
  Fixture f;
  auto r = run_co(f.r, []() -> asio::awaitable<Expected<hs::SessionKeys>> {
    using namespace asio::experimental::awaitable_operators;
    auto p = co_await connected_pair();
    // An impostor listener: answers with a reply made under another secret.
    auto impostor = [](tcp::socket& s) -> asio::awaitable<void> {
      auto hello = co_await net::read_frame(s, kId, 5s, hs::kHelloSize);
      if (!hello) co_return;
      net::Nonce nc;
      std::memcpy(nc.data(), hello->payload.data(), nc.size());
      auto reply = hs::make_hello_reply(key_of(9), kId, nc, net::random_nonce());
      (void)co_await net::write_frame(s, static_cast<std::uint16_t>(HandshakeMsg::hello_reply), kId, reply, 5s);
    };
    co_return co_await (hs::connector_hello(p.client, key_of(5), kId, 5s) && impostor(p.server));
  });
  BOOST_TEST(!r.ok());
}

// A listener that closes a connection before it read the proof (its unproven places were taken:
// admission.hpp) is connected to again with a new proof; one that keeps closing ends the connect
// after kProofAttempts, with the reason. One that holds the connection without a word (another
// secret's listener) is not tried again: the connect times out.
namespace {
struct ListenerRun {
  Expected<hs::SessionKeys> keys = make_error(Errc::timeout, "not run");
  int accepted = 0;
};
// The listener accepts and closes `closes` connections unread, then runs listener_hello on the
// next under `secret` and holds it; the connector proves `ours` within `timeout`.
ListenerRun run_listener(Fixture& f, int closes, std::uint8_t secret, std::uint8_t ours, std::chrono::milliseconds timeout) {
  return run_co(f.r, [=]() -> asio::awaitable<ListenerRun> {
    auto ex = co_await asio::this_coro::executor;
    auto acceptor = std::make_shared<tcp::acceptor>(ex, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    auto accepted = std::make_shared<int>(0);
    asio::co_spawn(ex, [acceptor, accepted, closes, secret]() -> asio::awaitable<void> {
      hs::NonceLog log;
      std::vector<tcp::socket> held;
      for (;;) {
        auto [ec, s] = co_await acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;
        if (++*accepted <= closes) continue;  // closed unread, as an evicted socket is
        auto k = co_await hs::listener_hello(s, key_of(secret), kId, log, 5s);
        (void)k;
        held.push_back(std::move(s));  // answered or not: held open
      }
    }, asio::detached);
    std::optional<tcp::socket> sock;
    ListenerRun out;
    out.keys = co_await hs::connect_and_prove(sock, acceptor->local_endpoint(), key_of(ours), kId, timeout);
    out.accepted = *accepted;
    acceptor->close();
    co_return out;
  });
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_connector_closed_before_its_proof_was_read_connects_again) {
  Fixture f;
  for (const int closes : {0, 2, hs::kProofAttempts}) {
    const ListenerRun r = run_listener(f, closes, 5, 5, 5s);
    BOOST_TEST_CONTEXT("the listener closes " << closes) {
      if (closes < hs::kProofAttempts) {
        BOOST_TEST(r.keys.ok(), test::err_msg(r.keys));
        BOOST_TEST(r.accepted == closes + 1);
      } else {
        BOOST_REQUIRE(!r.keys.ok());
        BOOST_TEST((r.keys.error().code == Errc::closed));
        BOOST_TEST(r.keys.error().message.find("no answer to our proof") != std::string::npos, r.keys.error().message);
        BOOST_TEST(r.accepted == hs::kProofAttempts);
      }
    }
  }
  const ListenerRun other = run_listener(f, 0, 6, 5, 1500ms);  // another secret's listener: silent
  BOOST_REQUIRE(!other.keys.ok());
  BOOST_TEST((other.keys.error().code == Errc::timeout));
  BOOST_TEST(other.accepted == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(admission)

// Admits every socket of `p` from index `from` on, each from its client's address.
void admit_all(Admission& adm, std::vector<Pair>& p, std::vector<Admission::Ticket>& t, std::size_t from = 0) {
  for (std::size_t i = from; i < p.size(); ++i) t.push_back(adm.admit(p[i].server, p[i].server.remote_endpoint().address()));
}

// Nothing is closed while places are free, however many come from one host (a burst of real
// connectors whose proofs a starved host writes late); proven and destroyed tickets give their
// places back.
BOOST_AUTO_TEST_CASE(a_burst_from_one_host_is_admitted_whole_while_places_are_free) {
  Fixture f;
  run_co(f.r, []() -> asio::awaitable<void> {
    Admission adm(Admission::Limits{6, std::chrono::milliseconds(1000)});
    std::vector<Pair> p;
    p.reserve(8);  // the admission keeps pointers to the sockets
    for (int i = 0; i < 6; ++i) p.push_back(co_await connected_pair("127.0.0.1"));
    std::vector<Admission::Ticket> t;
    admit_all(adm, p, t);
    for (auto& x : p) BOOST_TEST(x.server.is_open());
    BOOST_TEST(adm.held() == 6u);
    BOOST_TEST(adm.counters().evicted == 0u);
    t[0].proven();  // p[0] proved the secret: its place is free, it is never evicted
    BOOST_TEST(adm.held() == 5u);
    BOOST_TEST(adm.counters().proven == 1u);
    p.push_back(co_await connected_pair("127.0.0.2"));
    admit_all(adm, p, t, 6);
    for (auto& x : p) BOOST_TEST(x.server.is_open());
    p.push_back(co_await connected_pair("127.0.0.2"));
    admit_all(adm, p, t, 7);  // full: the oldest silent socket of the source holding most goes
    BOOST_TEST(p[0].server.is_open());
    BOOST_TEST(!p[1].server.is_open());
    BOOST_TEST(adm.held() == 6u);
    BOOST_TEST(adm.counters().evicted == 1u);
    t.clear();  // the handshakes ended
    BOOST_TEST(adm.held() == 0u);
    adm.refused("test", asio::ip::make_address("127.0.0.9"), "why");
    BOOST_TEST(adm.counters().refused == 1u);
    co_return;
  });
}

// A flood from one address, once the places are full, closes its own sockets: the older silent
// sockets of quieter sources (real connectors whose proofs are late) keep their places.
BOOST_AUTO_TEST_CASE(a_flood_closes_its_own_sockets_not_a_quieter_sources) {
  Fixture f;
  run_co(f.r, []() -> asio::awaitable<void> {
    Admission adm(Admission::Limits{4, std::chrono::milliseconds(1000)});
    std::vector<Pair> p;
    p.reserve(12);
    for (const char* from : {"127.0.0.1", "127.0.0.2"}) p.push_back(co_await connected_pair(from));
    std::vector<Admission::Ticket> t;
    admit_all(adm, p, t);
    for (int i = 0; i < 10; ++i) {  // the flood from 127.0.0.3
      p.push_back(co_await connected_pair("127.0.0.3"));
      admit_all(adm, p, t, p.size() - 1);
    }
    BOOST_TEST((p[0].server.is_open() && p[1].server.is_open()));
    for (std::size_t i = 2; i + 2 < p.size(); ++i) BOOST_TEST(!p[i].server.is_open(), "flood socket " << i);
    BOOST_TEST((p[10].server.is_open() && p[11].server.is_open()));  // the flood's newest two
    BOOST_TEST(adm.held() == 4u);
    BOOST_TEST(adm.counters().evicted == 8u);
    co_return;
  });
}

// A socket whose first bytes wait unread (a connector about to prove itself) is kept over older
// silent ones, and over a larger source's silent ones.
BOOST_AUTO_TEST_CASE(a_socket_with_bytes_to_read_is_evicted_last) {
  Fixture f;
  run_co(f.r, []() -> asio::awaitable<void> {
    Admission adm(Admission::Limits{3, std::chrono::milliseconds(1000)});
    std::vector<Pair> p;
    p.reserve(4);
    for (int i = 0; i < 3; ++i) p.push_back(co_await connected_pair());
    const Bytes hello(72, 0x42);
    co_await asio::async_write(p[0].client, asio::buffer(hello), asio::use_awaitable);  // the oldest has spoken
    co_await sleep_for(50ms);
    std::vector<Admission::Ticket> t;
    admit_all(adm, p, t);
    p.push_back(co_await connected_pair());
    admit_all(adm, p, t, 3);
    BOOST_TEST(p[0].server.is_open());   // kept: its bytes wait to be read
    BOOST_TEST(!p[1].server.is_open());  // the oldest silent one made room
    BOOST_TEST((p[2].server.is_open() && p[3].server.is_open()));
    co_return;
  });
}

// Proofs that wait unread (a listener's process slow to read a burst of real connectors) are
// kept however many and however old; when every held socket has spoken, the oldest goes.
BOOST_AUTO_TEST_CASE(when_every_socket_has_spoken_the_oldest_goes) {
  Fixture f;
  run_co(f.r, []() -> asio::awaitable<void> {
    Admission adm(Admission::Limits{5, std::chrono::milliseconds(5000)});
    std::vector<Pair> p;
    p.reserve(6);
    for (int i = 0; i < 5; ++i) p.push_back(co_await connected_pair());
    const Bytes hello(72, 0x42);
    for (auto& x : p) co_await asio::async_write(x.client, asio::buffer(hello), asio::use_awaitable);
    co_await sleep_for(50ms);
    std::vector<Admission::Ticket> t;
    admit_all(adm, p, t);
    for (auto& x : p) BOOST_TEST(x.server.is_open());
    BOOST_TEST(adm.counters().evicted == 0u);
    p.push_back(co_await connected_pair());
    admit_all(adm, p, t, 5);
    BOOST_TEST(!p[0].server.is_open());  // a sixth in all: the oldest goes (none is silent but the newest)
    BOOST_TEST(p[5].server.is_open());
    BOOST_TEST(adm.held() == 5u);
    co_return;
  });
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rescue_frames)

BOOST_AUTO_TEST_CASE(requests_and_answers_carry_the_connections_seal) {
  ReprotectMsg m;
  m.ok = kRescueSlot + 1;
  m.gen = 7;
  seal(m);
  const Bytes req = seal_rescue_request(key_of(1), kId, m);
  BOOST_TEST(req.size() == kRescueRequestSize);
  const auto opened = open_rescue_request(key_of(1), kId, req);
  BOOST_REQUIRE(opened.has_value());
  BOOST_TEST(opened->msg.gen == 7u);
  BOOST_TEST(!open_rescue_request(key_of(2), kId, req).has_value());
  BOOST_TEST(!open_rescue_request(key_of(1), kId + 1, req).has_value());  // named for another comm
  BOOST_TEST(!open_rescue_request(net::Key{}, kId, seal_rescue_request(net::Key{}, kId, m)).has_value());  // no key: nothing
  for (std::size_t i = 0; i < req.size(); i += 7) {
    Bytes t = req;
    t[i] ^= 0x10;
    BOOST_TEST(!open_rescue_request(key_of(1), kId, t).has_value(), "byte " << i);
  }
  const Bytes body(net::bytes_of(m).begin(), net::bytes_of(m).end());
  const Bytes ans = seal_rescue_answer(key_of(1), kId, opened->tag, kRescueMsg, body);
  BOOST_TEST((open_rescue_answer(key_of(1), kId, opened->tag, kRescueMsg, ans) == std::optional<Bytes>(body)));
  BOOST_TEST(!open_rescue_answer(key_of(1), kId, opened->tag, 2, ans).has_value());  // as an error frame
  net::Mac other = opened->tag;
  other[0] ^= 1;
  BOOST_TEST(!open_rescue_answer(key_of(1), kId, other, kRescueMsg, ans).has_value());  // another request's
  BOOST_TEST(!open_rescue_request(key_of(1), kId, ans).has_value());  // an answer is no request
}

BOOST_AUTO_TEST_SUITE_END()
