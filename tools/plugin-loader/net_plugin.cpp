#include "net_plugin.hpp"

#include <dlfcn.h>

namespace ha_loader {
namespace {

constexpr const char* kSymbols[] = {NCCL_HA_NET_PLUGIN_SYMBOL_V6,  NCCL_HA_NET_PLUGIN_SYMBOL_V7,
                                    NCCL_HA_NET_PLUGIN_SYMBOL_V8,  NCCL_HA_NET_PLUGIN_SYMBOL_V9,
                                    NCCL_HA_NET_PLUGIN_SYMBOL_V10, NCCL_HA_NET_PLUGIN_SYMBOL_V11,
                                    NCCL_HA_NET_PLUGIN_SYMBOL_V12};
const char* symbol_for(int v) { return kSymbols[v - 6]; }

std::string dl_error() {
  const char* e = ::dlerror();
  return e ? e : "unknown dlopen error";
}

}  // namespace

std::unique_ptr<NetPlugin> NetPlugin::open(const std::string& path, int api) {
  if (api != 0 && (api < 6 || api > 12))
    throw LoadError(LoadError::Kind::usage, "--api " + std::to_string(api) + ": supported versions are 6..12");
  std::unique_ptr<NetPlugin> p(new NetPlugin());
  p->path_ = path;
  p->dl_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!p->dl_) {
    std::string err = dl_error();
    bool is_lib_so = path.rfind("lib", 0) == 0 && path.size() > 3 && path.compare(path.size() - 3, 3, ".so") == 0;
    if (path.find('/') == std::string::npos && !is_lib_so) {
      std::string alt = "libnccl-net-" + path + ".so";
      p->dl_ = ::dlopen(alt.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (p->dl_) p->path_ = alt;
      else err += "; " + dl_error();
    }
    if (!p->dl_) throw LoadError(LoadError::Kind::open, "cannot load plugin: " + err, err);
  }
  const void* sym = nullptr;
  for (int v = 12; v >= 6; --v) {
    ::dlerror();
    const void* s = ::dlsym(p->dl_, symbol_for(v));
    if (!s) continue;
    p->exported_.emplace_back(symbol_for(v));
    bool take = api != 0 ? v == api : p->version_ == 0;
    if (take) {
      p->version_ = v;
      sym = s;
    }
  }
  if (!sym) {
    if (api != 0)
      throw LoadError(LoadError::Kind::plugin, p->path_ + " does not export " + symbol_for(api));
    throw LoadError(LoadError::Kind::plugin, p->path_ + " exports none of ncclNetPlugin_v12 .. ncclNetPlugin_v6");
  }
  p->a_ = make_adapter(p->version_, sym);
  p->require(Slots::before_init);
  return p;
}

NetPlugin::~NetPlugin() {
  a_.reset();
  if (dl_ && !keep_loaded_) ::dlclose(dl_);
}

const char* NetPlugin::symbol() const { return symbol_for(version_); }

ncclResult_t NetPlugin::init(const InitArgs& a) {
  const ncclResult_t r = a_->init(a);
  if (r == ncclSuccess) require(Slots::after_init);
  return r;
}

void NetPlugin::require(Slots which) const {
  const auto missing = a_->missing_slots(which);
  if (missing.empty()) return;
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw LoadError(LoadError::Kind::plugin, std::string(symbol()) + " v" + std::to_string(version_) +
                                               " table has NULL mandatory slots: " + list);
}

}  // namespace ha_loader
