// ha-net-driver's management port (item 6 of issue 31): rank 0 takes as rank 1 only a connection
// that proves the shared token, drops strangers (silent, garbage, half a header, a wrong token)
// without being held by them, and keeps waiting for the real peer until its timeout; rank 1 refuses
// a rank 0 that does not prove the token. Both ranks run in this process, over 127.0.0.1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "common.hpp"
#include "mgmt.hpp"
#include "mgmt_auth.hpp"
#include "unique_fd.hpp"

namespace {

using hnd::Fail;
using hnd::Mgmt;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Rank 0 in a thread: accept_peer on 127.0.0.1, port 0, the bound port read from its port file.
struct Rank0 {
  std::string port_file;
  std::future<std::optional<Mgmt>> result;
  std::uint16_t port = 0;

  Rank0(const std::string& token, double timeout_s) {
    char tmpl[] = "/tmp/hnd-mgmt-auth-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    BOOST_REQUIRE(fd >= 0);
    ::close(fd);
    ::unlink(tmpl);
    port_file = tmpl;
    result = std::async(std::launch::async, [this, token, timeout_s] {
      return std::optional<Mgmt>(Mgmt::accept_peer("127.0.0.1", 0, port_file, timeout_s, token));
    });
    for (int i = 0; i < 200 && port == 0; ++i) {
      std::ifstream f(port_file);
      unsigned p = 0;
      if (f >> p) port = static_cast<std::uint16_t>(p);
      else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    BOOST_REQUIRE(port != 0);
  }
  ~Rank0() { std::remove(port_file.c_str()); }
};

// A raw TCP connection to 127.0.0.1:port (a stranger).
hnd::UniqueFd raw_connect(std::uint16_t port) {
  hnd::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// The DriverError a call throws (its kind and message).
template <class F>
std::pair<Fail, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const hnd::DriverError& e) {
    return {e.kind, e.what()};
  }
  BOOST_ERROR("expected a DriverError");
  return {Fail::ok, ""};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(driver_mgmt_auth)

BOOST_AUTO_TEST_CASE(same_token_connects_and_talks) {
  for (const std::string token : {"s3cret", ""}) {  // "": no token on either side, as before
    Rank0 r0(token, 10);
    Mgmt m1 = Mgmt::connect_peer("127.0.0.1", r0.port, 10, token);
    std::optional<Mgmt> m0 = r0.result.get();
    BOOST_REQUIRE(m0.has_value());
    m1.send(hnd::MsgType::hello, "rank=1\n");
    BOOST_TEST(m0->recv(hnd::MsgType::hello, hnd::Deadline(5), "hello") == "rank=1\n");
  }
}

BOOST_AUTO_TEST_CASE(wrong_token_is_refused_and_rank0_waits_for_the_real_peer) {
  Rank0 r0("s3cret", 15);
  for (const std::string wrong : {"other", ""}) {
    auto [kind, what] = error_of([&] { Mgmt::connect_peer("127.0.0.1", r0.port, 10, wrong); });
    BOOST_TEST((kind == Fail::usage));
    BOOST_TEST(contains(what, "authentication failed: rank 0 refused this rank's proof"), what);
  }
  Mgmt m1 = Mgmt::connect_peer("127.0.0.1", r0.port, 10, "s3cret");
  BOOST_TEST(r0.result.get().has_value());
}

BOOST_AUTO_TEST_CASE(strangers_do_not_hold_rank0) {
  Rank0 r0("s3cret", 15);
  hnd::UniqueFd silent = raw_connect(r0.port);  // says nothing, stays open
  hnd::UniqueFd garbage = raw_connect(r0.port);
  const std::string http = "GET / HTTP/1.0\r\n\r\n";
  BOOST_REQUIRE(::send(garbage.get(), http.data(), http.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(http.size()));
  hnd::UniqueFd half = raw_connect(r0.port);
  BOOST_REQUIRE(::send(half.get(), "\0\0\0\13", 4, MSG_NOSIGNAL) == 4);  // half an auth_proof header
  std::vector<hnd::UniqueFd> more;  // more strangers than rank 0 checks at once
  for (std::size_t i = 0; i < hnd::kMaxPendingPeers + 4; ++i) more.push_back(raw_connect(r0.port));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = Clock::now();
  Mgmt m1 = Mgmt::connect_peer("127.0.0.1", r0.port, 15, "s3cret");
  BOOST_TEST(r0.result.get().has_value());
  // Behind more silent strangers than rank 0 checks at once: admitted without waiting for their steps.
  const double waited = seconds_since(t0);
  BOOST_TEST(waited < 2.0, "rank 1 was admitted after " << waited << " s");
  // The garbage connection was closed by rank 0 (EOF after its challenge).
  char buf[256];
  ssize_t n = 0, total = 0;
  while ((n = ::recv(garbage.get(), buf, sizeof buf, 0)) > 0) total += n;
  BOOST_TEST(n == 0);
  BOOST_TEST(total == static_cast<ssize_t>(hnd::wire::kHeaderSize + hnd::wire::kChallengeSize));  // the challenge only
}

BOOST_AUTO_TEST_CASE(silent_stranger_is_dropped_after_its_step) {
  Rank0 r0("s3cret", 20);
  hnd::UniqueFd silent = raw_connect(r0.port);
  const auto t0 = Clock::now();
  char buf[256];
  while (::recv(silent.get(), buf, sizeof buf, 0) > 0) {
  }
  const double held = seconds_since(t0);
  BOOST_TEST(held >= hnd::kAuthStepS - 0.5);
  BOOST_TEST(held < hnd::kAuthStepS + 2);
  Mgmt m1 = Mgmt::connect_peer("127.0.0.1", r0.port, 10, "s3cret");
  BOOST_TEST(r0.result.get().has_value());
}

BOOST_AUTO_TEST_CASE(no_real_peer_times_out_naming_the_drops) {
  Rank0 r0("s3cret", 1.5);
  { hnd::UniqueFd gone = raw_connect(r0.port); }
  hnd::UniqueFd silent = raw_connect(r0.port);
  auto [kind, what] = error_of([&] { r0.result.get(); });
  BOOST_TEST((kind == Fail::timeout));
  BOOST_TEST(contains(what, "timeout after 1.5 s waiting for rank 1 on port " + std::to_string(r0.port)), what);
  BOOST_TEST(contains(what, "connections dropped: 1 closed, 1 silent"), what);
}

BOOST_AUTO_TEST_CASE(rank1_refuses_a_rank0_without_the_token) {
  // A fake rank 0: a challenge, then a forged proof.
  hnd::UniqueFd lfd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(lfd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(lfd.get(), 4) == 0);
  socklen_t al = sizeof a;
  ::getsockname(lfd.get(), reinterpret_cast<sockaddr*>(&a), &al);
  const std::uint16_t port = ntohs(a.sin_port);
  auto fake = std::async(std::launch::async, [&] {
    hnd::UniqueFd fd(::accept(lfd.get(), nullptr, nullptr));
    const std::string msg = hnd::wire::encode(hnd::MsgType::auth_challenge, hnd::wire::encode_challenge({})) +
                            hnd::wire::encode(hnd::MsgType::auth_ok, hnd::wire::encode_ok({}));
    (void)::send(fd.get(), msg.data(), msg.size(), MSG_NOSIGNAL);
    char buf[256];
    while (::recv(fd.get(), buf, sizeof buf, 0) > 0) {
    }
  });
  auto [kind, what] = error_of([&] { Mgmt::connect_peer("127.0.0.1", port, 5, "s3cret"); });
  BOOST_TEST((kind == Fail::usage));
  BOOST_TEST(contains(what, "does not prove this rank's token"), what);
  fake.get();
}

BOOST_AUTO_TEST_SUITE_END()
