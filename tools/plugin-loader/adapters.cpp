// One Adapter per ABI version family, written as a single template with the family
// differences spelled out with `if constexpr`:
//   v6..v8  int isend/irecv sizes (v6/v7 also int regMr size); v7+ device-handle argument
//   v9      size_t isend/irecv sizes; NCCL_NET_OPTIONAL_RECV_COMPLETION hint allowed
//   v10     init(logger, profiler); connect(dev, config, ...); isend/irecv profiler handles
//   v11/v12 init(&ctx, commId, config, logger, profiler); listen/connect(ctx, ...); finalize(ctx)
#include <algorithm>
#include <climits>
#include <cstring>

#include "net_adapter.hpp"

namespace ha_loader {
namespace {

struct NoConfig {
  int trafficClass;
};

// The types of API version V (Net, Props, Config; Attr from v11 on).
template <class N, class P, class C = NoConfig>  // NoConfig: no config before v10
struct AbiTypes {
  using Net = N;
  using Props = P;
  using Config = C;
};
template <int V>
struct Abi;
template <> struct Abi<6> : AbiTypes<ncclNet_v6_t, ncclNetProperties_v6_t> {};
template <> struct Abi<7> : AbiTypes<ncclNet_v7_t, ncclNetProperties_v7_t> {};
template <> struct Abi<8> : AbiTypes<ncclNet_v8_t, ncclNetProperties_v8_t> {};
template <> struct Abi<9> : AbiTypes<ncclNet_v9_t, ncclNetProperties_v9_t> {};
template <> struct Abi<10> : AbiTypes<ncclNet_v10_t, ncclNetProperties_v10_t, ncclNetCommConfig_v10_t> {};
template <> struct Abi<11> : AbiTypes<ncclNet_v11_t, ncclNetProperties_v11_t, ncclNetCommConfig_v11_t> {
  using Attr = ncclNetAttr_v11_t;
};
template <> struct Abi<12> : AbiTypes<ncclNet_v12_t, ncclNetProperties_v12_t, ncclNetCommConfig_v12_t> {
  using Attr = ncclNetAttr_v12_t;
};

// Copies whatever fields this version's props struct has.
template <class P>
void convert(const P& in, Properties* out) {
  *out = Properties{};
  out->name = in.name ? in.name : "";
  if (in.pciPath) out->pci_path = in.pciPath;
  out->guid = in.guid;
  out->ptr_support = in.ptrSupport;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->max_comms = in.maxComms;
  out->max_recvs = in.maxRecvs;
  if constexpr (requires { in.regIsGlobal; }) out->reg_is_global = in.regIsGlobal;
  if constexpr (requires { in.forceFlush; }) out->force_flush = in.forceFlush;
  if constexpr (requires { in.netDeviceType; }) {
    out->net_device_type = static_cast<int>(in.netDeviceType);
    out->net_device_version = in.netDeviceVersion;
  }
  if constexpr (requires { in.vProps; }) {
    out->vndevs = in.vProps.ndevs;
    constexpr int cap = static_cast<int>(sizeof(in.vProps.devs) / sizeof(in.vProps.devs[0]));
    std::vector<int> devs;
    for (int i = 0; i < in.vProps.ndevs && i < cap; ++i) devs.push_back(in.vProps.devs[i]);
    out->vdevs = devs;
    out->max_p2p_bytes = in.maxP2pBytes;
    out->max_coll_bytes = in.maxCollBytes;
  }
  if constexpr (requires { in.maxMultiRequestSize; }) out->max_multi_request_size = in.maxMultiRequestSize;
  if constexpr (requires { in.railId; }) {
    out->rail_id = in.railId;
    out->plane_id = in.planeId;
  }
}

constexpr int kMaxGroup = 64;  // more than any maxRecvs NCCL uses (NCCL_NET_IB_MAX_RECVS = 8)

template <int V>
class AdapterImpl final : public Adapter {
  using Net = typename Abi<V>::Net;
  using Props = typename Abi<V>::Props;

 public:
  explicit AdapterImpl(const Net* t) : t_(t) {}

  const char* name() const override { return t_->name ? t_->name : ""; }

  std::vector<std::string> missing_slots(Slots which) const override {
    std::vector<std::string> m;
    auto need = [&](const void* p, const char* n) {
      if (!p) m.emplace_back(n);
    };
    need(t_->name, "name");
    need(reinterpret_cast<const void*>(t_->init), "init");
    if (which == Slots::before_init) return m;
    need(reinterpret_cast<const void*>(t_->devices), "devices");
    need(reinterpret_cast<const void*>(t_->getProperties), "getProperties");
    need(reinterpret_cast<const void*>(t_->listen), "listen");
    need(reinterpret_cast<const void*>(t_->connect), "connect");
    need(reinterpret_cast<const void*>(t_->accept), "accept");
    need(reinterpret_cast<const void*>(t_->regMr), "regMr");
    need(reinterpret_cast<const void*>(t_->deregMr), "deregMr");
    need(reinterpret_cast<const void*>(t_->isend), "isend");
    need(reinterpret_cast<const void*>(t_->irecv), "irecv");
    need(reinterpret_cast<const void*>(t_->iflush), "iflush");
    need(reinterpret_cast<const void*>(t_->test), "test");
    need(reinterpret_cast<const void*>(t_->closeSend), "closeSend");
    need(reinterpret_cast<const void*>(t_->closeRecv), "closeRecv");
    need(reinterpret_cast<const void*>(t_->closeListen), "closeListen");
    if constexpr (V >= 11) need(reinterpret_cast<const void*>(t_->finalize), "finalize");
    return m;
  }

  ncclResult_t init(const InitArgs& a) override {
    if constexpr (V <= 9) {
      return t_->init(a.logger);
    } else if constexpr (V == 10) {
      config_.trafficClass = a.traffic_class;  // NCCL's v10 shim passes it to every connect()
      return t_->init(a.logger, a.profiler);
    } else {
      config_.trafficClass = a.traffic_class;  // kept alive: the plugin may hold the pointer
      return t_->init(&ctx_, a.comm_id, &config_, a.logger, a.profiler);
    }
  }

  ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }

  ncclResult_t getProperties(int dev, Properties* p) override {
    Props raw;
    std::memset(&raw, 0, sizeof raw);
    ncclResult_t r = t_->getProperties(dev, &raw);
    if (r == ncclSuccess) convert(raw, p);
    return r;
  }

  ncclResult_t listen(int dev, void* handle, void** listenComm) override {
    if constexpr (V >= 11) return t_->listen(ctx_, dev, handle, listenComm);
    else return t_->listen(dev, handle, listenComm);
  }

  ncclResult_t connect(int dev, void* handle, void** sendComm) override {
    if constexpr (V == 6) {
      return t_->connect(dev, handle, sendComm);
    } else {
      ncclNetDeviceHandle_v7_t* dh = nullptr;  // "no offload wanted"
      if constexpr (V <= 9) return t_->connect(dev, handle, sendComm, &dh);
      else if constexpr (V == 10) return t_->connect(dev, &config_, handle, sendComm, &dh);
      else return t_->connect(ctx_, dev, handle, sendComm, &dh);
    }
  }

  ncclResult_t accept(void* listenComm, void** recvComm) override {
    if constexpr (V == 6) {
      return t_->accept(listenComm, recvComm);
    } else {
      ncclNetDeviceHandle_v7_t* dh = nullptr;
      return t_->accept(listenComm, recvComm, &dh);
    }
  }

  ncclResult_t regMr(void* comm, void* data, std::size_t size, int type, void** mhandle) override {
    if constexpr (V <= 7) {
      if (size > static_cast<std::size_t>(INT_MAX)) return ncclInvalidArgument;
      return t_->regMr(comm, data, static_cast<int>(size), type, mhandle);
    } else {
      return t_->regMr(comm, data, size, type, mhandle);
    }
  }

  ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }

  bool has_regMrDmaBuf() const override { return t_->regMrDmaBuf != nullptr; }
  ncclResult_t regMrDmaBuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                           void** mhandle) override {
    if (!t_->regMrDmaBuf) return ncclInternalError;
    return t_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  }

  ncclResult_t isend(void* sendComm, void* data, std::size_t size, int tag, void* mhandle, void** request,
                     void* phandle = nullptr) override {
    if constexpr (V <= 8) {
      if (size > static_cast<std::size_t>(INT_MAX)) return ncclInvalidArgument;
      return t_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    } else if constexpr (V == 9) {
      return t_->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      return t_->isend(sendComm, data, size, tag, mhandle, phandle, request);
    }
  }

  ncclResult_t irecv(void* recvComm, int n, void** data, const std::size_t* sizes, int* tags, void** mhandles,
                     void** request, void** phandles = nullptr) override {
    if (n < 1 || n > kMaxGroup) return ncclInvalidArgument;
    if constexpr (V <= 8) {
      int isz[kMaxGroup];
      for (int i = 0; i < n; ++i) {
        if (sizes[i] > static_cast<std::size_t>(INT_MAX)) return ncclInvalidArgument;
        isz[i] = static_cast<int>(sizes[i]);
      }
      *request = nullptr;  // NCCL's v6-v8 shims clear the optional-completion hint
      return t_->irecv(recvComm, n, data, isz, tags, mhandles, request);
    } else {
      std::size_t ssz[kMaxGroup];
      for (int i = 0; i < n; ++i) ssz[i] = sizes[i];
      if constexpr (V == 9) {
        return t_->irecv(recvComm, n, data, ssz, tags, mhandles, request);
      } else {
        void* none[kMaxGroup] = {};
        return t_->irecv(recvComm, n, data, ssz, tags, mhandles, phandles ? phandles : none, request);
      }
    }
  }

  ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) override {
    return t_->iflush(recvComm, n, data, sizes, mhandles, request);
  }
  ncclResult_t test(void* request, int* done, int* sizes) override { return t_->test(request, done, sizes); }
  ncclResult_t closeSend(void* c) override { return t_->closeSend(c); }
  ncclResult_t closeRecv(void* c) override { return t_->closeRecv(c); }
  ncclResult_t closeListen(void* c) override { return t_->closeListen(c); }

  bool has_irecvConsumed() const override {
    if constexpr (V >= 7) return t_->irecvConsumed != nullptr;
    else return false;
  }
  ncclResult_t irecvConsumed(void* recvComm, int n, void* request) override {
    if constexpr (V >= 7) return t_->irecvConsumed(recvComm, n, request);
    else return ncclSuccess;
  }

  bool has_setNetAttr() const override {
    if constexpr (V >= 11) return t_->setNetAttr != nullptr;
    else return false;
  }
  ncclResult_t setNetAttr() override {
    if constexpr (V >= 11) {
      typename Abi<V>::Attr attr;
      std::memset(&attr, 0xff, sizeof attr);  // every field NCCL_NET_ATTR_UNDEF (-1 / all ones)
      return t_->setNetAttr(ctx_, &attr);
    } else {
      return ncclSuccess;
    }
  }

  bool has_makeVDevice() const override {
    if constexpr (V >= 9) return t_->makeVDevice != nullptr;
    else return false;
  }
  ncclResult_t makeVDevice(const std::vector<int>& devs, int* d) override {
    if constexpr (V >= 9) {
      decltype(typename Abi<V>::Props{}.vProps) props{};  // ncclNetVDeviceProps_vN_t
      constexpr std::size_t cap = sizeof(props.devs) / sizeof(props.devs[0]);
      if (devs.size() > cap) return ncclInvalidArgument;  // NCCL never asks for more than the version holds
      props.ndevs = static_cast<int>(devs.size());
      std::copy(devs.begin(), devs.end(), props.devs);
      return t_->makeVDevice(d, &props);
    } else {
      return ncclInvalidUsage;
    }
  }

  bool has_finalize() const override { return V >= 11; }
  ncclResult_t finalize() override {
    if constexpr (V >= 11) return t_->finalize(ctx_);
    else return ncclSuccess;
  }

 private:
  const Net* t_;
  void* ctx_ = nullptr;
  typename Abi<V>::Config config_{NCCL_NET_TRAFFIC_CLASS_UNDEF};
};

}  // namespace

std::unique_ptr<Adapter> make_adapter(int version, const void* sym) {
  switch (version) {
    case 6: return std::make_unique<AdapterImpl<6>>(static_cast<const ncclNet_v6_t*>(sym));
    case 7: return std::make_unique<AdapterImpl<7>>(static_cast<const ncclNet_v7_t*>(sym));
    case 8: return std::make_unique<AdapterImpl<8>>(static_cast<const ncclNet_v8_t*>(sym));
    case 9: return std::make_unique<AdapterImpl<9>>(static_cast<const ncclNet_v9_t*>(sym));
    case 10: return std::make_unique<AdapterImpl<10>>(static_cast<const ncclNet_v10_t*>(sym));
    case 11: return std::make_unique<AdapterImpl<11>>(static_cast<const ncclNet_v11_t*>(sym));
    case 12: return std::make_unique<AdapterImpl<12>>(static_cast<const ncclNet_v12_t*>(sym));
    default: return nullptr;
  }
}

}  // namespace ha_loader
