// The exported tables: ncclNetPlugin_v6 ... ncclNetPlugin_v12, each a thin adapter over the
// C++ calls (init.hpp, setup.hpp, p2p.hpp). NCCL dlsyms the newest version it knows (v12 first).
#include <algorithm>
#include <iterator>
#include <span>

#include "api/init.hpp"
#include "datapath/p2p.hpp"
#include "nccl_ha/reactor/log.hpp"
#include "setup/setup.hpp"

namespace nccl_ha::plugin {
namespace {

constexpr const char* kName = "HA";

template <class P>
void fill_common(const Props& p, P* out) {
  out->name = p.name;
  out->pciPath = p.pci_path;
  out->guid = p.guid;
  out->ptrSupport = p.ptr_support;
  out->speed = p.speed;
  out->port = p.port;
  out->latency = p.latency;
  out->maxComms = p.max_comms;
  out->maxRecvs = p.max_recvs;
}

template <class P>
void fill_v7(const Props& p, P* out) {
  fill_common(p, out);
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
}

template <class P>
void fill_v9(const Props& p, P* out) {
  fill_v7(p, out);
  out->regIsGlobal = p.reg_is_global;
  out->forceFlush = p.force_flush;
  constexpr int kRoom = static_cast<int>(std::size(decltype(out->vProps.devs){}));
  out->vProps.ndevs = std::min(p.ndevs, kRoom);
  std::copy_n(p.devs, out->vProps.ndevs, out->vProps.devs);
  out->maxP2pBytes = p.max_p2p_bytes;
  out->maxCollBytes = p.max_coll_bytes;
}

template <class P>
ncclResult_t properties(int dev, P* out) {
  if (!out) return ncclInvalidArgument;
  Props p;
  if (auto rc = get_properties(dev, &p); rc != ncclSuccess) return rc;
  *out = P{};
  if constexpr (requires { out->vProps; }) {
    fill_v9(p, out);
    if constexpr (requires { out->maxMultiRequestSize; }) out->maxMultiRequestSize = 1;
    if constexpr (requires { out->railId; }) {
      out->railId = p.rail_id;
      out->planeId = p.plane_id;
    }
  } else if constexpr (requires { out->regIsGlobal; }) {
    fill_v7(p, out);
    out->regIsGlobal = p.reg_is_global;
  } else if constexpr (requires { out->netDeviceType; }) {
    fill_v7(p, out);
  } else {
    fill_common(p, out);
  }
  return ncclSuccess;
}

// v6-v8 pass int sizes.
ncclResult_t isend_int(void* c, void* data, int size, int tag, void* mh, void** req) {
  if (size < 0) return ncclInvalidArgument;
  return isend(c, data, static_cast<std::size_t>(size), tag, mh, nullptr, req);
}

ncclResult_t irecv_int(void* c, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  if (n < 1 || n > kMaxRecvs) return irecv(c, n, data, nullptr, tags, mhs, nullptr, req);  // reports the error
  std::size_t s[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return ncclInvalidArgument;
    s[i] = static_cast<std::size_t>(sizes[i]);
  }
  return irecv(c, n, data, s, tags, mhs, nullptr, req);
}

ncclResult_t isend_sz(void* c, void* data, size_t size, int tag, void* mh, void** req) {
  return isend(c, data, size, tag, mh, nullptr, req);
}

ncclResult_t irecv_sz(void* c, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) {
  return irecv(c, n, data, sizes, tags, mhs, nullptr, req);
}

ncclResult_t irecv_sz_prof(void* c, int n, void** data, size_t* sizes, int* tags, void** mhs, void** phandles,
                           void** req) {
  return irecv(c, n, data, sizes, tags, mhs, phandles, req);
}

ncclResult_t isend_prof(void* c, void* data, size_t size, int tag, void* mh, void* phandle, void** req) {
  return isend(c, data, size, tag, mh, phandle, req);
}

ncclResult_t iflush_api(void* c, int n, void** data, int* sizes, void** mhs, void** req) {
  return iflush(c, n, data, sizes, mhs, req);
}

ncclResult_t reg_mr_int(void* c, void* data, int size, int type, void** mh) {
  if (size < 0) return ncclInvalidArgument;
  return reg_mr(c, data, static_cast<std::size_t>(size), type, mh);
}

ncclResult_t listen_v6(int dev, void* handle, void** listen_comm) { return listen(CommParams{}, dev, handle, listen_comm); }
ncclResult_t connect_v6(int dev, void* handle, void** send_comm) { return connect(CommParams{}, dev, handle, send_comm); }
ncclResult_t accept_v6(void* lc, void** recv_comm) { return accept(lc, recv_comm); }
ncclResult_t connect_v7(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v7_t** /*dev_comm*/) {
  return connect(CommParams{}, dev, handle, send_comm);
}
ncclResult_t accept_v7(void* lc, void** recv_comm, ncclNetDeviceHandle_v7_t** /*dev_comm*/) { return accept(lc, recv_comm); }
ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v10_t** /*dev_comm*/) {
  CommParams params;
  if (config) params.traffic_class = config->trafficClass;
  return connect(params, dev, handle, send_comm);
}

// v11+: the context init() gave NCCL for this communicator.
std::optional<CommParams> params_of(void* ctx, const char* what) {
  auto p = context_params(ctx);
  if (!p) HA_WARN("NET/HA: %s: %p is not a context of this plugin (init() gives one per communicator)", what, ctx);
  return p;
}
ncclResult_t connect_v11(void* ctx, int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v11_t** /*dev*/) {
  const auto params = params_of(ctx, "connect");
  return params ? connect(*params, dev, handle, send_comm) : ncclInvalidArgument;
}
ncclResult_t listen_v11(void* ctx, int dev, void* handle, void** listen_comm) {
  const auto params = params_of(ctx, "listen");
  return params ? listen(*params, dev, handle, listen_comm) : ncclInvalidArgument;
}

// Device offload is not offered (netDeviceType HOST): no device MR, no consumed-receive hook.
ncclResult_t get_device_mr(void*, void*, void** dptr) {
  if (dptr) *dptr = nullptr;
  return ncclSuccess;
}

// NCCL's fused NICs: as many members as this version's vProps holds (4 before v12, 8 in v12).
template <class V>
ncclResult_t make_vdevice_v(int* d, V* props) {
  constexpr int kRoom = static_cast<int>(std::size(decltype(props->devs){}));
  if (!d || !props) return ncclInvalidArgument;
  if (props->ndevs < 0 || props->ndevs > kRoom) {
    HA_WARN("NET/HA: makeVDevice: %d devices, this API version's vProps holds %d", props->ndevs, kRoom);
    return ncclInvalidUsage;
  }
  return make_vdevice(std::span<const int>(props->devs, static_cast<std::size_t>(props->ndevs)), kRoom, d);
}

ncclResult_t init_v6(ncclDebugLogger_t logger) { return init(logger); }
ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) { return init(logger, prof); }
template <class C>
ncclResult_t init_v11(void** ctx, uint64_t comm_id, C* config, ncclDebugLogger_t logger,
                      ncclProfilerCallback_t prof) {
  if (!ctx) return ncclInvalidArgument;
  if (auto rc = init(logger, prof); rc != ncclSuccess) return rc;
  CommParams params;
  params.comm_id = comm_id;
  if (config) params.traffic_class = config->trafficClass;
  return context_init(params, ctx);
}
template <class A>
ncclResult_t set_net_attr(void* /*ctx*/, A* /*attr*/) {
  return ncclSuccess;  // traffic hints are not used
}

}  // namespace
}  // namespace nccl_ha::plugin

using namespace nccl_ha::plugin;

#define HA_EXPORT extern "C" __attribute__((visibility("default")))

HA_EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
    kName, init_v6, devices, properties<ncclNetProperties_v6_t>, listen_v6, connect_v6, accept_v6, reg_mr_int,
    reg_mr_dmabuf, dereg_mr, isend_int, irecv_int, iflush_api, test, close_send, close_recv, close_listen};

HA_EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
    kName, init_v6, devices, properties<ncclNetProperties_v7_t>, listen_v6, connect_v7, accept_v7, reg_mr_int,
    reg_mr_dmabuf, dereg_mr, isend_int, irecv_int, iflush_api, test, close_send, close_recv, close_listen,
    get_device_mr, nullptr};

HA_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    kName, init_v6, devices, properties<ncclNetProperties_v8_t>, listen_v6, connect_v7, accept_v7, reg_mr,
    reg_mr_dmabuf, dereg_mr, isend_int, irecv_int, iflush_api, test, close_send, close_recv, close_listen,
    get_device_mr, nullptr};

HA_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    kName, init_v6, devices, properties<ncclNetProperties_v9_t>, listen_v6, connect_v7, accept_v7, reg_mr,
    reg_mr_dmabuf, dereg_mr, isend_sz, irecv_sz, iflush_api, test, close_send, close_recv, close_listen,
    get_device_mr, nullptr, make_vdevice_v<ncclNetVDeviceProps_v9_t>};

HA_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    kName, init_v10, devices, properties<ncclNetProperties_v10_t>, listen_v6, connect_v10, accept_v7, reg_mr,
    reg_mr_dmabuf, dereg_mr, isend_prof, irecv_sz_prof, iflush_api, test, close_send, close_recv, close_listen,
    get_device_mr, nullptr, make_vdevice_v<ncclNetVDeviceProps_v10_t>};

HA_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    kName, init_v11<ncclNetCommConfig_v11_t>, devices, properties<ncclNetProperties_v11_t>, listen_v11, connect_v11,
    accept_v7, reg_mr, reg_mr_dmabuf, dereg_mr, isend_prof, irecv_sz_prof, iflush_api, test, close_send, close_recv,
    close_listen, get_device_mr, nullptr, make_vdevice_v<ncclNetVDeviceProps_v11_t>, context_finalize,
    set_net_attr<ncclNetAttr_v11_t>};

HA_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    kName, init_v11<ncclNetCommConfig_v12_t>, devices, properties<ncclNetProperties_v12_t>, listen_v11, connect_v11,
    accept_v7, reg_mr, reg_mr_dmabuf, dereg_mr, isend_prof, irecv_sz_prof, iflush_api, test, close_send, close_recv,
    close_listen, get_device_mr, nullptr, make_vdevice_v<ncclNetVDeviceProps_v12_t>, context_finalize,
    set_net_attr<ncclNetAttr_v12_t>};
