#include "nccl_ha/reactor/reactor.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>

#include <pthread.h>

namespace nccl_ha::reactor {

Reactor::Reactor() = default;

Reactor::~Reactor() { stop(); }

void Reactor::start(const std::string& thread_name) {
  if (running_.exchange(true)) return;
  stopping_ = false;
  pool_.restart();
  ctx_.restart();
  work_.emplace(ctx_.get_executor());
  run_done_ = std::promise<void>();
  thread_ = std::thread([this, name = thread_name.substr(0, 15)] {
    pthread_setname_np(pthread_self(), name.c_str());
    thread_id_ = std::this_thread::get_id();
    for (;;) {
      try {
        ctx_.run();
        break;
      } catch (const std::exception& e) {
        // Handlers are wrapped, so this is a bug; keep the thread alive and say so.
        HA_ERROR("reactor: exception escaped a handler: %s", e.what());
      } catch (...) {
        HA_ERROR("reactor: unknown exception escaped a handler");
      }
    }
    thread_id_ = std::thread::id{};
    run_done_.set_value();
  });
}

void Reactor::stop(std::chrono::milliseconds grace) {
  if (!running_.load()) {
    if (!in_progress_thread()) pool_.stop();  // work offloaded without ever starting
    return;
  }
  if (in_progress_thread()) {
    // Cannot join ourselves: request the stop; the owner's stop() from another thread joins.
    stopping_ = true;
    cancel_all_tasks();
    work_.reset();
    pool_.request_stop();
    return;
  }
  std::lock_guard<std::mutex> serialize(stop_mutex_);  // concurrent stop() calls: one joins
  if (!running_.load()) return;
  stopping_ = true;
  auto finished = run_done_.get_future();
  asio::post(ctx_, [this] {
    // May still be queued when the thread has already left run() (stop requested from the
    // progress thread, or the grace period expired): then it runs first after a restart and
    // must not drop that run's work guard.
    if (!stopping_.load()) return;
    cancel_all_tasks();
    work_.reset();
  });
  // The workers finish what is queued (new jobs are refused) and are joined; the outcomes they
  // post keep run() going until delivered, so coroutines waiting for them unwind normally.
  pool_.stop();
  if (finished.wait_for(grace) == std::future_status::timeout) {
    HA_WARN("reactor: %zu coroutine(s) did not finish within %lld ms of stop; abandoning them",
            live_tasks_.load(), static_cast<long long>(grace.count()));
    ctx_.stop();
  }
  if (thread_.joinable()) thread_.join();
  // tasks_ keeps the entries of abandoned coroutines: their frames still live in ctx_ and refer
  // to them (name, cancellation signal, erase on exit) if a restart resumes them.
  work_.reset();
  running_ = false;
}

void Reactor::post(std::function<void()> f) {
  asio::post(ctx_, [f = std::move(f)] {
    try {
      f();
    } catch (const std::exception& e) {
      HA_ERROR("reactor: posted handler threw: %s", e.what());
    } catch (...) {
      HA_ERROR("reactor: posted handler threw an unknown exception");
    }
  });
}

void Reactor::run_sync(const std::function<void()>& f) {
  if (!running() || in_progress_thread()) {
    f();
    return;
  }
  std::promise<void> done;
  auto fut = done.get_future();
  asio::post(ctx_, [&f, &done] {
    try {
      f();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  fut.get();
}

void Reactor::spawn(std::string name, asio::awaitable<void> task, Done done) {
  if (stopping_.load()) {
    HA_DEBUG("reactor: not starting '%s': reactor is stopping", name.c_str());
    return;
  }
  live_tasks_.fetch_add(1, std::memory_order_relaxed);
  // awaitable is move-only; asio::post accepts move-only handlers.
  asio::post(ctx_, [this, name = std::move(name), task = std::move(task), done = std::move(done)]() mutable {
    start_task(std::move(name), std::move(task), std::move(done));
  });
}

void Reactor::start_task(std::string name, asio::awaitable<void> task, Done done) {
  if (stopping_.load()) {
    live_tasks_.fetch_sub(1, std::memory_order_relaxed);
    return;  // the awaitable is destroyed unstarted
  }
  auto it = tasks_.emplace(tasks_.end());
  it->name = std::move(name);
  auto on_exit = [this, it, done = std::move(done)](std::exception_ptr ep) {
    if (ep) {
      try {
        std::rethrow_exception(ep);
      } catch (const boost::system::system_error& e) {
        if (e.code() == asio::error::operation_aborted)
          HA_DEBUG("reactor: '%s' cancelled", it->name.c_str());
        else
          HA_WARN("reactor: '%s' failed: %s", it->name.c_str(), e.what());
      } catch (const std::exception& e) {
        HA_WARN("reactor: '%s' failed: %s", it->name.c_str(), e.what());
      } catch (...) {
        HA_WARN("reactor: '%s' failed with an unknown exception", it->name.c_str());
      }
    }
    if (done) {
      try {
        done(ep);
      } catch (...) {
        HA_ERROR("reactor: completion callback of '%s' threw", it->name.c_str());
      }
    }
    tasks_.erase(it);
    live_tasks_.fetch_sub(1, std::memory_order_relaxed);
  };
  asio::co_spawn(ctx_, std::move(task), asio::bind_cancellation_slot(it->cancel.slot(), std::move(on_exit)));
}

void Reactor::cancel_all_tasks() {
  for (auto& t : tasks_) t.cancel.emit(asio::cancellation_type::terminal);
}

}  // namespace nccl_ha::reactor
