// Reactor::offload (reactor.hpp, "Blocking work"): the jobs it hands to the WorkerPool. Included
// by reactor.hpp.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "nccl_ha/reactor/log.hpp"
#include "nccl_ha/reactor/worker_pool.hpp"

namespace nccl_ha::reactor {

namespace asio = boost::asio;

namespace offload_detail {

// fn's outcome: its value (non-void) or what it threw.
template <class R>
struct Outcome {
  std::optional<R> value;
  std::exception_ptr error;
};
template <>
struct Outcome<void> {
  std::exception_ptr error;
};

template <class R, class F>
void run_into(F& fn, Outcome<R>& out) noexcept {
  try {
    if constexpr (std::is_void_v<R>)
      fn();
    else
      out.value.emplace(fn());
  } catch (...) {
    out.error = std::current_exception();
  }
}

// What a refused job (the reactor stops) delivers.
inline std::exception_ptr aborted() {
  return std::make_exception_ptr(boost::system::system_error(asio::error::operation_aborted, "offload refused"));
}

// The executor `ex` with outstanding work tracked: while a job holds it, the io_context's run()
// does not return, so the job's outcome is delivered.
template <class Executor>
auto tracked(const Executor& ex) {
  return asio::prefer(ex, asio::execution::outstanding_work.tracked);
}

// co_await offload(fn): fn and the outcome live in the awaiting frame.
template <class F, class R, class Handler>
class AwaitJob final : public WorkerPool::Job {
 public:
  AwaitJob(F& fn, Outcome<R>& out, Handler handler)
      : fn_(fn), out_(out), handler_(std::move(handler)), work_(tracked(asio::get_associated_executor(handler_))) {}
  void run() noexcept override {
    run_into(fn_, out_);
    resume();
  }
  void refuse() noexcept override {
    out_.error = aborted();
    resume();
  }

 private:
  void resume() noexcept { asio::post(work_, std::move(handler_)); }

  F& fn_;
  Outcome<R>& out_;
  Handler handler_;
  decltype(tracked(asio::get_associated_executor(std::declval<Handler&>()))) work_;
};

// offload(fn, done): the job owns both.
template <class F, class Done, class Executor>
class CallbackJob final : public WorkerPool::Job {
 public:
  using R = std::invoke_result_t<F&>;
  CallbackJob(F fn, Done done, const Executor& ex) : fn_(std::move(fn)), done_(std::move(done)), work_(tracked(ex)) {}
  void run() noexcept override {
    Outcome<R> out;
    run_into(fn_, out);
    deliver(std::move(out));
  }
  void refuse() noexcept override {
    Outcome<R> out;
    out.error = aborted();
    deliver(std::move(out));
  }

 private:
  void deliver(Outcome<R> out) noexcept {
    asio::post(work_, [done = std::move(done_), out = std::move(out)]() mutable {
      try {
        if constexpr (std::is_void_v<R>)
          done(out.error);
        else
          done(out.error, std::move(out.value));
      } catch (const std::exception& e) {
        HA_ERROR("reactor: the completion of offloaded work threw: %s", e.what());
      } catch (...) {
        HA_ERROR("reactor: the completion of offloaded work threw an unknown exception");
      }
    });
  }

  F fn_;
  Done done_;
  decltype(tracked(std::declval<const Executor&>())) work_;
};

}  // namespace offload_detail

}  // namespace nccl_ha::reactor
