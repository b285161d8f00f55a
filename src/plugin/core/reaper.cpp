#include "core/reaper.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "core/path.hpp"
#include "nccl_ha/reactor/worker_pool.hpp"
#include "runtime/device.hpp"
#include "runtime/log.hpp"

namespace nccl_ha::plugin {

using Clock = std::chrono::steady_clock;
constexpr int kReaperNice = 10;  // added to the reaper threads' nice value

struct Reaper::Core {
  std::mutex mutex;                  // guards everything below and Device::live_paths / reaping
  std::condition_variable work;      // a path queued, or the pool stops
  std::condition_variable progress;  // a path destroyed (finish() waits on it)
  std::deque<std::unique_ptr<Path>> queue;
  std::vector<std::thread> threads;
  int running = 0;                   // pool threads not finished
  bool stopping = false;             // threads leave once the queue is empty
  bool finished = false;             // finish() ran: `devices` are closed after their last path
  bool handed_off = false;           // finish() left paths to the pool (threads detached, plugin pinned)
  std::vector<std::unique_ptr<Device>> devices;  // handed over by finish(), still with live paths
  Clock::time_point handoff_at{};
  std::uint64_t destroyed_since_handoff = 0;
  std::string closed_names;          // devices the pool closed after the hand-off (INFO line)
  // delay_destructions() (the test hook HA_NCCL_TEST_REAPER_DELAY_MS): every destruction (with
  // `delay_down_only`, of a path whose port is down) waits this long first, as the kernel does on
  // a dead Soft-RoCE port under some loads, so that a test can show what a retired QP still
  // accepts meanwhile and what finalize does with destructions that outlast its bound.
  std::chrono::milliseconds delay{0};
  bool delay_down_only = false;
};

namespace {

// The ERROR transition of every path given up (retire) or dropped: nothing the peer still
// writes lands anywhere, from now on. Never blocks.
void stop_traffic(Path& p) noexcept {
  for (const auto& qp : p.qps)
    if (qp) (void)net::qp_to_error(qp.get());
}

// A path destroyed: counts it on its device and, after finish(), closes the handed-over devices
// that have no path left (outside the lock). Called with the lock held; may release it.
void after_destroy(Reaper::Core& c, std::unique_lock<std::mutex>& lock, Device& dev) {
  --dev.live_paths;
  if (c.handed_off) ++c.destroyed_since_handoff;
  c.progress.notify_all();
  if (!c.finished) return;
  std::vector<std::unique_ptr<Device>> unused;
  for (auto& d : c.devices)
    if (d->live_paths == 0) unused.push_back(std::move(d));
  std::erase(c.devices, nullptr);
  if (unused.empty()) return;
  for (const auto& d : unused) c.closed_names += (c.closed_names.empty() ? "" : ", ") + d->port.id();
  lock.unlock();
  unused.clear();  // PD, completion channel, context: their last QP and CQ are gone
  lock.lock();
}

// The next path to destroy: one on a port that is up first (quick), so that QPs stuck on a dead
// port do not hold back the others.
std::unique_ptr<Path> take_next(std::deque<std::unique_ptr<Path>>& q) {
  auto it = std::find_if(q.begin(), q.end(), [](const std::unique_ptr<Path>& p) {
    return p->dev->port_up.load(std::memory_order_relaxed);
  });
  if (it == q.end()) it = q.begin();
  std::unique_ptr<Path> p = std::move(*it);
  q.erase(it);
  return p;
}

void run(std::shared_ptr<Reaper::Core> core) {
  pthread_setname_np(pthread_self(), "ncclHaReaper");
  // Nothing waits for a destruction but finalize (bounded, see finish): on a busy core the
  // failovers that retire the paths come first (scale bench: the reaper took 15-20 % of the
  // guest's CPU in the first seconds of a 512-comm failover, beside the progress thread's 25 %).
  if (std::string why; !reactor::lower_this_thread_priority(kReaperNice, &why))
    HA_DEBUG("NET/HA: reaper thread: nice %+d not applied: %s", kReaperNice, why.c_str());
  Reaper::Core& c = *core;
  std::unique_lock<std::mutex> lock(c.mutex);
  for (;;) {
    c.work.wait(lock, [&c] { return !c.queue.empty() || c.stopping; });
    if (c.queue.empty()) break;
    std::unique_ptr<Path> p = take_next(c.queue);
    Device& dev = *p->dev;
    lock.unlock();
    if (c.delay.count() > 0 && (!c.delay_down_only || !dev.port_up.load(std::memory_order_relaxed)))
      std::this_thread::sleep_for(c.delay);
    p.reset();  // ibv_destroy_qp, ibv_destroy_cq: tens of seconds on a dead Soft-RoCE port
    lock.lock();
    --dev.reaping;
    after_destroy(c, lock, dev);
  }
  if (--c.running == 0 && c.handed_off) {
    const double s = std::chrono::duration<double>(Clock::now() - c.handoff_at).count();
    std::string open;
    for (const auto& d : c.devices)
      open += (open.empty() ? "" : ", ") + d->port.id() + " (" + std::to_string(d->live_paths) + " path(s) held)";
    HA_INFO("NET/HA: background reaper finished: %llu QP(s) destroyed %.1f s after finalize; closed %s%s%s",
            static_cast<unsigned long long>(c.destroyed_since_handoff), s,
            c.closed_names.empty() ? "no device" : c.closed_names.c_str(),
            open.empty() ? "" : "; still open (comms never closed): ", open.c_str());
  }
}

struct PathDeleter {
  std::shared_ptr<Reaper::Core> core;
  void operator()(Path* raw) const noexcept {
    std::unique_ptr<Path> p(raw);
    stop_traffic(*p);
    Reaper::Core& c = *core;
    std::unique_lock<std::mutex> lock(c.mutex);
    Device& dev = *p->dev;
    if (c.running == 0) {  // the pool is gone (finish() joined it): the device is still open
      lock.unlock();
      p.reset();
      lock.lock();
      after_destroy(c, lock, dev);
      return;
    }
    ++dev.reaping;
    c.queue.push_back(std::move(p));
    lock.unlock();
    c.work.notify_one();
  }
};

}  // namespace

Reaper::Reaper() : core_(std::make_shared<Core>()) {
  std::lock_guard<std::mutex> lock(core_->mutex);
  for (int i = 0; i < kThreads; ++i) {
    core_->threads.emplace_back(run, core_);
    ++core_->running;
  }
}

Reaper::Reaper(Reaper&&) noexcept = default;

void Reaper::delay_destructions(std::chrono::milliseconds delay, bool down_only) {
  std::lock_guard<std::mutex> lock(core_->mutex);
  core_->delay = delay;
  core_->delay_down_only = down_only;
}

Reaper::~Reaper() {
  if (core_ && !core_->finished) finish({}, Clock::time_point::max(), false);
}

std::shared_ptr<Path> Reaper::new_path(Device& dev) {
  auto p = std::make_unique<Path>();
  p->dev = &dev;
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    ++dev.live_paths;
  }
  return std::shared_ptr<Path>(p.release(), PathDeleter{core_});
}

Reaper::Outcome Reaper::finish(std::vector<std::unique_ptr<Device>> devices, Clock::time_point deadline,
                               bool may_hand_off) {
  Core& c = *core_;
  Outcome out;
  const auto t0 = Clock::now();
  std::unique_lock<std::mutex> lock(c.mutex);
  c.finished = true;
  auto reaping = [&devices] {
    int n = 0;
    for (const auto& d : devices) n += d->reaping;
    return n;
  };
  c.progress.wait_until(lock, deadline, [&] { return reaping() == 0 && c.queue.empty(); });
  out.waited_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  out.pending = reaping();
  for (const auto& d : devices) {
    out.held += d->live_paths - d->reaping;
    if (d->reaping)
      out.ports += (out.ports.empty() ? "" : ", ") + d->port.id() + ": " + std::to_string(d->reaping);
  }
  if (out.pending > 0 && !(may_hand_off && pin_plugin_in_memory())) {
    if (may_hand_off) {
      const char* why = dlerror();
      HA_WARN("NET/HA: finalize: cannot pin the plugin in memory (%s): waiting for the %d QP(s) still being "
              "destroyed", why ? why : "dladdr failed", out.pending);
    }
    c.progress.wait(lock, [&] { return reaping() == 0 && c.queue.empty(); });
  }
  if (reaping() == 0 && c.queue.empty()) {
    out.pending = 0;
  } else {
    out.handed_off = true;
    c.handed_off = true;
    c.handoff_at = Clock::now();
  }
  std::vector<std::unique_ptr<Device>> unused;
  for (auto& d : devices)
    (d->live_paths == 0 ? unused : c.devices).push_back(std::move(d));
  c.stopping = true;
  std::vector<std::thread> threads = std::move(c.threads);
  lock.unlock();
  c.work.notify_all();
  for (auto& t : threads) {
    if (out.handed_off) t.detach();  // each holds the core; the plugin stays mapped (pinned)
    else t.join();
  }
  unused.clear();  // devices without a path left: closed now
  return out;
}

void retire(std::shared_ptr<Path> path) {
  if (!path) return;
  stop_traffic(*path);
  path.reset();  // the last reference hands the path to the reaper
}

bool pin_plugin_in_memory() noexcept {
  static std::atomic<bool> pinned{false};
  if (pinned.load()) return true;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&pin_plugin_in_memory), &info) == 0 || !info.dli_fname) return false;
  // Never closed: the object stays mapped for the rest of the process.
  if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) return false;
  pinned.store(true);
  return true;
}

}  // namespace nccl_ha::plugin
