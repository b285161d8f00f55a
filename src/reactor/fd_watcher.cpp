#include "nccl_ha/reactor/fd_watcher.hpp"

#include <fcntl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nccl_ha::reactor {

bool set_nonblocking(int fd) noexcept {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  if (flags & O_NONBLOCK) return true;
  return fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

FdWatcher::FdWatcher(const asio::any_io_executor& ex, int fd) : desc_(ex), fd_(fd) {
  set_nonblocking(fd);
  desc_.assign(fd);
}

FdWatcher::~FdWatcher() {
  boost::system::error_code ignored;
  desc_.cancel(ignored);
  (void)desc_.release();  // the owner closes the fd (ibv_destroy_comp_channel, close(), ...)
}

asio::awaitable<boost::system::error_code> FdWatcher::readable() {
  auto [ec] = co_await desc_.async_wait(asio::posix::stream_descriptor::wait_read,
                                        asio::as_tuple(asio::use_awaitable));
  co_return ec;
}

void FdWatcher::cancel() noexcept {
  boost::system::error_code ignored;
  desc_.cancel(ignored);
}

}  // namespace nccl_ha::reactor
