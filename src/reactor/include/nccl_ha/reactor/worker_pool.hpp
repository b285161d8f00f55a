// WorkerPool: a few threads that run blocking work (verbs calls that sleep in the kernel, file
// I/O) for the reactor, so that the progress thread stays free for port events, completion
// channels and the failover conversations. Owned by the Reactor (Reactor::offload, reactor.hpp);
// usable on its own.
//
//  * Threads are created on demand, one more whenever a job is queued and every thread is busy,
//    up to the maximum (a process that never offloads has none). They carry a name (top -H) and
//    may run at a lower CPU priority than the rest of the process (`nice`, Linux per-thread
//    nice): their work is background work, and on a busy core the thread that reacts to events
//    must get the CPU first.
//  * Jobs run in the order they were submitted (with one thread, one after another), except that
//    a job submitted with JobOrder::peer_waits goes before every ordinary job still queued (after
//    the peer_waits jobs queued before it): work that a remote peer waits for under a deadline
//    (a handshake's reply) is not put behind a burst of work nobody waits for yet.
//  * stop() refuses new jobs (Job::refuse() is called instead of Job::run()), lets the threads
//    finish every job already queued, and joins them: a job in flight is never abandoned (it
//    may hold verbs objects). restart() accepts jobs again. request_stop() only refuses new
//    jobs and tells the threads to exit when the queue is empty; a later stop() joins them.
//  * submit(), request_stop() and threads() may be called from any thread; stop() and
//    restart() from one owner thread, never from a worker.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nccl_ha::reactor {

// Adds `increment` (> 0) to the calling thread's nice value (Linux: a per-thread attribute; raising
// it needs no privilege, lowering it back does). Returns false, with the reason in `why`, when the
// kernel refused.
bool lower_this_thread_priority(int increment, std::string* why = nullptr);

enum class JobOrder : unsigned char {
  fifo,        // after every job queued
  peer_waits,  // a remote peer waits for its outcome: before every fifo job queued
};

class WorkerPool {
 public:
  struct Job {
    virtual ~Job() = default;
    virtual void run() noexcept = 0;     // on a worker thread
    virtual void refuse() noexcept = 0;  // instead of run(), on the submitting thread: the pool stops
  };

  // `name`: the threads' name (at most 15 characters are kept, the kernel's limit); `nice`: added
  // to each thread's nice value when it starts (0: as the process; raising it needs no privilege).
  explicit WorkerPool(std::size_t max_threads = 2, std::string name = "rdma-worker", int nice = 0);
  ~WorkerPool();  // stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Changes the maximum, the name and the nice increment of threads created from now on.
  void configure(std::size_t max_threads, std::string name, int nice = 0);

  // Queues `job` (JobOrder above); returns false (after calling job->refuse()) when the pool is stopping.
  bool submit(std::unique_ptr<Job> job, JobOrder order = JobOrder::fifo);

  void request_stop();
  void stop();
  void restart();

  std::size_t threads() const;  // alive now
  std::size_t pending() const;  // queued or running

 private:
  void run_worker();

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;  // the first `waited_` are JobOrder::peer_waits jobs
  std::size_t waited_ = 0;
  std::vector<std::thread> threads_;
  std::size_t max_threads_;
  std::string name_;
  int nice_ = 0;
  std::size_t idle_ = 0;     // threads waiting for a job
  std::size_t running_ = 0;  // jobs being run
  bool stopping_ = false;
};

}  // namespace nccl_ha::reactor
