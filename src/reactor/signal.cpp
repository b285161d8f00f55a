#include "nccl_ha/reactor/signal.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nccl_ha::reactor {

AsyncSignal::AsyncSignal(const asio::any_io_executor& ex) : timer_(ex) {}

void AsyncSignal::notify() noexcept {
  pending_ = true;
  timer_.cancel();
}

asio::awaitable<bool> AsyncSignal::wait(std::chrono::steady_clock::duration timeout) {
  if (pending_) {
    pending_ = false;
    co_return true;
  }
  timer_.expires_after(timeout);
  auto [ec] = co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none)
    throw boost::system::system_error(asio::error::operation_aborted);
  if (pending_) {
    pending_ = false;
    co_return true;
  }
  (void)ec;
  co_return false;
}

}  // namespace nccl_ha::reactor
