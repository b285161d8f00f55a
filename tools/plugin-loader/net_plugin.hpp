// The one net plugin loader of the tools (ha-net-driver, ha-ping --list): opens a plugin `.so`
// and checks its table the way NCCL does, no stricter.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "net_adapter.hpp"

namespace ha_loader {

struct LoadError : std::runtime_error {
  enum class Kind {
    usage,   // a version outside 6..12 asked for
    open,    // dlopen failed; dl_errors: dlerror() of every name tried, "; "-separated
    plugin,  // no ncclNetPlugin_vN table, a forced version not exported, a NULL mandatory slot
  };
  Kind kind;
  std::string dl_errors;
  LoadError(Kind k, const std::string& what, std::string dl = {})
      : std::runtime_error(what), kind(k), dl_errors(std::move(dl)) {}
};

class NetPlugin {
 public:
  // 1. dlopen(path, RTLD_NOW|RTLD_LOCAL); if that fails and path has no '/' and is not lib*.so,
  //    also libnccl-net-<path>.so, like NCCL.
  // 2. dlsym ncclNetPlugin_v12 .. v6, first hit wins; api != 0 forces that version.
  // 3. `name` and `init` must be non-NULL: all NCCL reads of a table before calling its init.
  // Throws LoadError.
  static std::unique_ptr<NetPlugin> open(const std::string& path, int api);
  ~NetPlugin();  // dlclose, unless keep_loaded()
  NetPlugin(const NetPlugin&) = delete;
  NetPlugin& operator=(const NetPlugin&) = delete;

  int version() const { return version_; }
  const std::string& path() const { return path_; }  // the name dlopen took
  const char* symbol() const;                         // "ncclNetPlugin_v<version>"
  std::string table_name() const { return a_->name(); }
  const std::vector<std::string>& exported_versions() const { return exported_; }  // newest first

  // 4. init. When it returned ncclSuccess every mandatory slot must be non-NULL (NCCL calls them
  //    from then on, unchecked): throws LoadError(plugin) "ncclNetPlugin_vN vN table has NULL
  //    mandatory slots: a, b" otherwise. Returns init's result.
  ncclResult_t init(const InitArgs& a);
  // Every other call (call init first).
  Adapter& net() { return *a_; }

  // The destructor leaves the library loaded: a plugin's threads may outlive its finalize.
  void keep_loaded() { keep_loaded_ = true; }

 private:
  NetPlugin() = default;
  void require(Slots which) const;

  void* dl_ = nullptr;
  int version_ = 0;
  bool keep_loaded_ = false;
  std::string path_;
  std::vector<std::string> exported_;
  std::unique_ptr<Adapter> a_;
};

}  // namespace ha_loader
