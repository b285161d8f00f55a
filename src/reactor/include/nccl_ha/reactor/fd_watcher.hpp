// FdWatcher: awaits readiness of a file descriptor the caller owns (a completion-channel fd,
// a device's async-event fd, an eventfd). The fd is switched to non-blocking mode and is never
// closed by the watcher. Progress-thread only, except construction.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/system/error_code.hpp>

namespace nccl_ha::reactor {

namespace asio = boost::asio;

class FdWatcher {
 public:
  FdWatcher(const asio::any_io_executor& ex, int fd);
  ~FdWatcher();  // releases (does not close) the fd
  FdWatcher(const FdWatcher&) = delete;
  FdWatcher& operator=(const FdWatcher&) = delete;

  int fd() const noexcept { return fd_; }

  // Completes when the fd is readable. Returns operation_aborted after cancel() or when the
  // awaiting coroutine is cancelled; never throws.
  asio::awaitable<boost::system::error_code> readable();

  void cancel() noexcept;

 private:
  asio::posix::stream_descriptor desc_;
  int fd_;
};

// Sets O_NONBLOCK on fd; returns false (errno set) on failure.
bool set_nonblocking(int fd) noexcept;

}  // namespace nccl_ha::reactor
