// Process-wide plugin state, created by the first init() and released by the last finalize()
// (v11+) or at unload.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "device.hpp"
#include "reaper.hpp"
#include "nccl_ha/reactor/reactor.hpp"

namespace nccl_ha::plugin {

struct State {
  Config config;
  reactor::Reactor reactor;
  std::vector<std::unique_ptr<Device>> devices;
  Reaper reaper;  // after `devices`: destroyed (joined) before them
  std::string handshake_ip;  // the address listen() advertises in handles ("fe80::1%eth0" if link-local)
  std::string handshake_if;  // its interface
  bool gpu_memory = false;   // a GPU peer-memory client is loaded (gdr.hpp): ptrSupport has CUDA
  // Receive comms get loopback QPs for RDMA READ flushes (HA_NCCL_FORCE_FLUSH, or GPU memory).
  bool flush_qps() const { return config.force_flush || gpu_memory; }
};

// nullptr before init() succeeded.
State* state() noexcept;
// The device `dev`, or nullptr (with a WARN naming `what`) for an index out of range.
Device* device_or_warn(int dev, const char* what) noexcept;

}  // namespace nccl_ha::plugin
