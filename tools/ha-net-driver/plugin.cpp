#include "plugin.hpp"

#include <atomic>
#include <thread>

#include "common.hpp"

namespace hnd {
namespace {

// The call in progress, for the watchdog (the driver calls the plugin from one thread).
std::atomic<int> g_call_entry{-1};
std::atomic<std::int64_t> g_call_start_ns{0};

[[noreturn]] void rethrow(const ha_loader::LoadError& e) {
  fail(e.kind == ha_loader::LoadError::Kind::usage ? Fail::usage : Fail::plugin, e.what());
}

}  // namespace

const char* entry_name(Entry e) noexcept {
  switch (e) {
    case Entry::init: return "init";
    case Entry::devices: return "devices";
    case Entry::getProperties: return "getProperties";
    case Entry::listen: return "listen";
    case Entry::connect: return "connect";
    case Entry::accept: return "accept";
    case Entry::regMr: return "regMr";
    case Entry::regMrDmaBuf: return "regMrDmaBuf";
    case Entry::deregMr: return "deregMr";
    case Entry::isend: return "isend";
    case Entry::irecv: return "irecv";
    case Entry::iflush: return "iflush";
    case Entry::test: return "test";
    case Entry::closeSend: return "closeSend";
    case Entry::closeRecv: return "closeRecv";
    case Entry::closeListen: return "closeListen";
    case Entry::irecvConsumed: return "irecvConsumed";
    case Entry::setNetAttr: return "setNetAttr";
    case Entry::makeVDevice: return "makeVDevice";
    case Entry::finalize: return "finalize";
    case Entry::kCount: break;
  }
  return "?";
}

std::unique_ptr<Plugin> Plugin::load(const std::string& path, int api) {
  std::unique_ptr<Plugin> p(new Plugin());
  try {
    p->lib_ = ha_loader::NetPlugin::open(path, api);
  } catch (const ha_loader::LoadError& e) {
    rethrow(e);
  }
  p->a_ = &p->lib_->net();
  p->version_ = p->lib_->version();
  p->path_ = p->lib_->path();
  p->table_name_ = p->lib_->table_name();
  p->exported_ = p->lib_->exported_versions();
  return p;
}

Plugin::~Plugin() { unload(); }

void Plugin::unload() {
  a_ = nullptr;
  lib_.reset();
}

template <class F>
ncclResult_t Plugin::timed(Entry e, F&& f) {
  std::int64_t t0 = now_ns();
  g_call_start_ns.store(t0, std::memory_order_relaxed);
  g_call_entry.store(static_cast<int>(e), std::memory_order_release);
  ncclResult_t r;
  try {
    r = f();
  } catch (...) {  // the loader's slot check after a successful init: the call itself returned
    record(e, t0, ncclSuccess);
    throw;
  }
  record(e, t0, r);
  return r;
}

void Plugin::record(Entry e, std::int64_t t0, ncclResult_t r) {
  g_call_entry.store(-1, std::memory_order_release);
  double us = static_cast<double>(now_ns() - t0) / 1e3;
  CallStat& s = stats_[static_cast<std::size_t>(e)];
  ++s.count;
  if (r != ncclSuccess) {
    ++s.errors;
    last_error_entry_ = e;
    last_error_result_ = r;
  }
  s.total_us += us;
  if (us > s.max_us) s.max_us = us;
}

ncclResult_t Plugin::init(const InitArgs& a) {
  try {
    return timed(Entry::init, [&] { return lib_->init(a); });
  } catch (const ha_loader::LoadError& e) {
    rethrow(e);
  }
}
ncclResult_t Plugin::devices(int* n) { return timed(Entry::devices, [&] { return a_->devices(n); }); }
ncclResult_t Plugin::getProperties(int dev, Properties* p) {
  return timed(Entry::getProperties, [&] { return a_->getProperties(dev, p); });
}
ncclResult_t Plugin::listen(int dev, void* h, void** lc) {
  return timed(Entry::listen, [&] { return a_->listen(dev, h, lc); });
}
ncclResult_t Plugin::connect(int dev, void* h, void** sc) {
  return timed(Entry::connect, [&] { return a_->connect(dev, h, sc); });
}
ncclResult_t Plugin::accept(void* lc, void** rc) { return timed(Entry::accept, [&] { return a_->accept(lc, rc); }); }
ncclResult_t Plugin::regMr(void* c, void* d, std::size_t sz, int type, void** mh) {
  return timed(Entry::regMr, [&] { return a_->regMr(c, d, sz, type, mh); });
}
ncclResult_t Plugin::regMrDmaBuf(void* c, void* d, std::size_t sz, int type, std::uint64_t offset, int fd, void** mh) {
  return timed(Entry::regMrDmaBuf, [&] { return a_->regMrDmaBuf(c, d, sz, type, offset, fd, mh); });
}
ncclResult_t Plugin::deregMr(void* c, void* mh) { return timed(Entry::deregMr, [&] { return a_->deregMr(c, mh); }); }
ncclResult_t Plugin::isend(void* sc, void* d, std::size_t sz, int tag, void* mh, void** req, void* ph) {
  return timed(Entry::isend, [&] { return a_->isend(sc, d, sz, tag, mh, req, ph); });
}
ncclResult_t Plugin::irecv(void* rc, int n, void** d, const std::size_t* sz, int* tags, void** mh, void** req,
                           void** ph) {
  return timed(Entry::irecv, [&] { return a_->irecv(rc, n, d, sz, tags, mh, req, ph); });
}
ncclResult_t Plugin::iflush(void* rc, int n, void** d, int* sz, void** mh, void** req) {
  return timed(Entry::iflush, [&] { return a_->iflush(rc, n, d, sz, mh, req); });
}
ncclResult_t Plugin::test(void* req, int* done, int* sizes) {
  return timed(Entry::test, [&] { return a_->test(req, done, sizes); });
}
ncclResult_t Plugin::closeSend(void* c) { return timed(Entry::closeSend, [&] { return a_->closeSend(c); }); }
ncclResult_t Plugin::closeRecv(void* c) { return timed(Entry::closeRecv, [&] { return a_->closeRecv(c); }); }
ncclResult_t Plugin::closeListen(void* c) { return timed(Entry::closeListen, [&] { return a_->closeListen(c); }); }
ncclResult_t Plugin::irecvConsumed(void* rc, int n, void* req) {
  return timed(Entry::irecvConsumed, [&] { return a_->irecvConsumed(rc, n, req); });
}
ncclResult_t Plugin::setNetAttr() { return timed(Entry::setNetAttr, [&] { return a_->setNetAttr(); }); }
ncclResult_t Plugin::makeVDevice(const std::vector<int>& devs, int* d) {
  return timed(Entry::makeVDevice, [&] { return a_->makeVDevice(devs, d); });
}
ncclResult_t Plugin::finalize() { return timed(Entry::finalize, [&] { return a_->finalize(); }); }

void Plugin::start_watchdog(double seconds, void (*on_hang)(const char* entry)) {
  auto limit_ns = static_cast<std::int64_t>(seconds * 1e9);
  std::thread([limit_ns, on_hang] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int e = g_call_entry.load(std::memory_order_acquire);
      if (e < 0) continue;
      if (now_ns() - g_call_start_ns.load(std::memory_order_relaxed) > limit_ns) on_hang(entry_name(static_cast<Entry>(e)));
    }
  }).detach();
}

}  // namespace hnd
