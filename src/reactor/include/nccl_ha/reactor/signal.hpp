// AsyncSignal: a level-triggered wake-up for coroutines on the reactor (like a condition
// variable for one io_context). notify() may be called from the progress thread only; a
// coroutine waiting in wait() resumes. Spurious wake-ups are allowed: re-check your predicate.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

namespace nccl_ha::reactor {

namespace asio = boost::asio;

class AsyncSignal {
 public:
  explicit AsyncSignal(const asio::any_io_executor& ex);

  void notify() noexcept;

  // Waits for notify(), for at most `timeout`. Returns false on timeout. Throws
  // (operation_aborted) only when the waiting coroutine itself is cancelled.
  asio::awaitable<bool> wait(std::chrono::steady_clock::duration timeout);

 private:
  asio::steady_timer timer_;
  bool pending_ = false;
};

}  // namespace nccl_ha::reactor
