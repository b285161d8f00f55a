// The reactor: one boost::asio::io_context driven by one progress thread.
//
// Everything asynchronous in nccl-ha runs here: completion-channel loops, device async-event
// pumps, the TCP handshakes and the timers. State machines are C++20 coroutines
// (asio::awaitable) started with Reactor::spawn().
//
// Thread-safety contract
// ----------------------
//  * start(), stop(), post(), spawn(), run_sync(), running() and offload(fn, done) may be called
//    from any thread; co_await offload(fn) only in a coroutine on the reactor.
//    stop() and run_sync() must not be called from the progress thread itself when they have to
//    wait (run_sync() detects that case and runs the function inline; stop() from the progress
//    thread only requests the stop and returns).
//  * Coroutines and handlers run on the progress thread only, so state touched exclusively by
//    them needs no lock. Anything shared with other threads must be handed over by post() /
//    run_sync() or be atomic.
//  * No exception ever escapes the progress thread: spawn() catches and logs what a coroutine
//    throws (and hands it to its completion callback); post() handlers are wrapped likewise.
//  * stop() cancels every spawned coroutine with terminal cancellation (their pending async
//    operations finish with operation_aborted), lets them unwind, then joins the thread. A
//    coroutine that ignores cancellation for longer than the grace period is abandoned: the
//    io_context is stopped and its frame destroyed with the context.
//  * stop() called from the progress thread only requests the stop; until the owner's stop()
//    from another thread has joined, run_sync() from other threads may wait for ever: owners
//    call stop() from their own thread.
//  * spawn() before start() queues the coroutine for the first run; after stop() (until the
//    next start()) it is dropped with a DEBUG line.
//  * The reactor can be started again after stop().
//
// Blocking work
// -------------
// Work that can block (QP/CQ creation, modify_qp to RTR/RTS - on RoCE it resolves the GID and
// route -, ibv_query_port, file I/O) must not sit in front of port events and failover
// conversations on the progress thread: offload() runs it on the Reactor's worker threads
// (worker_pool.hpp: created on demand, 2 at most unless set_workers() says otherwise) and hands
// the outcome back to the progress thread:
//  * `co_await reactor.offload(fn)` in a coroutine: fn() on a worker; the coroutine resumes on
//    its executor with fn's result, or with what fn threw rethrown. fn is a named lvalue (GCC 12:
//    no temporaries in co_await expressions); it and what it refers to live in the awaiting
//    frame, which stays suspended until the job has finished or was refused. The wait is not
//    cancellable: a job is never abandoned, so fn may refer to the frame's locals.
//  * `reactor.offload(fn, done)` from any thread: fn() on a worker, then on the progress thread
//    done(std::exception_ptr) for a void fn, done(std::exception_ptr, std::optional<R>) for one
//    returning R (nullopt when it threw). What done throws is logged.
//  * stop() refuses new jobs (the awaiting coroutine gets operation_aborted thrown, done gets it
//    as its exception), runs every job already queued, and joins the workers before the progress
//    thread; the outcomes of those jobs still reach the progress thread (a job keeps the
//    io_context's run() going until its outcome is delivered). So when stop() returns, no job
//    runs and none will: owners may close what the jobs used (devices).
//  * A job refused after the progress thread has ended (after stop()) delivers its outcome on
//    the next start(), or never if the reactor is destroyed first.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <list>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include "nccl_ha/reactor/log.hpp"
#include "nccl_ha/reactor/offload.hpp"
#include "nccl_ha/reactor/worker_pool.hpp"

namespace nccl_ha::reactor {

namespace asio = boost::asio;

class Reactor {
 public:
  using Executor = asio::io_context::executor_type;
  using Done = std::function<void(std::exception_ptr)>;

  Reactor();
  ~Reactor();  // stop()
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Starts the progress thread, named `thread_name` (what top -H, ps -L and gdb show; at most 15
  // characters are kept, the kernel's limit). No-op when already running.
  void start(const std::string& thread_name = "rdma-reactor");

  // Cancels all coroutines, waits up to `grace` for them to unwind, joins the thread.
  // Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  bool running() const noexcept { return running_.load(std::memory_order_acquire); }
  bool in_progress_thread() const noexcept { return std::this_thread::get_id() == thread_id_.load(); }

  asio::io_context& context() noexcept { return ctx_; }
  Executor executor() noexcept { return ctx_.get_executor(); }

  // Runs f on the progress thread, later. Exceptions are logged, never propagated.
  void post(std::function<void()> f);

  // Runs f on the progress thread and waits for it (inline when already there or when the
  // reactor is not running). For setup and teardown, never for the data path.
  void run_sync(const std::function<void()>& f);

  // Starts `task` on the progress thread. It is cancelled by stop(). `done` (optional) runs on the
  // progress thread when the coroutine ends, with the exception it threw, if any. `name` is used
  // in log lines.
  void spawn(std::string name, asio::awaitable<void> task, Done done = nullptr);

  // Number of coroutines started by spawn() that have not finished yet (progress-thread view).
  std::size_t live_tasks() const noexcept { return live_tasks_.load(std::memory_order_relaxed); }

  // Blocking work (see "Blocking work" above).
  // `order`: JobOrder::peer_waits for work a remote peer waits for under a deadline (worker_pool.hpp).
  template <class F>
  asio::awaitable<std::invoke_result_t<F&>> offload(F& fn, JobOrder order = JobOrder::fifo) {
    using R = std::invoke_result_t<F&>;
    offload_detail::Outcome<R> out;
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this, &fn, &out, order](auto handler) {
          using Job = offload_detail::AwaitJob<F, R, decltype(handler)>;
          pool_.submit(std::make_unique<Job>(fn, out, std::move(handler)), order);
        },
        asio::use_awaitable);
    if (out.error) std::rethrow_exception(out.error);
    if constexpr (std::is_void_v<R>)
      co_return;
    else
      co_return std::move(*out.value);
  }
  template <class F, class Done>
  void offload(F fn, Done done, JobOrder order = JobOrder::fifo) {
    using Job = offload_detail::CallbackJob<F, Done, Executor>;
    pool_.submit(std::make_unique<Job>(std::move(fn), std::move(done), ctx_.get_executor()), order);
  }
  // The workers' maximum, their thread name (at most 15 characters are kept) and nice increment
  // (worker_pool.hpp); for threads created from now on.
  void set_workers(std::size_t max_threads, std::string name, int nice = 0) {
    pool_.configure(max_threads, std::move(name), nice);
  }
  WorkerPool& workers() noexcept { return pool_; }

 private:
  struct Task {
    std::string name;
    asio::cancellation_signal cancel;
  };

  void start_task(std::string name, asio::awaitable<void> task, Done done);
  void cancel_all_tasks();

  asio::io_context ctx_;
  std::optional<asio::executor_work_guard<Executor>> work_;
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> running_{false};
  std::atomic<bool> stopping_{false};
  std::promise<void> run_done_;
  std::mutex stop_mutex_;  // serializes stop() callers off the progress thread
  std::list<Task> tasks_;  // progress thread only
  std::atomic<std::size_t> live_tasks_{0};
  WorkerPool pool_;  // after ctx_: joined (by stop(), at the latest by its destructor) before ctx_ goes
};

}  // namespace nccl_ha::reactor
