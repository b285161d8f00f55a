// The plugin core: one C++ implementation behind every exported ncclNet_vN table (api.cpp).
//
// Layout follows the protocol: init.cpp (init / devices / getProperties), listen.cpp (listen /
// accept / closeListen) and connect.cpp (connect) with the handshake they share
// (handshake_common.hpp), p2p.cpp (isend / irecv / test, the data path), flush.cpp (iflush),
// reg.cpp (memory registration); docs/architecture.md has the whole map. Sizes are size_t here;
// the adapters for older API versions convert.
//
// Threads (the plugin's one description of them; docs/architecture.md has the details):
//   NCCL's threads     call every entry point. The proxy thread's isend / irecv / test / iflush
//                      (datapath.hpp) take the comm with Hold, a try-lock (CommBase::owned): when
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
  int dev = 0;  // for vProps: the physical device itself
  std::int16_t rail_id = -1;   // v12 railId, -1 = NCCL_NET_ID_UNDEF
  std::int16_t plane_id = -1;  // v12 planeId
};

constexpr int kMaxRecvs = 8;     // grouped receives per irecv
constexpr int kMaxRequests = 32; // requests in flight per comm (receiver side; sender x kMaxRecvs)

ncclResult_t init(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler = nullptr);
ncclResult_t devices(int* ndev);
ncclResult_t get_properties(int dev, Props* props);

// What NCCL tells the plugin about the communicator a connection belongs to: v11+ pass it once
// to init() (commId, config) and the context to listen/connect; v10 passes the config to every
// connect(); older versions nothing (the defaults).
struct CommParams {
  std::uint64_t comm_id = 0;  // NCCL's communicator id (v11+; 0: not given)
  int traffic_class = -1;     // ncclNetCommConfig.trafficClass (NCCL_NET_TRAFFIC_CLASS_UNDEF: -1)
};

ncclResult_t listen(const CommParams& params, int dev, void* handle, void** listen_comm);
ncclResult_t connect(const CommParams& params, int dev, void* handle, void** send_comm);
ncclResult_t accept(void* listen_comm, void** recv_comm);
ncclResult_t close_listen(void* listen_comm);

ncclResult_t reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle);
ncclResult_t reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                           void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);

// `phandle` / `phandles`: NCCL's profiler handles (net v10+), or null (profiler.hpp).
ncclResult_t isend(void* send_comm, void* data, std::size_t size, int tag, void* mhandle, void* phandle, void** request);
ncclResult_t irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                   void** phandles, void** request);
ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* send_comm);
ncclResult_t close_recv(void* recv_comm);

// v11+: per-communicator context: the communicator's CommParams, given to its listen/connect.
// The contexts also count users, so the last finalize() releases the process-wide state before
// NCCL unloads us. context_params: nullopt for a pointer that is no live context of ours.
ncclResult_t context_init(const CommParams& params, void** ctx);
ncclResult_t context_finalize(void* ctx);
std::optional<CommParams> context_params(void* ctx);

}  // namespace nccl_ha::plugin
