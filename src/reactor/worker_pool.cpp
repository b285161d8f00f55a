#include "nccl_ha/reactor/worker_pool.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::reactor {

bool lower_this_thread_priority(int increment, std::string* why) {
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));  // PRIO_PROCESS with a tid: this thread only
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && setpriority(PRIO_PROCESS, tid, now + increment) == 0) return true;
  if (why) *why = std::strerror(errno);
  return false;
}

WorkerPool::WorkerPool(std::size_t max_threads, std::string name, int nice)
    : max_threads_(max_threads ? max_threads : 1), name_(std::move(name)), nice_(nice) {}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::configure(std::size_t max_threads, std::string name, int nice) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_threads_ = max_threads ? max_threads : 1;
  name_ = std::move(name);
  nice_ = nice;
}

bool WorkerPool::submit(std::unique_ptr<Job> job, JobOrder order) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      if (order == JobOrder::peer_waits)
        queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(waited_++), std::move(job));
      else
        queue_.push_back(std::move(job));
      if (queue_.size() > idle_ && threads_.size() < max_threads_) {  // every thread busy
        try {
          threads_.emplace_back([this] { run_worker(); });
        } catch (const std::system_error& e) {
          // No new thread: the ones there take the job (one always exists after the first).
          HA_WARN("reactor: cannot start a worker thread: %s", e.what());
          if (threads_.empty()) {  // no thread ever: the queue holds this job alone
            job = std::move(queue_.back());
            queue_.pop_back();
            waited_ = 0;
          }
        }
      }
      if (!job) {
        cv_.notify_one();
        return true;
      }
    }
  }
  job->refuse();
  return false;
}

void WorkerPool::run_worker() {
  std::string name;
  int nice = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    name = name_.substr(0, 15);
    nice = nice_;
  }
  pthread_setname_np(pthread_self(), name.c_str());
  if (std::string why; nice != 0 && !lower_this_thread_priority(nice, &why))
    HA_DEBUG("reactor: worker %s: nice %+d not applied: %s", name.c_str(), nice, why.c_str());
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping, and nothing left to run
    std::unique_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    if (waited_ > 0) --waited_;
    ++running_;
    lock.unlock();
    job->run();
    job.reset();  // whatever the job owns goes here, off the lock
    lock.lock();
    --running_;
  }
}

void WorkerPool::request_stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void WorkerPool::stop() {
  request_stop();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    threads.swap(threads_);  // no thread is added while stopping
  }
  for (auto& t : threads) {
    if (!t.joinable()) continue;
    if (t.get_id() == std::this_thread::get_id())
      t.detach();  // misuse (stop from a job): it exits by itself once the queue is empty
    else
      t.join();
  }
}

void WorkerPool::restart() {
  stop();  // threads told to exit by request_stop() alone are joined first
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = false;
}

std::size_t WorkerPool::threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

std::size_t WorkerPool::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size() + running_;
}

}  // namespace nccl_ha::reactor
