#include "reaper.hpp"

#include <pthread.h>

#include "comm.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {

Reaper::Reaper() : thread_([this] { run(); }) {}

Reaper::~Reaper() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Reaper::retire(std::shared_ptr<Path> path) {
  if (!path) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(path));
  }
  cv_.notify_one();
}

void Reaper::run() {
  pthread_setname_np(pthread_self(), "nccl-ha-reaper");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::shared_ptr<Path> p = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    p.reset();  // the QP and CQ are destroyed here (unless a job still holds the path)
    lock.lock();
  }
}

void retire(std::shared_ptr<Path> path) {
  if (State* st = state())
    st->reaper.retire(std::move(path));
}

}  // namespace nccl_ha::plugin
