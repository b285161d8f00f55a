// One interface over every net plugin ABI version (v6..v12), shared by ha-net-driver and
// ha-ping --list (through net_plugin.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nccl_net_abi.h"

namespace ha_loader {

// getProperties() result, normalised over versions. Fields a version lacks are nullopt.
struct Properties {
  std::string name;
  std::optional<std::string> pci_path;  // nullopt: NULL
  std::uint64_t guid = 0;
  int ptr_support = 0;
  std::optional<int> reg_is_global, force_flush;  // v8+, v9+
  int speed = 0, port = 0;
  float latency = 0;
  int max_comms = 0, max_recvs = 0;
  std::optional<int> net_device_type, net_device_version;  // v7+
  std::optional<std::vector<int>> vdevs;                   // v9+: vProps.devs[0..ndevs)
  std::optional<int> vndevs;                               // v9+: vProps.ndevs as reported
  std::optional<std::size_t> max_p2p_bytes, max_coll_bytes;  // v9+
  std::optional<int> max_multi_request_size;                 // v11+
  std::optional<int> rail_id, plane_id;                      // v12 (as reported, NCCL_NET_ID_UNDEF included)
};

struct InitArgs {
  ncclDebugLogger_t logger = nullptr;
  ncclProfilerCallback_t profiler = nullptr;  // v10+
  std::uint64_t comm_id = 0;                  // v11+
  int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;  // v10: every connect(); v11+: init()
};

// Which mandatory slots to look at. NCCL reads `name` when it loads the table and calls `init`
// before it reads any other slot (its v6..v11 shims copy them right after `init` returned, v12
// tables are used as they are), so a plugin may fill its table in `init`
// (nccl-rdma-sharp-plugins does).
enum class Slots {
  before_init,  // name, init
  after_init,   // every mandatory slot (finalize too for v11+)
};

// One adapter per version family (adapters.cpp). Sizes are size_t here; the adapter narrows
// them for v6-v8 and rejects values that do not fit. connect/accept pass a pointer to a NULL
// device handle (no offload) from v7 on. For v6-v8 irecv clears a preset *request as NCCL's shim
// does. v11+ adapters own the init() context and pass it to listen/connect/setNetAttr/finalize.
// The table is read on every call, never copied: slots filled by init are seen.
class Adapter {
 public:
  virtual ~Adapter() = default;
  virtual const char* name() const = 0;
  virtual std::vector<std::string> missing_slots(Slots which) const = 0;  // mandatory slots that are NULL
  virtual ncclResult_t init(const InitArgs& a) = 0;
  virtual ncclResult_t devices(int* ndev) = 0;
  virtual ncclResult_t getProperties(int dev, Properties* p) = 0;
  virtual ncclResult_t listen(int dev, void* handle, void** listenComm) = 0;
  virtual ncclResult_t connect(int dev, void* handle, void** sendComm) = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, std::size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  // regMrDmaBuf (every version v6..v12 has the slot; a plugin may leave it NULL without DMABUF).
  virtual bool has_regMrDmaBuf() const = 0;
  virtual ncclResult_t regMrDmaBuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                                   void** mhandle) = 0;
  // `phandle` / `phandles`: the profiler handles NCCL passes from v10 on (null: none, as before v10).
  virtual ncclResult_t isend(void* sendComm, void* data, std::size_t size, int tag, void* mhandle, void** request,
                             void* phandle = nullptr) = 0;
  virtual ncclResult_t irecv(void* recvComm, int n, void** data, const std::size_t* sizes, int* tags, void** mhandles,
                             void** request, void** phandles = nullptr) = 0;
  virtual ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) = 0;
  virtual ncclResult_t test(void* request, int* done, int* sizes) = 0;
  virtual ncclResult_t closeSend(void* c) = 0;
  virtual ncclResult_t closeRecv(void* c) = 0;
  virtual ncclResult_t closeListen(void* c) = 0;
  virtual bool has_irecvConsumed() const { return false; }
  virtual ncclResult_t irecvConsumed(void*, int, void*) { return ncclSuccess; }
  virtual bool has_setNetAttr() const { return false; }
  virtual ncclResult_t setNetAttr() { return ncclSuccess; }  // all fields NCCL_NET_ATTR_UNDEF
  // makeVDevice (v9+, optional): the device fusing `devs` (more than the version's vProps holds:
  // ncclInvalidArgument without a call).
  virtual bool has_makeVDevice() const { return false; }
  virtual ncclResult_t makeVDevice(const std::vector<int>&, int*) { return ncclInvalidUsage; }
  virtual bool has_finalize() const { return false; }
  virtual ncclResult_t finalize() { return ncclSuccess; }
};

// `sym` is the ncclNetPlugin_v<version> data symbol; nullptr for a version outside 6..12.
std::unique_ptr<Adapter> make_adapter(int version, const void* sym);

}  // namespace ha_loader
