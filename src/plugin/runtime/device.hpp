// One NCCL device = one physical port. Owns the verbs context and the protection domain all
// comms on the port share, and the registration cache (reg.cpp).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_ha/net/discovery.hpp"
#include "nccl_ha/net/qp.hpp"
#include "nccl_ha/net/verbs.hpp"
#include "nccl_ha/reactor/async_events.hpp"
#include "runtime/config.hpp"
#include "runtime/mr_ops.hpp"
#include "runtime/topology.hpp"

namespace nccl_ha::plugin {

// Where a dma-buf registration's memory comes from: the dma-buf `fd` and the offset in it of the
// registered address (regMrDmaBuf's `offset`).
struct DmaBuf {
  int fd = -1;
  std::uint64_t offset = 0;
};

// The QPs of each data path of a comm (core/path.hpp): how many (NCCL_IB_QPS_PER_CONNECTION,
// 1..net::kMaxEndpointQps) and whether this side asks for messages split across them
// (NCCL_IB_SPLIT_DATA_ON_QPS). The peer's plan is met halfway: the smaller count, a split only
// when both ask.
struct QpPlan {
  int count = 1;
  bool split = false;
};

// Deregisters through the table that registered it (mr_ops.hpp).
struct OpsMrDeleter {
  const MrOps* ops = nullptr;
  void operator()(ibv_mr* p) const noexcept {
    if (p && ops && ops->dereg_mr) ops->dereg_mr(p);
  }
};
using OpsMrPtr = std::unique_ptr<ibv_mr, OpsMrDeleter>;

// What regMr hands to NCCL: one cached registration, shared by every overlapping request.
// A dma-buf registration is found again only for the same dma-buf (file identity) at the same
// offset for the same addresses, never for ordinary memory at those addresses, nor the reverse.
struct MrHandle {
  OpsMrPtr mr;
  std::uintptr_t begin = 0;  // page-aligned range covered by `mr` (its iova for a dma-buf)
  std::uintptr_t end = 0;
  int access = 0;
  bool dmabuf = false;
  std::uint64_t dmabuf_dev = 0, dmabuf_ino = 0;  // fstat of the dma-buf fd: which buffer
  std::uint64_t dmabuf_offset = 0;               // offset in the dma-buf of `begin`
  int refs = 0;
};

class MrCache {
 public:
  explicit MrCache(ibv_pd* pd, const MrOps& ops = real_mr_ops()) : pd_(pd), ops_(&ops) {}
  // Returns a registration covering [data, data+size), registering the page range if needed: with
  // `dmabuf`, ibv_reg_dmabuf_mr(fd, offset of the first page, the pages, iova = the first page's
  // address); else ibv_reg_mr, or ibv_reg_mr_iova2 when `access` has IBV_ACCESS_RELAXED_ORDERING.
  Expected<MrHandle*> acquire(void* data, std::size_t size, int access, const DmaBuf* dmabuf = nullptr);
  void release(MrHandle* handle);
  std::size_t size() const;

 private:
  Expected<OpsMrPtr> register_range(std::uintptr_t begin, std::uintptr_t end, int access, const DmaBuf* dmabuf,
                                    std::uint64_t dmabuf_offset) const;

  ibv_pd* pd_;
  const MrOps* ops_;
  mutable std::mutex mutex_;                                 // regMr is not on the data path
  std::multimap<std::uintptr_t, std::unique_ptr<MrHandle>> by_begin_;  // keyed by MrHandle::begin
};

struct CommBase;

struct Device {
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();  // says so if a CQ still holds the completion channel (a comm was never released)

  int index = 0;   // NCCL device number
  int standby_port = -1;  // device index of its first-choice standby port (standby_map.hpp), -1: none
  bool standby_mapped = false;  // `standby_port` is HA_NCCL_STANDBY_MAP's (preferred in every standby choice)
  net::PortInfo port;
  PortTopo topo;   // rail, island, NIC, PCIe switch, NUMA node (topology.hpp), computed once at init
  net::ContextPtr ctx;
  net::PdPtr pd;
  std::unique_ptr<MrCache> mrs;
  // Decided once at init (decide_registration, device.cpp): the dma-buf probe's answer, whether
  // ptrSupport offers DMABUF, and whether NCCL's buffers get IBV_ACCESS_RELAXED_ORDERING.
  bool dmabuf = false;
  bool dmabuf_offered = false;
  bool relaxed_ordering = false;
  int max_comms = 0;
  net::QpTimeouts timeouts;  // RC timeout / retry settings for this port's QPs
  // Adaptive-routing mode (config.hpp ar_threshold_for): a message larger than this goes as a plain
  // write and a size notice (path_ops.cpp post_data); kNoAdaptiveRouting: off.
  std::uint64_t ar_threshold = kNoAdaptiveRouting;
  bool offer_ece = true;  // HA_NCCL_IB_ECE_ENABLE / NCCL_IB_ECE_ENABLE: each new QP offers its ECE (comm.cpp make_path)
  QpPlan qp_plan;  // the QPs of every comm's data path on this port (Config::qps_per_connection)
  // What getProperties reports, as NCCL's own IB transport would (init.cpp assign_nccl_identity):
  std::string pci_path;  // storage behind Props::pci_path: net::nccl_pci_path() of port.pci_path
  int nccl_port = 0;     // Props::port: port number + NCCL's real port (net::nccl_real_ports())
  std::int16_t rail_id = -1;   // railId (v12): NCCL_IB_HCA's rail, else NCCL_NET_ID_UNDEF (as net_ib)
  std::int16_t plane_id = -1;  // planeId (v12): NCCL_IB_HCA's plane, else NCCL_NET_ID_UNDEF
  int plane_idx = 0;           // its bit in a fused device's planeId (vdevice.hpp plane_indices; -1: none)
  std::string name;      // storage behind Props::name

  // Written by the async-event pump on the progress thread, read by the data path (relaxed:
  // a path compares fault_gen with the value it saw when it came up).
  std::atomic<std::uint32_t> fault_gen{0};  // port error / device fatal events so far
  std::atomic<bool> port_up{true};          // IBV_EVENT_PORT_ACTIVE since the last error
  std::atomic<int> last_fault{0};           // reactor::DeviceEventKind of the last fault
  // PORT_ACTIVE and GID-change events so far: re-protection onto this port starts at once.
  std::atomic<std::uint32_t> recover_gen{0};
  // Its share of each message of a fused device it is a member of (issue #33): its speed, unless
  // the stripe-weights file (stripe_weights.hpp) says otherwise. Written by that file's watcher on
  // the progress thread, read by every isend on a fused device (relaxed).
  std::atomic<std::uint32_t> stripe_weight{1};
  std::unique_ptr<reactor::AsyncEventPump> events;
  reactor::AsyncEventPump::Subscription subscription;
  // One completion channel for every comm CQ on this device (control.cpp): an event names the
  // CQ's path, whose comm's control plane is woken. Destroyed after the CQs (the reaper is
  // joined first), before the context.
  net::ChannelPtr channel;
  // Comms with a path on this device, woken by its port events. Progress thread only.
  std::vector<std::weak_ptr<CommBase>> watchers;
  // Connections whose traffic runs on this port (active) and whose standby is on it, whatever its
  // state (standby.cpp account_ports). Any thread; read when standbys are placed (load spreading)
  // and by the exporter.
  std::atomic<int> active_comms{0};
  std::atomic<int> standby_comms{0};
  // Paths on this device not destroyed yet, and of those the ones queued or being destroyed at
  // the reaper: the device is closed after its last path (reaper.cpp). The reaper's mutex.
  int live_paths = 0;
  int reaping = 0;
};

// Init, once per device: the dma-buf probe on its PD and the relaxed-ordering rule, into
// Device::dmabuf / dmabuf_offered / relaxed_ordering, each logged at INFO ("NET/HA: rxe0:1: dma-buf
// unsupported (...)"; relaxed ordering once per process, `log_ro`).
void decide_registration(const Config& c, const MrOps& ops, Device& d, bool log_ro);

}  // namespace nccl_ha::plugin
