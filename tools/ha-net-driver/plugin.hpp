// ha-net-driver: a net plugin loaded by the tools' loader (tools/plugin-loader: like NCCL, every
// ABI version v6..v12 through one interface). Every call is timed per entry point.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net_plugin.hpp"

namespace hnd {

enum class Entry : int {
  init, devices, getProperties, listen, connect, accept, regMr, regMrDmaBuf, deregMr, isend, irecv, iflush, test,
  closeSend, closeRecv, closeListen, irecvConsumed, setNetAttr, makeVDevice, finalize, kCount
};
constexpr std::size_t kEntries = static_cast<std::size_t>(Entry::kCount);
const char* entry_name(Entry e) noexcept;

struct CallStat {
  std::uint64_t count = 0;
  std::uint64_t errors = 0;  // calls that returned != ncclSuccess
  double total_us = 0;
  double max_us = 0;
};

using ha_loader::Adapter;
using ha_loader::InitArgs;
using ha_loader::Properties;

class Plugin {
 public:
  // ha_loader::NetPlugin::open: dlopen (also libnccl-net-<path>.so, like NCCL), dlsym
  // ncclNetPlugin_v12 .. v6 (api != 0 forces that version), name and init non-NULL. Throws
  // DriverError(plugin), DriverError(usage) for an api outside 6..12.
  static std::unique_ptr<Plugin> load(const std::string& path, int api);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  int version() const { return version_; }
  const std::string& path() const { return path_; }
  std::string table_name() const { return table_name_; }
  std::vector<std::string> exported_versions() const { return exported_; }
  bool has_irecvConsumed() const { return a_->has_irecvConsumed(); }
  bool has_regMrDmaBuf() const { return a_->has_regMrDmaBuf(); }
  bool has_setNetAttr() const { return a_->has_setNetAttr(); }
  bool has_makeVDevice() const { return a_->has_makeVDevice(); }
  bool has_finalize() const { return a_->has_finalize(); }

  // init; once it returned ncclSuccess, a mandatory slot still NULL is DriverError(plugin)
  // "ncclNetPlugin_vN vN table has NULL mandatory slots: ...".
  ncclResult_t init(const InitArgs& a);
  ncclResult_t devices(int* ndev);
  ncclResult_t getProperties(int dev, Properties* p);
  ncclResult_t listen(int dev, void* handle, void** listenComm);
  ncclResult_t connect(int dev, void* handle, void** sendComm);
  ncclResult_t accept(void* listenComm, void** recvComm);
  ncclResult_t regMr(void* comm, void* data, std::size_t size, int type, void** mhandle);
  ncclResult_t regMrDmaBuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                           void** mhandle);
  ncclResult_t deregMr(void* comm, void* mhandle);
  // `phandle(s)`: NCCL's profiler handles (v10+; null: none).
  ncclResult_t isend(void* sendComm, void* data, std::size_t size, int tag, void* mhandle, void** request,
                     void* phandle = nullptr);
  ncclResult_t irecv(void* recvComm, int n, void** data, const std::size_t* sizes, int* tags, void** mhandles,
                     void** request, void** phandles = nullptr);
  ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t test(void* request, int* done, int* sizes);
  ncclResult_t closeSend(void* c);
  ncclResult_t closeRecv(void* c);
  ncclResult_t closeListen(void* c);
  ncclResult_t irecvConsumed(void* recvComm, int n, void* request);
  ncclResult_t setNetAttr();
  ncclResult_t makeVDevice(const std::vector<int>& devs, int* d);
  ncclResult_t finalize();

  const std::array<CallStat, kEntries>& stats() const { return stats_; }
  // The most recent call that returned != ncclSuccess (entry, result); kCount/ncclSuccess if none.
  Entry last_error_entry() const { return last_error_entry_; }
  ncclResult_t last_error_result() const { return last_error_result_; }
  void unload();  // dlclose; the adapter must not be used afterwards
  bool loaded() const { return lib_ != nullptr; }

  // A watchdog thread: if one plugin call runs longer than `seconds`, on_hang(entry name) is
  // called from that thread (it is expected to exit the process).
  static void start_watchdog(double seconds, void (*on_hang)(const char* entry));

 private:
  Plugin() = default;
  template <class F>
  ncclResult_t timed(Entry e, F&& f);
  void record(Entry e, std::int64_t t0, ncclResult_t r);

  std::unique_ptr<ha_loader::NetPlugin> lib_;
  Adapter* a_ = nullptr;  // lib_'s, while loaded
  int version_ = 0;
  std::string path_, table_name_;
  std::vector<std::string> exported_;
  std::array<CallStat, kEntries> stats_{};
  Entry last_error_entry_ = Entry::kCount;
  ncclResult_t last_error_result_ = ncclSuccess;
};

}  // namespace hnd
