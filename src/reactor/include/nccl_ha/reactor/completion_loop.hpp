// CompletionLoop: drives one completion queue from its completion channel on the reactor.
//
//   arm (req_notify) -> wait until the channel fd is readable -> get_cq_event (drain) ->
//   ack in batches -> re-arm -> poll until empty -> hand the work completions to the handler
//
// Re-arming before polling closes the race where a completion lands between the last poll and
// the arm. Events are acknowledged in batches of `ack_batch`; the rest are acknowledged by the
// CQ's owner before it destroys the CQ (see CqEventSource), so destroying a CQ with pending
// events never hangs in ibv_destroy_cq.
//
// Thread-safety: construct anywhere; start()/close() from any thread (they hop to the progress
// thread through Reactor::run_sync). The handler runs on the progress thread. close() (or the
// destructor) must run before the CqEventSource is destroyed and before the reactor is
// destroyed; after close() returns the handler is never called again.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "nccl_ha/reactor/reactor.hpp"

namespace nccl_ha::reactor {

// What the loop needs from a completion queue. net::CompletionQueue implements it with verbs;
// tests substitute an eventfd.
class CqEventSource {
 public:
  virtual ~CqEventSource() = default;
  virtual int event_fd() const noexcept = 0;  // the completion channel's fd
  virtual bool arm() noexcept = 0;            // ibv_req_notify_cq(cq, 0)
  // Takes every pending event off the channel without blocking; returns how many (0 when none,
  // -1 on a real error). The source counts them for acknowledgement.
  virtual int take_events() noexcept = 0;
  virtual void ack_events() noexcept = 0;     // acknowledge everything taken so far
  virtual unsigned unacked_events() const noexcept = 0;
  virtual int poll(std::span<ibv_wc> out) noexcept = 0;  // ibv_poll_cq; <0 on error
};

struct CompletionLoopStats {
  std::uint64_t wakeups = 0;
  std::uint64_t events = 0;
  std::uint64_t completions = 0;
  std::uint64_t ack_calls = 0;
};

struct CompletionLoopOptions {
  unsigned ack_batch = 16;  // acknowledge CQ events every this many
  std::string name = "cq";  // for log lines
};

class CompletionLoop {
 public:
  using Options = CompletionLoopOptions;
  using Handler = std::function<void(std::span<const ibv_wc>)>;
  // Called once when the loop dies on an error (poll or arm failure); progress thread.
  using ErrorHandler = std::function<void(const char* what)>;

  CompletionLoop(Reactor& reactor, CqEventSource& source, Handler on_completions,
                 ErrorHandler on_error = nullptr, Options options = {});
  ~CompletionLoop();
  CompletionLoop(const CompletionLoop&) = delete;
  CompletionLoop& operator=(const CompletionLoop&) = delete;

  void start();
  void close();

  // Snapshot; exact when read on the progress thread or after close().
  CompletionLoopStats stats() const noexcept;

 private:
  struct State;
  static asio::awaitable<void> run(std::shared_ptr<State> state);

  Reactor& reactor_;
  std::shared_ptr<State> state_;
};

}  // namespace nccl_ha::reactor
