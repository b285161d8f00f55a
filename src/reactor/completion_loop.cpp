#include "nccl_ha/reactor/completion_loop.hpp"

#include <array>
#include <atomic>
#include <optional>

#include "nccl_ha/reactor/fd_watcher.hpp"

namespace nccl_ha::reactor {

struct CompletionLoop::State {
  State(CqEventSource& s, Handler h, ErrorHandler e, Options o)
      : source(s), handler(std::move(h)), on_error(std::move(e)), options(std::move(o)) {}

  CqEventSource& source;
  Handler handler;
  ErrorHandler on_error;
  Options options;
  std::optional<FdWatcher> watcher;  // progress thread only
  bool closed = false;               // progress thread only
  bool started = false;              // progress thread only
  std::atomic<std::uint64_t> wakeups{0}, events{0}, completions{0}, ack_calls{0};
  std::array<ibv_wc, 32> wcs{};

  void fail(const char* what) {
    HA_WARN("%s: completion loop stopped: %s", options.name.c_str(), what);
    closed = true;
    if (on_error) on_error(what);
  }

  // Polls until the CQ is empty (or the handler closed us). False on a poll error.
  bool drain() {
    while (!closed) {
      int n = source.poll(wcs);
      if (n < 0) {
        fail("ibv_poll_cq failed");
        return false;
      }
      if (n == 0) return true;
      completions.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      try {
        handler(std::span<const ibv_wc>(wcs.data(), static_cast<std::size_t>(n)));
      } catch (const std::exception& e) {
        HA_ERROR("%s: completion handler threw: %s", options.name.c_str(), e.what());
        fail("the completion handler threw");
        return false;
      } catch (...) {
        fail("the completion handler threw");
        return false;
      }
      if (static_cast<std::size_t>(n) < wcs.size()) return true;
    }
    return true;
  }
};

CompletionLoop::CompletionLoop(Reactor& reactor, CqEventSource& source, Handler on_completions,
                               ErrorHandler on_error, Options options)
    : reactor_(reactor),
      state_(std::make_shared<State>(source, std::move(on_completions), std::move(on_error), std::move(options))) {}

CompletionLoop::~CompletionLoop() { close(); }

void CompletionLoop::start() {
  reactor_.run_sync([this] {
    if (state_->started || state_->closed) return;
    state_->started = true;
    state_->watcher.emplace(reactor_.executor(), state_->source.event_fd());
    reactor_.spawn(state_->options.name + " completion loop", run(state_));
  });
}

void CompletionLoop::close() {
  reactor_.run_sync([this] {
    if (state_->closed && !state_->watcher) return;
    state_->closed = true;
    state_->watcher.reset();  // cancels a pending wait and deregisters the fd now
  });
}

CompletionLoopStats CompletionLoop::stats() const noexcept {
  return {state_->wakeups.load(), state_->events.load(), state_->completions.load(), state_->ack_calls.load()};
}

asio::awaitable<void> CompletionLoop::run(std::shared_ptr<State> s) {
  if (!s->source.arm()) {
    s->fail("ibv_req_notify_cq failed");
    co_return;
  }
  // Completions that arrived before the first arm raise no event: collect them now.
  if (!s->drain()) co_return;
  while (!s->closed) {
    auto ec = co_await s->watcher->readable();
    if (s->closed) break;
    if (ec) {
      if (ec != asio::error::operation_aborted) s->fail("waiting on the completion channel failed");
      break;
    }
    s->wakeups.fetch_add(1, std::memory_order_relaxed);
    int n = s->source.take_events();
    if (n < 0) {
      s->fail("ibv_get_cq_event failed");
      break;
    }
    s->events.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    if (s->source.unacked_events() >= s->options.ack_batch) {
      s->source.ack_events();
      s->ack_calls.fetch_add(1, std::memory_order_relaxed);
    }
    if (!s->source.arm()) {
      s->fail("ibv_req_notify_cq failed");
      break;
    }
    if (!s->drain()) break;
  }
}

}  // namespace nccl_ha::reactor
