// Destroys paths (QP + CQ) off the data path and the progress thread, on a small pool of threads
// of its own, and bounds how long finalize waits for them.
//
// Why: destroying a QP whose port just went down can block in the kernel for tens of seconds
// (Soft-RoCE waits for its packets still queued on the dead link; 52 s measured). Neither NCCL's
// thread (closeSend / closeRecv), nor the progress thread (failover, re-protection), nor
// finalize may wait for that.
//
// How every path gets here: paths are created by new_path(), whose shared_ptr hands the Path to
// the reaper when its last reference goes, wherever that is (a comm closed by NCCL, a comm
// dropped with the reactor's abandoned coroutine frames at finalize, a re-protection job, a
// handshake that failed). So no QP is ever destroyed on NCCL's thread or the progress thread.
//
// retire() is the one entry for a path its owner gives up: it moves the QP to ERROR at once, on
// the caller's thread (ibv_modify_qp to ERROR does not block), so a late WRITE_WITH_IMM of the
// peer can never land in a buffer NCCL has reused, however long the destruction takes; the
// buffers' registrations may outlive the QP (NCCL's own, deregistered when it likes).
//
// Finalize (finish()): waits until a deadline for every path to be destroyed. What is still
// being destroyed then is handed off: the plugin pins itself in memory (dlopen NOLOAD|NODELETE of
// its own file, so NCCL's dlclose cannot unmap code a reaper thread will return into), the
// Devices (context, PD, completion channel) whose paths are not destroyed yet go to the reaper,
// which closes each after its last path, and says at INFO when it is done. One WARN line at
// finalize says how many QPs on which ports are destroyed in the background.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace nccl_ha::plugin {

struct Path;
struct Device;

class Reaper {
 public:
  static constexpr int kThreads = 4;  // destructions on dead ports block each thread for long

  Reaper();   // starts the pool
  ~Reaper();  // without finish(): waits for every queued path (no bound), joins
  Reaper(Reaper&&) noexcept;
  Reaper& operator=(Reaper&&) = delete;
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Every destruction from now on (with `down_only`, of a path whose port is down) waits `delay`
  // first: the test hook HA_NCCL_TEST_REAPER_DELAY_MS (test_hooks.hpp), set by init.
  void delay_destructions(std::chrono::milliseconds delay, bool down_only);

  // A new Path on `dev`, counted on the device; its last reference hands it to this reaper.
  std::shared_ptr<Path> new_path(Device& dev);

  // What finish() did (for its caller's log lines and tests).
  struct Outcome {
    bool handed_off = false;      // paths left to the background threads (the plugin is pinned)
    int pending = 0;              // paths queued or being destroyed at the deadline
    int held = 0;                 // paths still referenced elsewhere (comms never closed)
    std::string ports;            // "rxe0:1: 64, rxe1:1: 2" (pending per port)
    double waited_ms = 0;
  };
  // Finalize: waits until `deadline` for every path of `devices` to be destroyed, then closes
  // the devices that have none left. With paths still being destroyed, and `may_hand_off`, the
  // rest is handed off (see the header comment) and finish() returns; otherwise it waits for
  // the queue without bound. Devices whose paths are held elsewhere (never handed in) are left
  // open, and said so. Called once.
  Outcome finish(std::vector<std::unique_ptr<Device>> devices, std::chrono::steady_clock::time_point deadline,
                 bool may_hand_off);

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

// Moves the path's QP to ERROR now (this thread) and drops the caller's reference: the reaper
// destroys the path once nobody else holds it. Null is ignored.
void retire(std::shared_ptr<Path> path);

// Keeps the plugin's code mapped for the rest of the process (dlopen of its own file with
// RTLD_NOLOAD | RTLD_NODELETE). False if that failed.
bool pin_plugin_in_memory() noexcept;

}  // namespace nccl_ha::plugin
