// ha-net-driver: loads a net plugin like NCCL does and exposes every ABI version (v6..v12)
// through one interface. Every call is timed per entry point.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nccl_net_abi.h"

namespace hnd {

enum class Entry : int {
  init, devices, getProperties, listen, connect, accept, regMr, deregMr, isend, irecv, iflush, test,
  closeSend, closeRecv, closeListen, irecvConsumed, setNetAttr, finalize, kCount
};
constexpr std::size_t kEntries = static_cast<std::size_t>(Entry::kCount);
const char* entry_name(Entry e) noexcept;

struct CallStat {
  std::uint64_t count = 0;
  std::uint64_t errors = 0;  // calls that returned != ncclSuccess
  double total_us = 0;
  double max_us = 0;
};

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
  std::optional<int> rail_id, plane_id;                      // v12
};

struct InitArgs {
  ncclDebugLogger_t logger = nullptr;
  ncclProfilerCallback_t profiler = nullptr;  // v10+
  std::uint64_t comm_id = 0;                  // v11+
  int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;  // v10: every connect(); v11+: init()
};

// One adapter per version family (adapters.cpp). Sizes are size_t here; the adapter narrows
// them for v6-v8 and rejects values that do not fit. connect/accept pass a pointer to a NULL
// device handle (no offload) from v7 on. For v6-v8 irecv clears a preset *request as NCCL's shim
// does. v11+ adapters own the init() context and pass it to listen/connect/setNetAttr/finalize.
class Adapter {
 public:
  virtual ~Adapter() = default;
  virtual const char* name() const = 0;
  virtual std::vector<std::string> missing_slots() const = 0;  // mandatory slots that are NULL
  virtual ncclResult_t init(const InitArgs& a) = 0;
  virtual ncclResult_t devices(int* ndev) = 0;
  virtual ncclResult_t getProperties(int dev, Properties* p) = 0;
  virtual ncclResult_t listen(int dev, void* handle, void** listenComm) = 0;
  virtual ncclResult_t connect(int dev, void* handle, void** sendComm) = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, std::size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  virtual ncclResult_t isend(void* sendComm, void* data, std::size_t size, int tag, void* mhandle, void** request) = 0;
  virtual ncclResult_t irecv(void* recvComm, int n, void** data, const std::size_t* sizes, int* tags, void** mhandles,
                             void** request) = 0;
  virtual ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) = 0;
  virtual ncclResult_t test(void* request, int* done, int* sizes) = 0;
  virtual ncclResult_t closeSend(void* c) = 0;
  virtual ncclResult_t closeRecv(void* c) = 0;
  virtual ncclResult_t closeListen(void* c) = 0;
  virtual bool has_irecvConsumed() const { return false; }
  virtual ncclResult_t irecvConsumed(void*, int, void*) { return ncclSuccess; }
  virtual bool has_setNetAttr() const { return false; }
  virtual ncclResult_t setNetAttr() { return ncclSuccess; }  // all fields NCCL_NET_ATTR_UNDEF
  virtual bool has_finalize() const { return false; }
  virtual ncclResult_t finalize() { return ncclSuccess; }
};

// `sym` is the ncclNetPlugin_v<version> data symbol.
std::unique_ptr<Adapter> make_adapter(int version, const void* sym);

class Plugin {
 public:
  // dlopen(path, RTLD_NOW|RTLD_LOCAL) (if that fails and path has no '/' and is not lib*.so, also
  // libnccl-net-<path>.so, like NCCL), then dlsym ncclNetPlugin_v12 .. v6, first hit wins.
  // api != 0 forces that version. Throws DriverError(plugin).
  static std::unique_ptr<Plugin> load(const std::string& path, int api);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  int version() const { return version_; }
  const std::string& path() const { return path_; }
  std::string table_name() const;
  std::vector<std::string> exported_versions() const { return exported_; }
  std::vector<std::string> missing_slots() const { return a_->missing_slots(); }
  bool has_irecvConsumed() const { return a_->has_irecvConsumed(); }
  bool has_setNetAttr() const { return a_->has_setNetAttr(); }
  bool has_finalize() const { return a_->has_finalize(); }

  ncclResult_t init(const InitArgs& a);
  ncclResult_t devices(int* ndev);
  ncclResult_t getProperties(int dev, Properties* p);
  ncclResult_t listen(int dev, void* handle, void** listenComm);
  ncclResult_t connect(int dev, void* handle, void** sendComm);
  ncclResult_t accept(void* listenComm, void** recvComm);
  ncclResult_t regMr(void* comm, void* data, std::size_t size, int type, void** mhandle);
  ncclResult_t deregMr(void* comm, void* mhandle);
  ncclResult_t isend(void* sendComm, void* data, std::size_t size, int tag, void* mhandle, void** request);
  ncclResult_t irecv(void* recvComm, int n, void** data, const std::size_t* sizes, int* tags, void** mhandles,
                     void** request);
  ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t test(void* request, int* done, int* sizes);
  ncclResult_t closeSend(void* c);
  ncclResult_t closeRecv(void* c);
  ncclResult_t closeListen(void* c);
  ncclResult_t irecvConsumed(void* recvComm, int n, void* request);
  ncclResult_t setNetAttr();
  ncclResult_t finalize();

  const std::array<CallStat, kEntries>& stats() const { return stats_; }
  // The most recent call that returned != ncclSuccess (entry, result); kCount/ncclSuccess if none.
  Entry last_error_entry() const { return last_error_entry_; }
  ncclResult_t last_error_result() const { return last_error_result_; }
  void unload();  // dlclose; the adapter must not be used afterwards
  bool loaded() const { return dl_ != nullptr; }

  // A watchdog thread: if one plugin call runs longer than `seconds`, on_hang(entry name) is
  // called from that thread (it is expected to exit the process).
  static void start_watchdog(double seconds, void (*on_hang)(const char* entry));

 private:
  Plugin() = default;
  template <class F>
  ncclResult_t timed(Entry e, F&& f);

  void* dl_ = nullptr;
  int version_ = 0;
  std::string path_;
  std::vector<std::string> exported_;
  std::unique_ptr<Adapter> a_;
  std::array<CallStat, kEntries> stats_{};
  Entry last_error_entry_ = Entry::kCount;
  ncclResult_t last_error_result_ = ncclSuccess;
};

}  // namespace hnd
