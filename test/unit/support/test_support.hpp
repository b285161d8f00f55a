// Shared helpers for the nccl-ha unit tests (header-only; included by both test executables).
//
//  * LogCapture      installs a capturing log sink (set_log_sink) for its lifetime.
//  * EnvGuard        sets/unsets environment variables and restores them afterwards.
//  * count_threads() / count_fds()   /proc/self/task and /proc/self/fd entry counts.
//  * wait_until()    polls a predicate with a generous deadline (never asserts speed).
//  * run_co()        runs a coroutine on a Reactor and returns its result to the test thread.
//
// Boost.Test assertions are not thread-safe: code running on the progress thread only records
// what it saw; the test thread asserts.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <boost/asio/awaitable.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "nccl_ha/reactor/log.hpp"
#include "nccl_ha/reactor/reactor.hpp"
#include "test_expected.hpp"

namespace nccl_ha::test {

namespace asio = boost::asio;
using reactor::Reactor;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Generous bound for anything that should happen "soon" on a slow, loaded 2-core machine.
inline constexpr auto kSoon = std::chrono::seconds(30);

// ---------------------------------------------------------------------------------------------
// Log capture
// ---------------------------------------------------------------------------------------------
struct LogRecord {
  LogLevel level;
  std::string message;
};

class LogCapture {
 public:
  explicit LogCapture(LogLevel level = LogLevel::trace) : saved_level_(log_level()) {
    {
      std::lock_guard lock(mutex());
      records().clear();
    }
    set_log_level(level);
    set_log_sink(&LogCapture::sink);
  }
  ~LogCapture() {
    set_log_sink(nullptr);
    set_log_level(saved_level_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<LogRecord> snapshot() const {
    std::lock_guard lock(mutex());
    return records();
  }
  void clear() {
    std::lock_guard lock(mutex());
    records().clear();
  }
  // Number of lines at exactly `level` containing every one of `needles`.
  std::size_t count(LogLevel level, std::initializer_list<std::string> needles) const {
    std::size_t n = 0;
    for (const auto& r : snapshot()) {
      if (r.level != level) continue;
      bool all = true;
      for (const auto& s : needles) all = all && r.message.find(s) != std::string::npos;
      n += all ? 1 : 0;
    }
    return n;
  }
  bool contains(LogLevel level, std::initializer_list<std::string> needles) const { return count(level, needles) > 0; }
  std::size_t count_at_or_above(LogLevel level) const {
    std::size_t n = 0;
    for (const auto& r : snapshot()) n += static_cast<int>(r.level) <= static_cast<int>(level) ? 1 : 0;
    return n;
  }
  // All lines, for failure messages.
  std::string dump() const {
    std::string out;
    for (const auto& r : snapshot()) out += "  [" + std::to_string(static_cast<int>(r.level)) + "] " + r.message + "\n";
    return out;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<LogRecord>& records() {
    static std::vector<LogRecord> r;
    return r;
  }
  static void sink(LogLevel level, const char*, int, const char* message) {
    std::lock_guard lock(mutex());
    records().push_back({level, message});
  }
  LogLevel saved_level_;
};

// ---------------------------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------------------------
class EnvGuard {
 public:
  EnvGuard() = default;
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void save(const std::string& name) {
    const char* v = std::getenv(name.c_str());
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// ---------------------------------------------------------------------------------------------
// Process resources
// ---------------------------------------------------------------------------------------------
inline int count_dir_entries(const char* path) {
  DIR* d = ::opendir(path);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}
inline int count_threads() { return count_dir_entries("/proc/self/task"); }
// The directory stream's own fd is counted both times, so differences are exact.
inline int count_fds() { return count_dir_entries("/proc/self/fd"); }

// Polls `pred` every few milliseconds until it holds or `limit` passes; returns its last value.
template <class Pred>
bool wait_until(Pred&& pred, std::chrono::milliseconds limit = kSoon) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(2ms);
  }
}

// A joined thread can linger in /proc/self/task for a moment after pthread_join returns (the
// kernel reaps it slightly later), so thread counts are compared with a grace period.
inline bool threads_settle_to(int expected) {
  return wait_until([&] { return count_threads() == expected; }, 10s);
}

inline long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// Coroutines on a reactor
// ---------------------------------------------------------------------------------------------
// Keeps a (capturing) lambda alive for as long as the coroutine it returns runs: a lambda
// coroutine's captures live in the closure object, not in the coroutine frame.
template <class F>
asio::awaitable<void> keep_alive_void(F f) {
  co_await f();
}

template <class F>
using co_result_t = typename std::invoke_result_t<F&>::value_type;

template <class T, class F>
asio::awaitable<void> deliver_to(F f, std::shared_ptr<std::promise<T>> p) {
  if constexpr (std::is_void_v<T>) {
    co_await f();
    p->set_value();
  } else {
    p->set_value(co_await f());
  }
}

// Spawns f() (a lambda returning asio::awaitable<T>) on `r` and returns a future of its result.
// An exception (including cancellation) thrown by the coroutine lands in the future.
template <class F>
std::future<co_result_t<F>> spawn_future(Reactor& r, std::string name, F f) {
  using T = co_result_t<F>;
  auto p = std::make_shared<std::promise<T>>();
  auto fut = p->get_future();
  r.spawn(std::move(name), deliver_to<T>(std::move(f), p), [p](std::exception_ptr ep) {
    if (ep) p->set_exception(ep);
  });
  return fut;
}

template <class T>
bool ready_within(std::future<T>& f, std::chrono::milliseconds limit = kSoon) {
  return f.wait_for(limit) == std::future_status::ready;
}

// Runs f() on the reactor and waits (boundedly) for its result. On a hang the reactor is
// stopped first, so nothing keeps running against the test's locals.
template <class F>
co_result_t<F> run_co(Reactor& r, F f, std::chrono::milliseconds limit = kSoon) {
  auto fut = spawn_future(r, "test coroutine", std::move(f));
  if (!ready_within(fut, limit)) {
    r.stop();
    BOOST_FAIL("coroutine did not finish within " << limit.count() << " ms");
  }
  return fut.get();
}

// Runs f on the progress thread and returns its result.
template <class F>
auto on_reactor(Reactor& r, F f) -> std::invoke_result_t<F&> {
  using T = std::invoke_result_t<F&>;
  if constexpr (std::is_void_v<T>) {
    r.run_sync([&] { f(); });
  } else {
    std::optional<T> out;
    r.run_sync([&] { out.emplace(f()); });
    return std::move(*out);
  }
}

}  // namespace nccl_ha::test
