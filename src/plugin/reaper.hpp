// Destroys retired paths on a thread of its own. Destroying a QP whose port just went down can
// block in the kernel for tens of seconds (Soft-RoCE waits for its packets still queued on the
// dead link), so neither the data path (a failover, a re-protection, closeSend / closeRecv) nor
// the progress thread may do it. The comm's registrations are released at once by their owners,
// so a retired QP can no longer reach the comm's memory.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace nccl_ha::plugin {

struct Path;

class Reaper {
 public:
  Reaper();
  ~Reaper();  // destroys whatever is still queued, then joins (before the devices are closed)
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  void retire(std::shared_ptr<Path> path);  // null is ignored

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Path>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// Hands `path` to the process's reaper (destroys it inline when the plugin is not initialised).
void retire(std::shared_ptr<Path> path);

}  // namespace nccl_ha::plugin
