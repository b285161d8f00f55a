// One NCCL device = one physical port. Owns the verbs context and the protection domain all
// comms on the port share, and the registration cache (reg.cpp).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "nccl_ha/net/discovery.hpp"
#include "nccl_ha/net/qp.hpp"
#include "nccl_ha/net/verbs.hpp"

namespace nccl_ha::plugin {

// What regMr hands to NCCL: one cached registration, shared by every overlapping request.
struct MrHandle {
  net::MrPtr mr;
  std::uintptr_t begin = 0;  // page-aligned range covered by `mr`
  std::uintptr_t end = 0;
  int refs = 0;
};

class MrCache {
 public:
  explicit MrCache(ibv_pd* pd) : pd_(pd) {}
  // Returns a registration covering [data, data+size), registering the page range if needed.
  Expected<MrHandle*> acquire(void* data, std::size_t size, int access);
  void release(MrHandle* handle);
  std::size_t size() const;

 private:
  ibv_pd* pd_;
  mutable std::mutex mutex_;                                 // regMr is not on the data path
  std::multimap<std::uintptr_t, std::unique_ptr<MrHandle>> by_begin_;  // keyed by MrHandle::begin
};

struct Device {
  net::PortInfo port;
  net::ContextPtr ctx;
  net::PdPtr pd;
  std::unique_ptr<MrCache> mrs;
  int max_comms = 0;
  net::QpTimeouts timeouts;  // RC timeout / retry settings for this port's QPs
  std::string pci_path;  // storage behind Props::pci_path
  std::string name;      // storage behind Props::name
};

}  // namespace nccl_ha::plugin
