// Reactor: timers, post/run_sync threading, exception containment, cancellation at stop,
// shutdown with pending work (no leaked threads or fds), restart.
#include <fcntl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nccl_ha/reactor/fd_watcher.hpp"
#include "nccl_ha/reactor/reactor.hpp"
#include "nccl_ha/reactor/signal.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::reactor;
using namespace nccl_ha::test;

namespace {

// The log capture is declared before the reactor so that lines logged while the reactor stops
// (in the fixture's destructor) are still captured.
struct StartedReactor {
  LogCapture log;
  Reactor r;
  StartedReactor() { r.start(); }
};

bool is_aborted(const std::exception_ptr& ep) {
  if (!ep) return false;
  try {
    std::rethrow_exception(ep);
  } catch (const boost::system::system_error& e) {
    return e.code() == asio::error::operation_aborted;
  } catch (...) {
  }
  return false;
}

std::string what_of(const std::exception_ptr& ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
  }
  return "<not a std::exception>";
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

std::thread::id progress_thread_id(Reactor& r) {
  return on_reactor(r, [] { return std::this_thread::get_id(); });
}

// Collects the outcome of spawned tasks (written on the progress thread, read by the test).
struct Outcomes {
  std::mutex m;
  std::vector<std::exception_ptr> eps;
  std::atomic<int> calls{0};
  Reactor::Done done() {
    return [this](std::exception_ptr ep) {
      std::lock_guard lock(m);
      eps.push_back(ep);
      calls.fetch_add(1);
    };
  }
  std::vector<std::exception_ptr> get() {
    std::lock_guard lock(m);
    return eps;
  }
};

// A file descriptor closed on scope exit (held by coroutine frames in the leak tests).
struct OwnedFd {
  int fd;
  explicit OwnedFd(int f) : fd(f) {}
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(reactor_basics)

BOOST_AUTO_TEST_CASE(start_and_stop_are_idempotent) {
  const int base_threads = count_threads();
  {
    Reactor r;
    BOOST_TEST(!r.running());
    r.stop();  // never started: no-op
    BOOST_TEST(!r.running());
    r.start();
    BOOST_TEST(r.running());
    r.start();  // already running: no second thread
    BOOST_TEST(threads_settle_to(base_threads + 1));
    BOOST_TEST(!r.in_progress_thread());
    r.stop();
    BOOST_TEST(!r.running());
    r.stop();
    BOOST_TEST(!r.running());
  }
  BOOST_TEST(threads_settle_to(base_threads));
}

BOOST_AUTO_TEST_CASE(progress_thread_carries_its_name) {
  auto name_on_thread = [](Reactor& r) {
    std::string name;
    r.run_sync([&] {
      char buf[32] = {};
      pthread_getname_np(pthread_self(), buf, sizeof buf);
      name = buf;
    });
    return name;
  };
  Reactor plain;
  plain.start();
  BOOST_TEST(name_on_thread(plain) == "rdma-reactor");
  plain.stop();
  Reactor named;
  named.start("ncclHaProgress-and-more");  // cut to the kernel's 15 characters
  BOOST_TEST(name_on_thread(named) == "ncclHaProgress-");
  named.stop();
}

BOOST_AUTO_TEST_CASE(timer_completes_no_earlier_than_its_duration) {
  StartedReactor f;
  const auto waited = run_co(f.r, []() -> asio::awaitable<long long> {
    const auto t0 = Clock::now();
    co_await sleep_for(50ms);
    co_return ms_since(t0);
  });
  BOOST_TEST(waited >= 50);
}

BOOST_AUTO_TEST_CASE(many_concurrent_timers_all_fire) {
  StartedReactor f;
  std::atomic<int> fired{0};
  Outcomes out;
  for (int i = 0; i < 50; ++i) {
    f.r.spawn("timer " + std::to_string(i), keep_alive_void([&fired, i]() -> asio::awaitable<void> {
                co_await sleep_for(std::chrono::milliseconds(1 + (i * 7) % 40));
                fired.fetch_add(1);
              }),
              out.done());
  }
  BOOST_TEST(wait_until([&] { return out.calls.load() == 50; }));
  BOOST_TEST(fired.load() == 50);
  for (const auto& ep : out.get()) BOOST_TEST(!ep);
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
}

BOOST_AUTO_TEST_CASE(spawn_runs_on_the_progress_thread_and_reports_success) {
  StartedReactor f;
  const auto progress = progress_thread_id(f.r);
  BOOST_TEST((progress != std::this_thread::get_id()));
  std::promise<std::pair<std::thread::id, bool>> where;
  std::promise<std::pair<bool, std::thread::id>> done;
  f.r.spawn(
      "where", keep_alive_void([&]() -> asio::awaitable<void> {
        where.set_value({std::this_thread::get_id(), f.r.in_progress_thread()});
        co_return;
      }),
      [&](std::exception_ptr ep) { done.set_value({ep == nullptr, std::this_thread::get_id()}); });
  auto wf = where.get_future();
  auto df = done.get_future();
  BOOST_REQUIRE(ready_within(wf));
  BOOST_REQUIRE(ready_within(df));
  auto [tid, inside] = wf.get();
  BOOST_TEST((tid == progress));
  BOOST_TEST(inside);
  auto [ok, done_tid] = df.get();
  BOOST_TEST(ok);
  BOOST_TEST((done_tid == progress));
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
}

BOOST_AUTO_TEST_CASE(live_tasks_counts_running_coroutines) {
  StartedReactor f;
  auto gate = std::make_shared<asio::steady_timer>(f.r.executor(), asio::steady_timer::time_point::max());
  std::atomic<int> waiting{0};
  Outcomes out;
  for (int i = 0; i < 10; ++i)
    f.r.spawn("gated", keep_alive_void([gate, &waiting]() -> asio::awaitable<void> {
                waiting.fetch_add(1);
                co_await gate->async_wait(asio::as_tuple(asio::use_awaitable));
              }),
              out.done());
  BOOST_TEST(wait_until([&] { return waiting.load() == 10; }));
  BOOST_TEST(f.r.live_tasks() == 10u);
  f.r.post([gate] { gate->cancel(); });
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
  BOOST_TEST(out.calls.load() == 10);
  on_reactor(f.r, [&] { gate.reset(); });
}

BOOST_AUTO_TEST_CASE(post_runs_handlers_in_order_on_the_progress_thread) {
  StartedReactor f;
  std::vector<int> seen;  // progress thread only until run_sync hands it back
  bool all_inside = true;
  for (int i = 0; i < 200; ++i)
    f.r.post([&, i] {
      seen.push_back(i);
      all_inside = all_inside && f.r.in_progress_thread();
    });
  std::vector<int> copy;
  f.r.run_sync([&] { copy = seen; });
  BOOST_TEST(copy.size() == 200u);
  for (int i = 0; i < static_cast<int>(copy.size()); ++i) BOOST_TEST(copy[static_cast<std::size_t>(i)] == i);
  BOOST_TEST(on_reactor(f.r, [&] { return all_inside; }));
}

BOOST_AUTO_TEST_CASE(run_sync_from_many_threads_runs_on_the_progress_thread) {
  StartedReactor f;
  const auto progress = progress_thread_id(f.r);
  long counter = 0;  // unsynchronized on purpose: only the progress thread touches it
  std::atomic<int> outside{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        bool ran = false;
        f.r.run_sync([&] {
          ++counter;
          if (std::this_thread::get_id() != progress) outside.fetch_add(1);
          ran = true;
        });
        if (!ran) outside.fetch_add(1000);  // run_sync returned before f ran
      }
    });
  for (auto& t : threads) t.join();
  BOOST_TEST(outside.load() == 0);
  BOOST_TEST(on_reactor(f.r, [&] { return counter; }) == 1000);
}

BOOST_AUTO_TEST_CASE(run_sync_on_the_progress_thread_runs_inline) {
  StartedReactor f;
  // From a posted handler.
  std::promise<bool> from_handler;
  f.r.post([&] {
    bool ran = false;
    f.r.run_sync([&] { ran = true; });
    from_handler.set_value(ran);  // must already have run: inline, no deadlock
  });
  auto fh = from_handler.get_future();
  BOOST_REQUIRE(ready_within(fh));
  BOOST_TEST(fh.get());
  // From a coroutine.
  const bool from_coroutine = run_co(f.r, [&]() -> asio::awaitable<bool> {
    bool ran = false;
    f.r.run_sync([&] { ran = true; });
    co_return ran;
  });
  BOOST_TEST(from_coroutine);
}

BOOST_AUTO_TEST_CASE(run_sync_on_a_stopped_reactor_runs_inline) {
  Reactor r;
  std::thread::id where;
  r.run_sync([&] { where = std::this_thread::get_id(); });
  BOOST_TEST((where == std::this_thread::get_id()));
  r.start();
  r.stop();
  where = {};
  r.run_sync([&] { where = std::this_thread::get_id(); });
  BOOST_TEST((where == std::this_thread::get_id()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reactor_exceptions)

BOOST_AUTO_TEST_CASE(coroutine_exception_is_caught_logged_and_handed_to_done) {
  StartedReactor f;
  const auto before = progress_thread_id(f.r);
  Outcomes out;
  // Throws after suspending once, and before ever suspending.
  f.r.spawn("thrower-after-wait", keep_alive_void([]() -> asio::awaitable<void> {
              co_await sleep_for(1ms);
              throw std::runtime_error("boom-after-wait");
            }),
            out.done());
  f.r.spawn("thrower-at-once", keep_alive_void([]() -> asio::awaitable<void> {
              throw std::runtime_error("boom-at-once");
              co_return;
            }),
            out.done());
  f.r.spawn("thrower-non-std", keep_alive_void([]() -> asio::awaitable<void> {
              throw 42;
              co_return;
            }),
            out.done());
  BOOST_REQUIRE(wait_until([&] { return out.calls.load() == 3; }));
  std::vector<std::string> whats;
  for (const auto& ep : out.get()) {
    BOOST_REQUIRE(ep);
    whats.push_back(what_of(ep));
  }
  std::sort(whats.begin(), whats.end());
  BOOST_TEST(whats[0] == "<not a std::exception>");
  BOOST_TEST(whats[1] == "boom-after-wait");
  BOOST_TEST(whats[2] == "boom-at-once");
  BOOST_TEST(f.log.contains(LogLevel::warn, {"thrower-after-wait", "boom-after-wait"}), f.log.dump());
  BOOST_TEST(f.log.contains(LogLevel::warn, {"thrower-at-once", "boom-at-once"}), f.log.dump());
  BOOST_TEST(f.log.contains(LogLevel::warn, {"thrower-non-std", "unknown exception"}), f.log.dump());
  // Same progress thread, still serving work.
  BOOST_TEST((progress_thread_id(f.r) == before));
  BOOST_TEST(run_co(f.r, []() -> asio::awaitable<int> {
               co_await sleep_for(1ms);
               co_return 7;
             }) == 7);
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
}

BOOST_AUTO_TEST_CASE(posted_handler_exception_is_caught_and_logged) {
  StartedReactor f;
  const auto before = progress_thread_id(f.r);
  f.r.post([] { throw std::runtime_error("post-boom"); });
  f.r.post([] { throw 42; });
  std::atomic<bool> after{false};
  f.r.post([&] { after = true; });
  f.r.run_sync([] {});
  BOOST_TEST(after.load());
  BOOST_TEST(f.log.contains(LogLevel::error, {"post-boom"}), f.log.dump());
  BOOST_TEST(f.log.contains(LogLevel::error, {"unknown exception"}), f.log.dump());
  BOOST_TEST((progress_thread_id(f.r) == before));
}

BOOST_AUTO_TEST_CASE(exception_from_a_raw_asio_handler_does_not_kill_the_thread) {
  StartedReactor f;
  const auto before = progress_thread_id(f.r);
  asio::post(f.r.context(), [] { throw std::runtime_error("raw-boom"); });
  BOOST_TEST(wait_until([&] { return f.log.contains(LogLevel::error, {"raw-boom"}); }), f.log.dump());
  BOOST_TEST(f.r.running());
  BOOST_TEST((progress_thread_id(f.r) == before));
  BOOST_TEST(run_co(f.r, []() -> asio::awaitable<int> {
               co_await sleep_for(1ms);
               co_return 1;
             }) == 1);
}

BOOST_AUTO_TEST_CASE(done_callback_exception_is_caught_and_logged) {
  StartedReactor f;
  f.r.spawn("bad-done", keep_alive_void([]() -> asio::awaitable<void> { co_return; }),
            [](std::exception_ptr) { throw std::runtime_error("done-boom"); });
  BOOST_TEST(wait_until([&] { return f.log.contains(LogLevel::error, {"bad-done"}); }), f.log.dump());
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
  BOOST_TEST(f.r.running());
  BOOST_TEST(on_reactor(f.r, [] { return 5; }) == 5);
}

BOOST_AUTO_TEST_CASE(run_sync_rethrows_in_the_caller_and_the_thread_survives) {
  StartedReactor f;
  const auto before = progress_thread_id(f.r);
  BOOST_CHECK_THROW(f.r.run_sync([] { throw std::logic_error("sync-boom"); }), std::logic_error);
  BOOST_TEST(f.r.running());
  BOOST_TEST((progress_thread_id(f.r) == before));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reactor_stop)

BOOST_AUTO_TEST_CASE(stop_cancels_coroutines_waiting_on_timers) {
  LogCapture log;
  Reactor r;
  r.start();
  Outcomes out;
  std::atomic<int> waiting{0};
  for (int i = 0; i < 3; ++i)
    r.spawn("sleeper", keep_alive_void([&waiting]() -> asio::awaitable<void> {
              waiting.fetch_add(1);
              co_await sleep_for(std::chrono::hours(1));
            }),
            out.done());
  BOOST_REQUIRE(wait_until([&] { return waiting.load() == 3; }));
  BOOST_TEST(r.live_tasks() == 3u);
  const auto t0 = Clock::now();
  r.stop(std::chrono::seconds(20));
  const auto took = ms_since(t0);
  BOOST_TEST(!r.running());
  BOOST_TEST(out.calls.load() == 3);  // every coroutine unwound and reported
  for (const auto& ep : out.get()) BOOST_TEST(is_aborted(ep));
  BOOST_TEST(r.live_tasks() == 0u);
  BOOST_TEST(!log.contains(LogLevel::warn, {"did not finish"}), log.dump());
  BOOST_TEST(took < 20000);  // returned before the grace period, i.e. nothing was abandoned
}

BOOST_AUTO_TEST_CASE(stop_cancels_fd_waits_and_signal_waits) {
  LogCapture log;
  Reactor r;
  r.start();
  OwnedFd efd(::eventfd(0, EFD_CLOEXEC));
  BOOST_REQUIRE(efd.fd >= 0);
  std::atomic<int> waiting{0};
  std::promise<boost::system::error_code> fd_result;
  Outcomes out;
  r.spawn("fd waiter", keep_alive_void([&]() -> asio::awaitable<void> {
            FdWatcher w(co_await asio::this_coro::executor, efd.fd);
            waiting.fetch_add(1);
            fd_result.set_value(co_await w.readable());  // never throws
          }),
          out.done());
  r.spawn("signal waiter", keep_alive_void([&]() -> asio::awaitable<void> {
            AsyncSignal s(co_await asio::this_coro::executor);
            waiting.fetch_add(1);
            co_await s.wait(std::chrono::hours(1));  // throws operation_aborted when cancelled
          }),
          out.done());
  BOOST_REQUIRE(wait_until([&] { return waiting.load() == 2; }));
  r.stop(std::chrono::seconds(20));
  auto fr = fd_result.get_future();
  BOOST_REQUIRE(ready_within(fr, 0ms));
  BOOST_TEST(fr.get() == asio::error::operation_aborted);
  auto eps = out.get();
  BOOST_REQUIRE(eps.size() == 2u);
  BOOST_TEST(std::count(eps.begin(), eps.end(), nullptr) == 1);  // the fd waiter returned normally
  BOOST_TEST(std::count_if(eps.begin(), eps.end(), is_aborted) == 1);  // the signal waiter threw
  BOOST_TEST(!log.contains(LogLevel::warn, {"did not finish"}), log.dump());
  // The watcher never closes the fd it watched.
  BOOST_TEST(::fcntl(efd.fd, F_GETFD) >= 0);
}

BOOST_AUTO_TEST_CASE(shutdown_with_pending_work_leaks_no_threads_or_fds) {
  LogCapture log;
  const int base_threads = count_threads();
  const int base_fds = count_fds();
  {
    Reactor r;
    r.start();
    // Warm up the io_context's own descriptors (epoll, interrupter, timerfd) so the count
    // below measures only what the coroutines own.
    run_co(r, []() -> asio::awaitable<void> { co_await sleep_for(1ms); });
    {
      // A descriptor watch needs the reactor service too.
      OwnedFd warm(::eventfd(0, EFD_CLOEXEC));
      on_reactor(r, [&] { FdWatcher w(r.executor(), warm.fd); });
    }
    BOOST_TEST(threads_settle_to(base_threads + 1));
    const int warm_fds = count_fds();

    constexpr int kTimers = 4, kFds = 4, kPipes = 2, kSignals = 2;
    std::atomic<int> waiting{0};
    Outcomes out;
    for (int i = 0; i < kTimers; ++i)
      r.spawn("timer", keep_alive_void([&waiting]() -> asio::awaitable<void> {
                waiting.fetch_add(1);
                co_await sleep_for(std::chrono::hours(1));
              }),
              out.done());
    for (int i = 0; i < kFds; ++i)
      r.spawn("eventfd", keep_alive_void([&waiting]() -> asio::awaitable<void> {
                OwnedFd fd(::eventfd(0, EFD_CLOEXEC));  // owned by the coroutine frame
                FdWatcher w(co_await asio::this_coro::executor, fd.fd);
                waiting.fetch_add(1);
                auto ec = co_await w.readable();
                (void)ec;
              }),
              out.done());
    for (int i = 0; i < kPipes; ++i)
      r.spawn("pipe", keep_alive_void([&waiting]() -> asio::awaitable<void> {
                int p[2];
                if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
                OwnedFd rd(p[0]), wr(p[1]);
                FdWatcher w(co_await asio::this_coro::executor, rd.fd);
                waiting.fetch_add(1);
                auto ec = co_await w.readable();
                (void)ec;
              }),
              out.done());
    for (int i = 0; i < kSignals; ++i)
      r.spawn("signal", keep_alive_void([&waiting]() -> asio::awaitable<void> {
                AsyncSignal s(co_await asio::this_coro::executor);
                waiting.fetch_add(1);
                co_await s.wait(std::chrono::hours(1));
              }),
              out.done());
    constexpr int kAll = kTimers + kFds + kPipes + kSignals;
    BOOST_REQUIRE(wait_until([&] { return waiting.load() == kAll; }));
    BOOST_TEST(r.live_tasks() == static_cast<std::size_t>(kAll));
    BOOST_TEST(count_fds() == warm_fds + kFds + 2 * kPipes);

    r.stop(std::chrono::seconds(20));
    BOOST_TEST(!r.running());
    BOOST_TEST(out.calls.load() == kAll);
    BOOST_TEST(r.live_tasks() == 0u);
    BOOST_TEST(!log.contains(LogLevel::warn, {"did not finish"}), log.dump());
    BOOST_TEST(threads_settle_to(base_threads));  // the progress thread is gone
    BOOST_TEST(count_fds() == warm_fds);          // every coroutine-owned fd was closed
  }
  BOOST_TEST(count_fds() == base_fds);  // and the io_context's own on destruction
  BOOST_TEST(threads_settle_to(base_threads));
}

BOOST_AUTO_TEST_CASE(destructor_stops_and_cancels) {
  const int base_threads = count_threads();
  Outcomes out;
  std::atomic<int> waiting{0};
  {
    LogCapture log;
    Reactor r;
    r.start();
    r.spawn("sleeper", keep_alive_void([&waiting]() -> asio::awaitable<void> {
              waiting.fetch_add(1);
              co_await sleep_for(std::chrono::hours(1));
            }),
            out.done());
    BOOST_REQUIRE(wait_until([&] { return waiting.load() == 1; }));
  }
  BOOST_TEST(out.calls.load() == 1);
  auto eps = out.get();
  BOOST_REQUIRE(eps.size() == 1u);
  BOOST_TEST(is_aborted(eps[0]));
  BOOST_TEST(threads_settle_to(base_threads));
}

BOOST_AUTO_TEST_CASE(restart_after_stop) {
  const int base_threads = count_threads();
  LogCapture log;
  Reactor r;
  for (int round = 0; round < 3; ++round) {
    r.start();
    BOOST_TEST(r.running());
    BOOST_TEST(run_co(r, [round]() -> asio::awaitable<int> {
                 co_await sleep_for(5ms);
                 co_return round;
               }) == round);
    std::promise<void> posted;
    r.post([&] { posted.set_value(); });
    auto pf = posted.get_future();
    BOOST_TEST(ready_within(pf));
    int from_thread = 0;
    std::thread([&] { r.run_sync([&] { from_thread = round + 1; }); }).join();
    BOOST_TEST(from_thread == round + 1);
    // A coroutine left waiting is cancelled by this round's stop.
    Outcomes out;
    std::atomic<int> waiting{0};
    r.spawn("sleeper", keep_alive_void([&waiting]() -> asio::awaitable<void> {
              waiting.fetch_add(1);
              co_await sleep_for(std::chrono::hours(1));
            }),
            out.done());
    BOOST_REQUIRE(wait_until([&] { return waiting.load() == 1; }));
    r.stop(std::chrono::seconds(20));
    BOOST_TEST(!r.running());
    BOOST_TEST(out.calls.load() == 1);
    BOOST_TEST(r.live_tasks() == 0u);
    BOOST_TEST(threads_settle_to(base_threads));
  }
}

BOOST_AUTO_TEST_CASE(stop_requested_from_the_progress_thread) {
  const int base_threads = count_threads();
  LogCapture log;
  Reactor r;
  r.start();
  Outcomes out;
  std::atomic<int> waiting{0};
  r.spawn("sleeper", keep_alive_void([&waiting]() -> asio::awaitable<void> {
            waiting.fetch_add(1);
            co_await sleep_for(std::chrono::hours(1));
          }),
          out.done());
  BOOST_REQUIRE(wait_until([&] { return waiting.load() == 1; }));
  std::promise<void> returned;
  r.post([&] {
    r.stop();  // only requests the stop: must not try to join itself
    returned.set_value();
  });
  auto rf = returned.get_future();
  BOOST_REQUIRE(ready_within(rf));
  BOOST_TEST(wait_until([&] { return out.calls.load() == 1; }));  // the sleeper was cancelled
  BOOST_TEST(is_aborted(out.get().at(0)));
  r.stop();  // the owner joins
  BOOST_TEST(!r.running());
  BOOST_TEST(threads_settle_to(base_threads));

  // And the reactor is usable again afterwards, also once it has gone idle.
  r.start();
  for (int i = 0; i < 3; ++i) {
    std::promise<void> ran;
    r.post([&] { ran.set_value(); });
    auto f = ran.get_future();
    BOOST_TEST(ready_within(f, 10s), "post #" << i << " after restart never ran");
    std::this_thread::sleep_for(100ms);  // let the progress thread go idle
  }
  BOOST_TEST(r.running());
  BOOST_TEST(threads_settle_to(base_threads + 1));
  r.stop();
  BOOST_TEST(threads_settle_to(base_threads));
}

namespace {
// Ignores every cancellation request, then waits `d`. Sets *destroyed when its frame dies.
struct SetOnDestroy {
  std::shared_ptr<std::atomic<bool>> flag;
  ~SetOnDestroy() { flag->store(true); }
};
asio::awaitable<void> stubborn(std::chrono::milliseconds d, std::shared_ptr<std::atomic<bool>> waiting,
                               std::shared_ptr<std::atomic<bool>> destroyed) {
  SetOnDestroy guard{std::move(destroyed)};
  co_await asio::this_coro::reset_cancellation_state([](asio::cancellation_type) { return asio::cancellation_type::none; });
  waiting->store(true);
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
}
}  // namespace

BOOST_AUTO_TEST_CASE(stop_abandons_a_coroutine_that_ignores_cancellation) {
  const int base_threads = count_threads();
  LogCapture log;
  auto waiting = std::make_shared<std::atomic<bool>>(false);
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  Outcomes out;
  {
    Reactor r;
    r.start();
    r.spawn("stubborn", stubborn(std::chrono::hours(1), waiting, destroyed), out.done());
    BOOST_REQUIRE(wait_until([&] { return waiting->load(); }));
    r.stop(200ms);
    BOOST_TEST(!r.running());
    BOOST_TEST(log.contains(LogLevel::warn, {"did not finish"}), log.dump());
    BOOST_TEST(threads_settle_to(base_threads));
    BOOST_TEST(!destroyed->load());  // still owned by the io_context
  }
  BOOST_TEST(destroyed->load());  // destroyed with the context
  BOOST_TEST(out.calls.load() == 0);  // never resumed, so never reported
}

BOOST_AUTO_TEST_CASE(restart_after_abandoning_a_coroutine) {
  LogCapture log;
  auto waiting = std::make_shared<std::atomic<bool>>(false);
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  Outcomes out;
  Reactor r;
  r.start();
  r.spawn("stubborn", stubborn(300ms, waiting, destroyed), out.done());
  BOOST_REQUIRE(wait_until([&] { return waiting->load(); }));
  r.stop(10ms);
  BOOST_TEST(log.contains(LogLevel::warn, {"did not finish"}), log.dump());
  // Restarting resumes the abandoned coroutine when its timer fires; it must then finish and
  // be accounted for like any other task.
  r.start();
  BOOST_TEST(wait_until([&] { return destroyed->load(); }));
  BOOST_TEST(wait_until([&] { return r.live_tasks() == 0; }));
  BOOST_TEST(out.calls.load() == 1);
  BOOST_TEST(run_co(r, []() -> asio::awaitable<int> {
               co_await sleep_for(1ms);
               co_return 3;
             }) == 3);
  r.stop();
}

BOOST_AUTO_TEST_SUITE_END()
