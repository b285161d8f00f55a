// Process-wide plugin state, created by the first init() and released by the last finalize()
// (v11+) or at unload.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/reaper.hpp"
#include "nccl_ha/reactor/reactor.hpp"
#include "runtime/admission.hpp"
#include "runtime/config.hpp"
#include "runtime/device.hpp"
#include "runtime/monitor.hpp"
#include "runtime/output_file.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/vdevice.hpp"

namespace nccl_ha::plugin {

struct CommBase;
class RescueService;  // rescue.hpp
class AttemptGate;    // attempt_gate.hpp
struct LivenessRegistry;  // liveness.hpp

// The live comms, for the Prometheus snapshot (stats.cpp). Control-plane code only: registered
// by start_control, dropped by close (which folds the comm's counters into `closed`, so the
// totals stay monotonic); the exporter samples under `mutex` (each comm only if its try-lock is
// free, else its last sample). The data path never takes `mutex`.
struct CommRegistry {
  struct Entry {
    const CommBase* key = nullptr;
    std::weak_ptr<CommBase> comm;
    CommSample last;  // progress thread (exporter) or close, under `mutex`
  };
  std::mutex mutex;
  std::vector<Entry> live;
  CommCounters closed;
};

// HA_NCCL_STATS_FILE lines not yet appended (stats.cpp): written by one offloaded job at a time,
// in order. Any thread appends under `mutex`.
struct StatsOutbox {
  std::mutex mutex;
  std::string pending;
  bool writing = false;  // a job is appending `pending`
  bool warned = false;   // the writing job's: a failure was WARNed about, none since a chunk was written
  std::unique_ptr<AppendFile> file;  // the writing job's (one at a time): HA_NCCL_STATS_FILE, kept open
};

// Teardown (init.cpp destroy_state) runs in this order: the reactor stops (its coroutines are
// cancelled; those that do not unwind within the grace are abandoned), the devices' event pumps
// close (they live on the reactor), the comms NCCL left open are closed, then the reactor is
// destroyed with the frames it abandoned (control tasks, handshakes, verbs jobs: their comms and
// paths go to the reaper), and only then does the reaper finish and the devices close (or go to
// the reaper with their last paths). The member order gives the same order to ~State: reactor
// first, then the reaper, then the devices.
struct State {
  State();  // init.cpp, as ~State
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State();  // closes the devices' event pumps before the reactor goes

  Config config;
  // The HA_NCCL_TEST_* fault injections of the VM tests (test_hooks.hpp): all off, and not read,
  // in a build without -DNCCL_HA_TEST_HOOKS=ON.
  TestHooks hooks;
  std::vector<std::unique_ptr<Device>> devices;
  // NCCL's fused NICs (makeVDevice), numbered after the ports (set once the ports are numbered).
  std::unique_ptr<VDeviceTable> vdevices;
  Reaper reaper;  // after `devices`: finished (joined) before they are closed
  std::string handshake_ip;  // the address listen() advertises in handles ("fe80::1%eth0" if link-local)
  std::string handshake_if;  // its interface
  std::string host;        // gethostname(), read once at init
  std::string stats_path;  // HA_NCCL_STATS_FILE with %h / %p expanded ("": no stats records)
  std::string prom_path;   // HA_NCCL_PROM_FILE with %h / %p expanded ("": no snapshot)
  CommRegistry comms;
  // HA's own, owned here (never null); progress thread only.
  std::unique_ptr<LivenessRegistry> pairs;  // heartbeats per pair of ports (liveness.hpp)
  std::unique_ptr<AttemptGate> attempts;    // re-protection attempts in flight (attempt_gate.hpp)
  StatsOutbox stats_out;
  // Re-protection over TCP when a connection has no path left (rescue.hpp), with HA on. It lives
  // on the reactor: destroy_state() stops and drops it before the reactor goes.
  std::shared_ptr<RescueService> rescue;
  // Sockets of the listeners and the rescue service that have not proved the secret yet
  // (admission.hpp), progress thread only.
  Admission admission;
  bool gpu_memory = false;   // a GPU peer-memory client is loaded (gdr.hpp): ptrSupport has CUDA
  // Last member: destroyed first, with whatever coroutine frames it still holds, while the
  // devices and the reaper those frames' comms and paths need are still there.
  reactor::Reactor reactor;
  // Receive comms on `d` get loopback QPs for RDMA READ flushes: with HA_NCCL_FORCE_FLUSH, or
  // where GPU memory can be registered - a peer-memory client, or dma-buf offered on `d` (net_ib's
  // rule) - unless NCCL_IB_GDR_FLUSH_DISABLE.
  bool flush_qps(const Device& d) const {
    return config.force_flush || (!config.gdr_flush_disable && (gpu_memory || d.dmabuf_offered));
  }
  // What a new comm is built from (comm.hpp): these settings, this reaper.
  CommEnv comm_env() { return {&config, &reaper, &hooks}; }
};

// nullptr before init() succeeded.
State* state() noexcept;
// The device `dev`, or nullptr (with a WARN naming `what`) for an index out of range.
Device* device_or_warn(int dev, const char* what) noexcept;
// The ports of device `dev`: the port itself, or a fused device's members in NCCL's order (makeVDevice);
// none (with a WARN naming `what`) for a number that is neither.
struct DeviceMembers {
  std::array<Device*, kMaxVDeviceMembers> ports{};
  int count = 0;
  const VDevice* vdevice = nullptr;  // the fused device itself (null: a port)
  Device& first() const noexcept { return *ports[0]; }
};
std::optional<DeviceMembers> members_or_warn(int dev, const char* what) noexcept;

}  // namespace nccl_ha::plugin
