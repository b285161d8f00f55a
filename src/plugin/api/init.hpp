// NCCL's face below the exported tables (api.cpp): the process's calls - init, devices,
// getProperties, the v11+ contexts - here (init.cpp); the connection calls in setup/setup.hpp, the
// data path's in datapath/p2p.hpp. One C++ implementation behind every ncclNet_vN table; sizes are
// size_t here, the adapters for older API versions convert.
//
// The layers below (src/plugin/README.md): setup/ (listen.cpp, connect.cpp and the handshake they
// share), datapath/ (p2p.cpp: isend / irecv / test; flush.cpp: iflush; reg.cpp: registration),
// ha/ (the control plane), core/ (the comm and its records), runtime/ (settings, devices);
// docs/architecture.md has the whole map.
//
// Threads (the plugin's one description of them; docs/architecture.md has the details):
//   NCCL's threads     call every entry point. The proxy thread's isend / irecv / test / iflush
//                      (path_ops.hpp) take the comm with Hold, a try-lock (CommBase::owned): when
//                      the control plane has it they answer "not yet"; they never wait and never
//                      allocate. listen / connect / accept do local work and return; their
//                      handshakes run on the progress thread.
//   progress thread    ncclHaProgress, the reactor's io_context: handshakes (listen.cpp,
//                      connect.cpp), every comm's control task (control_ops.hpp: heartbeats,
//                      detection, failover, re-protection, flush paths), port events, the stats
//                      and Prometheus timers. It takes a comm with Hold too and looks again later
//                      when NCCL's thread has it. Its one wait: CommBase::reg_mutex in the rebind
//                      steps (rebind.hpp), held meanwhile by regMr / deregMr or a worker's rebind.
//   workers            ncclHaWorker (Reactor::offload): verbs work that may block - creating
//                      comms, QP transitions, building standbys and flush paths, registering on a
//                      new device, writing the stats files. They touch only what their job owns.
//   reapers            ncclHaReaper (reaper.hpp): destroy retired QPs and CQs, which can block on
//                      a dead port; nothing else.
// The calls that wait for another thread: closeSend / closeRecv, iflush with a READ and deregMr
// take the comm with HoldWait (until the progress thread lets go); regMr / deregMr take
// CommBase::reg_mutex, which a worker's rebind holds while it registers; finalize waits for the
// reactor (bounded) and the reaper (bounded, then in the background).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "core/comm_params.hpp"
#include "nccl_net_abi.h"

namespace nccl_ha::plugin {

// Version-independent device properties; api.cpp copies them into each ncclNetProperties_vN.
struct Props {
  char* name = nullptr;
  char* pci_path = nullptr;
  std::uint64_t guid = 0;
  int ptr_support = NCCL_PTR_HOST;
  int reg_is_global = 0;
  int force_flush = 0;
  int speed = 0;  // Mbps
  int port = 0;
  float latency = 0;  // us
  int max_comms = 0;
  int max_recvs = 0;
  std::size_t max_p2p_bytes = 0;
  std::size_t max_coll_bytes = 0;
  // vProps: the physical devices behind it (a port: itself)
  int ndevs = 1;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC] = {};
  std::int16_t rail_id = -1;   // v12 railId, -1 = NCCL_NET_ID_UNDEF
  std::int16_t plane_id = -1;  // v12 planeId
};

ncclResult_t init(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler = nullptr);
ncclResult_t devices(int* ndev);
ncclResult_t get_properties(int dev, Props* props);
// makeVDevice (v9+): the device fusing ports `devs` (at most `max_members`, the API version's
// NCCL_NET_MAX_DEVS_PER_NIC), merged and checked as net_ib does (runtime/vdevice.hpp). One port:
// that port. Several: refused with an INFO line until connections stripe over fused ports.
ncclResult_t make_vdevice(std::span<const int> devs, int max_members, int* out);

// v11+: per-communicator context: the communicator's CommParams, given to its listen/connect.
// The contexts also count users, so the last finalize() releases the process-wide state before
// NCCL unloads us. context_params: nullopt for a pointer that is no live context of ours.
ncclResult_t context_init(const CommParams& params, void** ctx);
ncclResult_t context_finalize(void* ctx);
std::optional<CommParams> context_params(void* ctx);

}  // namespace nccl_ha::plugin
