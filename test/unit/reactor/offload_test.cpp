// Reactor::offload: blocking work on the worker threads, its outcome back on the progress thread;
// the progress thread stays responsive while a job blocks; stop() with work in flight or queued;
// workers created on demand, bounded, named, and joined by stop(); restart.
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nccl_ha/reactor/reactor.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::reactor;
using namespace nccl_ha::test;

namespace {

// A gate a job blocks on until the test opens it (a verbs call stuck in the kernel).
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(m_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
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

std::string thread_name() {
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof buf);
  return buf;
}

std::thread::id progress_id(Reactor& r) {
  return on_reactor(r, [] { return std::this_thread::get_id(); });
}

// What a callback-form completion saw (written on the progress thread, read by the test).
struct Seen {
  std::mutex m;
  std::vector<std::thread::id> threads;
  std::vector<std::exception_ptr> errors;
  std::vector<int> values;
  std::atomic<int> calls{0};
  void note(std::exception_ptr ep, std::optional<int> v = std::nullopt) {
    std::lock_guard lock(m);
    threads.push_back(std::this_thread::get_id());
    errors.push_back(ep);
    values.push_back(v.value_or(-1));
    calls.fetch_add(1);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(reactor_offload)

BOOST_AUTO_TEST_CASE(co_await_runs_off_the_progress_thread_and_resumes_on_it) {
  LogCapture log;
  Reactor r;
  r.set_workers(2, "test-worker", 5);
  r.start("test-progress");
  const auto progress = progress_id(r);
  errno = 0;
  const int base_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
  struct Where {
    std::thread::id job, resumed;
    std::string job_name;
    int nice = 0;
  };
  const auto where = run_co(r, [&r]() -> asio::awaitable<std::pair<Where, int>> {
    Where w;
    auto work = [&w] {
      w.job = std::this_thread::get_id();
      w.job_name = thread_name();
      w.nice = getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
      return 41;
    };
    const int v = co_await r.offload(work);
    w.resumed = std::this_thread::get_id();
    co_return std::make_pair(w, v + 1);
  });
  BOOST_TEST(where.second == 42);
  BOOST_TEST((where.first.job != progress));
  BOOST_TEST((where.first.job != std::this_thread::get_id()));
  BOOST_TEST(where.first.job_name == "test-worker");
  BOOST_TEST(where.first.nice == std::min(base_nice + 5, 19));  // the worker alone runs at a lower priority
  BOOST_TEST((where.first.resumed == progress));
}

BOOST_AUTO_TEST_CASE(co_await_rethrows_what_the_job_threw_on_the_progress_thread) {
  LogCapture log;
  Reactor r;
  r.start();
  const auto progress = progress_id(r);
  const auto got = run_co(r, [&r]() -> asio::awaitable<std::pair<std::string, std::thread::id>> {
    auto work = []() -> int { throw std::runtime_error("job-boom"); };
    try {
      (void)co_await r.offload(work);
    } catch (const std::runtime_error& e) {
      co_return std::make_pair(std::string(e.what()), std::this_thread::get_id());
    }
    co_return std::make_pair(std::string("no exception"), std::this_thread::get_id());
  });
  BOOST_TEST(got.first == "job-boom");
  BOOST_TEST((got.second == progress));
  // void jobs too
  const bool thrown = run_co(r, [&r]() -> asio::awaitable<bool> {
    auto work = [] { throw std::logic_error("void-boom"); };
    try {
      co_await r.offload(work);
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  });
  BOOST_TEST(thrown);
}

BOOST_AUTO_TEST_CASE(callback_form_delivers_value_and_exception_on_the_progress_thread) {
  LogCapture log;
  Reactor r;
  r.start();
  const auto progress = progress_id(r);
  Seen seen;
  std::atomic<bool> on_worker{true};
  r.offload([&r, &on_worker] {
    if (r.in_progress_thread()) on_worker = false;
    return 7;
  }, [&seen](std::exception_ptr ep, std::optional<int> v) { seen.note(ep, v); });
  r.offload([]() -> int { throw std::runtime_error("cb-boom"); },
            [&seen](std::exception_ptr ep, std::optional<int> v) { seen.note(ep, v); });
  r.offload([] {}, [&seen](std::exception_ptr ep) { seen.note(ep); });
  BOOST_REQUIRE(wait_until([&] { return seen.calls.load() == 3; }));
  BOOST_TEST(on_worker.load());
  std::lock_guard lock(seen.m);
  for (const auto& t : seen.threads) BOOST_TEST((t == progress));
  int values = 0, errors = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    if (seen.errors[i]) {
      ++errors;
      BOOST_TEST(seen.values[i] == -1);  // nullopt
    } else if (seen.values[i] == 7) {
      ++values;
    }
  }
  BOOST_TEST(values == 1);
  BOOST_TEST(errors == 1);
}

BOOST_AUTO_TEST_CASE(callback_exception_is_logged_and_the_reactor_goes_on) {
  LogCapture log;
  Reactor r;
  r.start();
  r.offload([] {}, [](std::exception_ptr) { throw std::runtime_error("done-boom"); });
  BOOST_TEST(wait_until([&] { return log.contains(LogLevel::error, {"done-boom"}); }), log.dump());
  BOOST_TEST(on_reactor(r, [] { return 3; }) == 3);
}

BOOST_AUTO_TEST_CASE(progress_thread_stays_responsive_while_a_job_blocks) {
  LogCapture log;
  Reactor r;
  r.start();
  Gate gate;
  std::atomic<bool> started{false};
  Seen seen;
  r.offload([&] {
    started = true;
    gate.wait();
  }, [&seen](std::exception_ptr ep) { seen.note(ep); });
  BOOST_REQUIRE(wait_until([&] { return started.load(); }));
  // The job is stuck: timers, posts and coroutines still run on the progress thread.
  const int v = run_co(r, []() -> asio::awaitable<int> {
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(5));
    co_await t.async_wait(asio::use_awaitable);
    co_return 9;
  });
  BOOST_TEST(v == 9);
  BOOST_TEST(on_reactor(r, [] { return 1; }) == 1);
  // A second job runs on the second worker meanwhile.
  BOOST_TEST(run_co(r, [&r]() -> asio::awaitable<int> {
               auto work = [] { return 5; };
               co_return co_await r.offload(work);
             }) == 5);
  BOOST_TEST(seen.calls.load() == 0);
  gate.open();
  BOOST_TEST(wait_until([&] { return seen.calls.load() == 1; }));
}

BOOST_AUTO_TEST_CASE(workers_are_created_on_demand_bounded_and_joined_by_stop) {
  LogCapture log;
  const int base = count_threads();
  {
    Reactor r;
    r.set_workers(2, "bounded");
    r.start();
    BOOST_TEST(threads_settle_to(base + 1));  // the progress thread only: no worker before a job
    BOOST_TEST(r.workers().threads() == 0u);
    Gate gate;
    std::atomic<int> running{0}, max_running{0};
    Seen seen;
    for (int i = 0; i < 6; ++i)
      r.offload([&] {
        const int now = running.fetch_add(1) + 1;
        int m = max_running.load();
        while (now > m && !max_running.compare_exchange_weak(m, now)) {
        }
        gate.wait();
        running.fetch_sub(1);
      }, [&seen](std::exception_ptr ep) { seen.note(ep); });
    BOOST_REQUIRE(wait_until([&] { return running.load() == 2; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_TEST(max_running.load() == 2);
    BOOST_TEST(r.workers().threads() == 2u);
    BOOST_TEST(r.workers().pending() == 6u);
    gate.open();
    BOOST_TEST(wait_until([&] { return seen.calls.load() == 6; }));
    BOOST_TEST(max_running.load() == 2);
    r.stop();
    BOOST_TEST(r.workers().threads() == 0u);
    BOOST_TEST(threads_settle_to(base));
  }
  BOOST_TEST(threads_settle_to(base));
}

BOOST_AUTO_TEST_CASE(jobs_a_peer_waits_for_go_before_the_ordinary_ones_queued) {
  // One worker, held by a job: what is queued behind it runs in JobOrder (worker_pool.hpp): the
  // peer_waits jobs first, in their order, then the fifo ones, in theirs - whenever submitted.
  Reactor r;
  r.set_workers(1, "ordered");
  r.start();
  Gate gate;
  std::atomic<bool> holding{false};
  std::mutex m;
  std::vector<std::string> order;
  Seen seen;
  auto job = [&](std::string name) {
    return [&, name] {
      std::lock_guard lock(m);
      order.push_back(name);
    };
  };
  r.offload([&] {
    holding = true;
    gate.wait();
  }, [&seen](std::exception_ptr ep) { seen.note(ep); });
  BOOST_REQUIRE(wait_until([&] { return holding.load(); }));
  const std::pair<const char*, JobOrder> queued[] = {{"a", JobOrder::fifo},       {"b", JobOrder::fifo},
                                                     {"x", JobOrder::peer_waits}, {"c", JobOrder::fifo},
                                                     {"y", JobOrder::peer_waits}, {"d", JobOrder::fifo}};
  for (const auto& [name, how] : queued) r.offload(job(name), [&seen](std::exception_ptr ep) { seen.note(ep); }, how);
  BOOST_TEST(r.workers().pending() == 7u);
  gate.open();
  BOOST_REQUIRE(wait_until([&] { return seen.calls.load() == 7; }));
  // and once the queue is empty, a peer_waits job is just the next
  r.offload(job("z"), [&seen](std::exception_ptr ep) { seen.note(ep); }, JobOrder::peer_waits);
  r.offload(job("e"), [&seen](std::exception_ptr ep) { seen.note(ep); });
  BOOST_REQUIRE(wait_until([&] { return seen.calls.load() == 9; }));
  r.stop();
  const std::vector<std::string> expected{"x", "y", "a", "b", "c", "d", "z", "e"};
  BOOST_TEST(order == expected, boost::test_tools::per_element());
  for (const auto& ep : seen.errors) BOOST_TEST(!ep);
}

BOOST_AUTO_TEST_CASE(stop_with_work_in_flight_and_queued_delivers_every_outcome_then_refuses) {
  LogCapture log;
  const int base = count_threads();
  Reactor r;
  r.set_workers(1, "one");
  r.start();
  Gate gate;
  std::atomic<bool> started{false};
  std::atomic<int> ran{0};
  Seen seen;
  // A coroutine waiting for a job that blocks: stop() must not abandon it nor its frame.
  auto fut = spawn_future(r, "awaiting", [&]() -> asio::awaitable<int> {
    int local = 10;  // the job writes into the frame: it must still be there
    auto work = [&] {
      started = true;
      gate.wait();
      local += 1;
      ran.fetch_add(1);
    };
    co_await r.offload(work);
    co_return local;
  });
  BOOST_REQUIRE(wait_until([&] { return started.load(); }));
  // Queued behind it (one worker): still run by stop(), outcome delivered.
  r.offload([&] { ran.fetch_add(1); }, [&seen](std::exception_ptr ep) { seen.note(ep); });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gate.open();
  });
  const auto t0 = Clock::now();
  r.stop(std::chrono::seconds(20));
  opener.join();
  BOOST_TEST(ms_since(t0) >= 150);  // it waited for the job in flight
  BOOST_TEST(!r.running());
  BOOST_TEST(ran.load() == 2);
  BOOST_TEST(seen.calls.load() == 1);
  BOOST_TEST(!seen.errors[0]);
  BOOST_REQUIRE(ready_within(fut));
  BOOST_TEST(fut.get() == 11);  // resumed with the job's outcome, then ended
  BOOST_TEST(!log.contains(LogLevel::warn, {"did not finish"}), log.dump());
  BOOST_TEST(threads_settle_to(base));
  // After stop: refused. The outcome (operation_aborted) comes with the next start.
  std::atomic<bool> refused_ran{false};
  r.offload([&] { refused_ran = true; }, [&seen](std::exception_ptr ep) { seen.note(ep); });
  BOOST_TEST(!refused_ran.load());
  r.start();
  BOOST_REQUIRE(wait_until([&] { return seen.calls.load() == 2; }));
  BOOST_TEST(is_aborted(seen.errors[1]));
  BOOST_TEST(!refused_ran.load());
  // Restarted: jobs run again.
  BOOST_TEST(run_co(r, [&r]() -> asio::awaitable<int> {
               auto work = [] { return 3; };
               co_return co_await r.offload(work);
             }) == 3);
  r.stop();
  BOOST_TEST(threads_settle_to(base));
}

BOOST_AUTO_TEST_CASE(a_coroutine_offloading_while_the_reactor_stops_gets_operation_aborted) {
  LogCapture log;
  Reactor r;
  r.set_workers(1, "one");
  r.start();
  Gate gate;
  std::atomic<bool> started{false};
  // The first job blocks; when it ends the coroutine (cancelled by now) offloads again: refused.
  auto fut = spawn_future(r, "twice", [&]() -> asio::awaitable<int> {
    auto first = [&] {
      started = true;
      gate.wait();
    };
    co_await r.offload(first);
    auto second = [] { return 1; };
    co_return co_await r.offload(second);
  });
  BOOST_REQUIRE(wait_until([&] { return started.load(); }));
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gate.open();
  });
  r.stop(std::chrono::seconds(20));
  opener.join();
  BOOST_REQUIRE(ready_within(fut));
  BOOST_CHECK_EXCEPTION(fut.get(), boost::system::system_error,
                        [](const boost::system::system_error& e) { return e.code() == asio::error::operation_aborted; });
  BOOST_TEST(!log.contains(LogLevel::warn, {"did not finish"}), log.dump());
}

BOOST_AUTO_TEST_CASE(stop_from_the_progress_thread_with_a_job_in_flight) {
  LogCapture log;
  const int base = count_threads();
  {
    Reactor r;
    r.start();
    Gate gate;
    std::atomic<bool> started{false};
    Seen seen;
    r.offload([&] {
      started = true;
      gate.wait();
    }, [&seen](std::exception_ptr ep) { seen.note(ep); });
    BOOST_REQUIRE(wait_until([&] { return started.load(); }));
    r.post([&r] { r.stop(); });  // only requests the stop
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.open();
    r.stop(std::chrono::seconds(20));  // the owner's stop joins
    BOOST_TEST(seen.calls.load() == 1);
    BOOST_TEST(!seen.errors[0]);
  }
  BOOST_TEST(threads_settle_to(base));
}

BOOST_AUTO_TEST_CASE(work_offloaded_before_start_runs_and_reports_at_start) {
  LogCapture log;
  Reactor r;
  Seen seen;
  std::atomic<bool> ran{false};
  r.offload([&] { ran = true; }, [&seen](std::exception_ptr ep) { seen.note(ep); });
  BOOST_TEST(wait_until([&] { return ran.load(); }));
  BOOST_TEST(seen.calls.load() == 0);  // no progress thread yet
  r.start();
  BOOST_TEST(wait_until([&] { return seen.calls.load() == 1; }));
  r.stop();
}

BOOST_AUTO_TEST_SUITE_END()
