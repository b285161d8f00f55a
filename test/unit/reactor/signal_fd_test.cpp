// FdWatcher (eventfd / pipe standing in for a completion channel) and AsyncSignal.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <cstdint>
#include <optional>

#include "nccl_ha/reactor/fd_watcher.hpp"
#include "nccl_ha/reactor/reactor.hpp"
#include "nccl_ha/reactor/signal.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::reactor;
using namespace nccl_ha::test;
using boost::system::error_code;

namespace {

struct Fixture {
  LogCapture log;
  Reactor r;
  int efd = ::eventfd(0, EFD_CLOEXEC);
  Fixture() {
    BOOST_REQUIRE(efd >= 0);
    r.start();
  }
  ~Fixture() {
    r.stop();
    ::close(efd);
  }
};

void signal_eventfd(int fd, std::uint64_t n = 1) {
  BOOST_REQUIRE(::write(fd, &n, sizeof n) == static_cast<ssize_t>(sizeof n));
}

std::uint64_t drain_eventfd(int fd) {
  std::uint64_t v = 0;
  if (::read(fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return 0;
  return v;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fd_watcher)

BOOST_AUTO_TEST_CASE(set_nonblocking_sets_the_flag_and_reports_bad_fds) {
  int fd = ::eventfd(0, EFD_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  BOOST_TEST((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
  BOOST_TEST(set_nonblocking(fd));
  BOOST_TEST((::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
  BOOST_TEST(set_nonblocking(fd));  // idempotent
  ::close(fd);
  errno = 0;
  BOOST_TEST(!set_nonblocking(-1));
  BOOST_TEST(errno == EBADF);
}

BOOST_AUTO_TEST_CASE(readable_completes_when_an_eventfd_is_signalled) {
  Fixture f;
  std::atomic<bool> waiting{false};
  auto fut = spawn_future(f.r, "wait", [&]() -> asio::awaitable<error_code> {
    FdWatcher w(co_await asio::this_coro::executor, f.efd);
    waiting = true;
    co_return co_await w.readable();
  });
  BOOST_REQUIRE(wait_until([&] { return waiting.load(); }));
  BOOST_TEST((fut.wait_for(50ms) == std::future_status::timeout));  // nothing to read yet
  signal_eventfd(f.efd);
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(!fut.get());
  BOOST_TEST((::fcntl(f.efd, F_GETFL) & O_NONBLOCK) != 0);  // switched to non-blocking
  BOOST_TEST(drain_eventfd(f.efd) == 1u);                   // the watcher consumed nothing
}

BOOST_AUTO_TEST_CASE(readable_completes_for_a_pipe) {
  Fixture f;
  int p[2];
  BOOST_REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  std::atomic<bool> waiting{false};
  auto fut = spawn_future(f.r, "pipe wait", [&]() -> asio::awaitable<error_code> {
    FdWatcher w(co_await asio::this_coro::executor, p[0]);
    waiting = true;
    co_return co_await w.readable();
  });
  BOOST_REQUIRE(wait_until([&] { return waiting.load(); }));
  BOOST_REQUIRE(::write(p[1], "x", 1) == 1);
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(!fut.get());
  ::close(p[0]);
  ::close(p[1]);
}

BOOST_AUTO_TEST_CASE(repeated_wait_drain_cycles) {
  Fixture f;
  std::atomic<int> waits{0};
  auto fut = spawn_future(f.r, "cycles", [&]() -> asio::awaitable<int> {
    FdWatcher w(co_await asio::this_coro::executor, f.efd);
    int ok = 0;
    for (int i = 0; i < 5; ++i) {
      waits.fetch_add(1);
      auto ec = co_await w.readable();
      if (!ec && drain_eventfd(f.efd) == static_cast<std::uint64_t>(i + 1)) ++ok;
    }
    co_return ok;
  });
  for (int i = 0; i < 5; ++i) {
    BOOST_REQUIRE(wait_until([&] { return waits.load() == i + 1; }));
    signal_eventfd(f.efd, static_cast<std::uint64_t>(i + 1));
  }
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(fut.get() == 5);
}

BOOST_AUTO_TEST_CASE(readable_completes_when_the_fd_is_already_readable) {
  // "Completes when the fd is readable": readiness that arrived while nobody was waiting (and
  // that the reactor has already seen) must not be lost.
  Fixture f;
  std::optional<FdWatcher> w;
  on_reactor(f.r, [&] { w.emplace(f.r.executor(), f.efd); });
  signal_eventfd(f.efd);
  // Let the reactor run its epoll loop a few times with no wait pending.
  run_co(f.r, []() -> asio::awaitable<void> {
    for (int i = 0; i < 3; ++i) co_await sleep_for(5ms);
  });
  auto fut = spawn_future(f.r, "late wait", [&]() -> asio::awaitable<error_code> { co_return co_await w->readable(); });
  const bool completed = ready_within(fut, 10s);
  BOOST_TEST(completed, "readable() missed readiness that was already there");
  if (!completed) on_reactor(f.r, [&] { w->cancel(); });
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(!fut.get());
  on_reactor(f.r, [&] { w.reset(); });
}

BOOST_AUTO_TEST_CASE(cancel_aborts_a_pending_wait) {
  Fixture f;
  std::optional<FdWatcher> w;
  on_reactor(f.r, [&] { w.emplace(f.r.executor(), f.efd); });
  std::atomic<bool> waiting{false};
  auto fut = spawn_future(f.r, "cancelled", [&]() -> asio::awaitable<error_code> {
    waiting = true;
    co_return co_await w->readable();
  });
  BOOST_REQUIRE(wait_until([&] { return waiting.load(); }));
  f.r.post([&] { w->cancel(); });
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(fut.get() == asio::error::operation_aborted);
  on_reactor(f.r, [&] { w.reset(); });
}

BOOST_AUTO_TEST_CASE(destroying_the_watcher_keeps_the_fd_open) {
  Fixture f;
  const int watched = on_reactor(f.r, [&] {
    FdWatcher w(f.r.executor(), f.efd);
    return w.fd();
  });
  BOOST_TEST(watched == f.efd);
  BOOST_TEST(::fcntl(f.efd, F_GETFD) >= 0);
  signal_eventfd(f.efd, 3);
  BOOST_TEST(drain_eventfd(f.efd) == 3u);
  // And it can be watched again by a new watcher.
  std::atomic<bool> waiting{false};
  auto fut = spawn_future(f.r, "rewatch", [&]() -> asio::awaitable<error_code> {
    FdWatcher w2(co_await asio::this_coro::executor, f.efd);
    waiting = true;
    co_return co_await w2.readable();
  });
  BOOST_REQUIRE(wait_until([&] { return waiting.load(); }));
  signal_eventfd(f.efd);
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(!fut.get());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(async_signal)

BOOST_AUTO_TEST_CASE(wait_times_out_with_false) {
  Fixture f;
  auto [result, waited] = run_co(f.r, []() -> asio::awaitable<std::pair<bool, long long>> {
    AsyncSignal s(co_await asio::this_coro::executor);
    const auto t0 = Clock::now();
    bool r = co_await s.wait(40ms);
    co_return std::pair{r, ms_since(t0)};
  });
  BOOST_TEST(!result);
  BOOST_TEST(waited >= 40);
}

BOOST_AUTO_TEST_CASE(notify_before_wait_is_remembered_once) {
  Fixture f;
  auto [first, second] = run_co(f.r, []() -> asio::awaitable<std::pair<bool, bool>> {
    AsyncSignal s(co_await asio::this_coro::executor);
    s.notify();
    s.notify();  // not counted: one pending flag
    bool a = co_await s.wait(std::chrono::hours(1));  // must not wait an hour
    bool b = co_await s.wait(10ms);
    co_return std::pair{a, b};
  });
  BOOST_TEST(first);
  BOOST_TEST(!second);
}

BOOST_AUTO_TEST_CASE(notify_wakes_a_waiter) {
  Fixture f;
  std::optional<AsyncSignal> s;
  on_reactor(f.r, [&] { s.emplace(f.r.executor()); });
  std::atomic<bool> waiting{false};
  auto fut = spawn_future(f.r, "waiter", [&]() -> asio::awaitable<bool> {
    waiting = true;
    co_return co_await s->wait(std::chrono::hours(1));
  });
  BOOST_REQUIRE(wait_until([&] { return waiting.load(); }));
  BOOST_TEST((fut.wait_for(20ms) == std::future_status::timeout));
  f.r.post([&] { s->notify(); });
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(fut.get());
  on_reactor(f.r, [&] { s.reset(); });
}

BOOST_AUTO_TEST_CASE(a_cancelled_waiter_throws_operation_aborted) {
  LogCapture log;
  Reactor r;
  r.start();
  std::atomic<bool> waiting{false};
  auto fut = spawn_future(r, "cancelled waiter", [&]() -> asio::awaitable<bool> {
    AsyncSignal s(co_await asio::this_coro::executor);
    waiting = true;
    co_return co_await s.wait(std::chrono::hours(1));
  });
  BOOST_REQUIRE(wait_until([&] { return waiting.load(); }));
  r.stop(std::chrono::seconds(20));
  BOOST_REQUIRE(ready_within(fut, 0ms));
  try {
    (void)fut.get();
    BOOST_FAIL("wait() returned instead of throwing");
  } catch (const boost::system::system_error& e) {
    BOOST_TEST(e.code() == asio::error::operation_aborted);
  }
}

BOOST_AUTO_TEST_SUITE_END()
