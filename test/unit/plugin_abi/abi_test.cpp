// Unit test for src/plugin/abi/nccl_net_abi.h.
//
// Mostly a compile-time test: the header's own static_asserts pin sizes and
// offsets, the is_same checks below restate the signature changes between
// versions independently of the header, and the C++20 designated
// initialisers used to build one dummy table per version only compile if
// the members are declared in exactly that order.  The runtime part drives
// each table the way NCCL would (init -> devices -> getProperties -> listen ->
// connect/accept -> regMr -> isend/irecv -> test -> close) to prove the
// function-pointer types are callable with the argument types NCCL passes.
#define BOOST_TEST_MODULE plugin_abi
#include <boost/test/unit_test.hpp>

#include "nccl_net_abi.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace {

// ---------------------------------------------------------------------------
// Compile-time restatement of the per-version signature differences.
// ---------------------------------------------------------------------------
template <typename Fn> using Ptr = Fn*;

// regMr: int size through v7, size_t from v8.
static_assert(std::is_same_v<decltype(ncclNet_v7_t::regMr), Ptr<ncclResult_t(void*, void*, int, int, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v8_t::regMr), Ptr<ncclResult_t(void*, void*, size_t, int, void**)>>);

// isend/irecv: int sizes through v8, size_t from v9, profiler handles from v10.
static_assert(std::is_same_v<decltype(ncclNet_v8_t::isend),
                             Ptr<ncclResult_t(void*, void*, int, int, void*, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v9_t::isend),
                             Ptr<ncclResult_t(void*, void*, size_t, int, void*, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v10_t::isend),
                             Ptr<ncclResult_t(void*, void*, size_t, int, void*, void*, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v8_t::irecv),
                             Ptr<ncclResult_t(void*, int, void**, int*, int*, void**, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v9_t::irecv),
                             Ptr<ncclResult_t(void*, int, void**, size_t*, int*, void**, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v12_t::irecv),
                             Ptr<ncclResult_t(void*, int, void**, size_t*, int*, void**, void**, void**)>>);

// test and iflush keep int sizes in every version.
static_assert(std::is_same_v<decltype(ncclNet_v6_t::test), decltype(ncclNet_v12_t::test)>);
static_assert(std::is_same_v<decltype(ncclNet_v12_t::test), Ptr<ncclResult_t(void*, int*, int*)>>);
static_assert(std::is_same_v<decltype(ncclNet_v6_t::iflush), decltype(ncclNet_v12_t::iflush)>);
static_assert(std::is_same_v<decltype(ncclNet_v12_t::iflush),
                             Ptr<ncclResult_t(void*, int, void**, int*, void**, void**)>>);

// init: logger only (v6-v9), + profiler (v10), + ctx/commId/config (v11+).
static_assert(std::is_same_v<decltype(ncclNet_v9_t::init), Ptr<ncclResult_t(ncclDebugLogger_t)>>);
static_assert(std::is_same_v<decltype(ncclNet_v10_t::init),
                             Ptr<ncclResult_t(ncclDebugLogger_t, ncclProfilerCallback_t)>>);
static_assert(std::is_same_v<decltype(ncclNet_v11_t::init),
                             Ptr<ncclResult_t(void**, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                                              ncclProfilerCallback_t)>>);

// connect: devHandle from v7, config as 2nd arg in v10 only, ctx first from v11.
static_assert(std::is_same_v<decltype(ncclNet_v6_t::connect), Ptr<ncclResult_t(int, void*, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v7_t::connect),
                             Ptr<ncclResult_t(int, void*, void**, ncclNetDeviceHandle_v7_t**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v10_t::connect),
                             Ptr<ncclResult_t(int, ncclNetCommConfig_v10_t*, void*, void**,
                                              ncclNetDeviceHandle_v10_t**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v11_t::connect),
                             Ptr<ncclResult_t(void*, int, void*, void**, ncclNetDeviceHandle_v11_t**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v10_t::listen), Ptr<ncclResult_t(int, void*, void**)>>);
static_assert(std::is_same_v<decltype(ncclNet_v11_t::listen), Ptr<ncclResult_t(void*, int, void*, void**)>>);

// The device handle never changed layout.
static_assert(std::is_same_v<ncclNetDeviceHandle_v7_t, ncclNetDeviceHandle_v12_t>);

// vNIC capacity doubled in v12.
static_assert(sizeof(ncclNetVDeviceProps_v11_t::devs) / sizeof(int) == 4);
static_assert(sizeof(ncclNetVDeviceProps_v12_t::devs) / sizeof(int) == 8);

// The "current" aliases are the v12 types.
static_assert(std::is_same_v<ncclNet_t, ncclNet_v12_t>);
static_assert(std::is_same_v<ncclNetProperties_t, ncclNetProperties_v12_t>);

// ---------------------------------------------------------------------------
// A tiny in-memory "NIC" shared by all dummy tables.
// ---------------------------------------------------------------------------
constexpr uint32_t kHandleMagic = 0x4e434841u;  // "NCHA"

struct Fake {
  int inits = 0;
  int finalizes = 0;
  int closes = 0;
  int regs = 0;
  int deregs = 0;
  size_t lastSendSize = 0;
  size_t lastRecvSize = 0;
  void* lastPhandle = nullptr;
  int lastTrafficClass = 0;
  std::string log;
  int sendComm = 0, recvComm = 0, listenComm = 0, mr = 0, request = 0, ctx = 0;
};
Fake g;

__attribute__((format(printf, 5, 6))) void testLogger(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                                       int line, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g.log += std::to_string(static_cast<int>(level)) + "/" + std::to_string(flags) + "/" + (file ? file : "") + ":" +
           std::to_string(line) + ":" + buf + "\n";
}

ncclResult_t testProfiler(void** eHandle, int type, void* pHandle, int64_t, void*) {
  if (type == ncclProfilerNetEventStart && eHandle) *eHandle = pHandle;
  return ncclSuccess;
}

// Entry points whose signature is identical across several versions.
ncclResult_t fakeDevices(int* ndev) {
  *ndev = 2;
  return ncclSuccess;
}
ncclResult_t fakeListen(int dev, void* handle, void** listenComm) {
  if (dev < 0 || dev >= 2) return ncclInvalidArgument;
  std::memcpy(handle, &kHandleMagic, sizeof kHandleMagic);
  *listenComm = &g.listenComm;
  return ncclSuccess;
}
ncclResult_t fakeListenCtx(void* ctx, int dev, void* handle, void** listenComm) {
  if (ctx != &g.ctx) return ncclInternalError;
  return fakeListen(dev, handle, listenComm);
}
ncclResult_t connectCommon(const void* handle, void** sendComm) {
  uint32_t magic = 0;
  std::memcpy(&magic, handle, sizeof magic);
  *sendComm = magic == kHandleMagic ? &g.sendComm : nullptr;
  return magic == kHandleMagic ? ncclSuccess : ncclRemoteError;
}
ncclResult_t fakeRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void** mhandle) {
  ++g.regs;
  *mhandle = &g.mr;
  return ncclSuccess;
}
ncclResult_t fakeDeregMr(void*, void* mhandle) {
  if (mhandle != &g.mr) return ncclInternalError;
  ++g.deregs;
  return ncclSuccess;
}
ncclResult_t fakeIflush(void*, int, void**, int*, void**, void** request) {
  *request = &g.request;
  return ncclSuccess;
}
ncclResult_t fakeTest(void* request, int* done, int* sizes) {
  if (request != &g.request) return ncclInternalError;
  *done = 1;
  if (sizes) sizes[0] = static_cast<int>(g.lastSendSize);
  return ncclSuccess;
}
ncclResult_t fakeClose(void*) {
  ++g.closes;
  return ncclSuccess;
}
ncclResult_t fakeGetDeviceMr(void*, void* mhandle, void** dptr) {
  *dptr = mhandle;
  return ncclSuccess;
}
ncclResult_t fakeIrecvConsumed(void*, int, void*) { return ncclSuccess; }

// Properties: fill the fields every version has, then the newer ones.
template <typename P> void fillBase(P* p, int dev) {
  static char name[] = "fake0";
  p->name = name;
  p->pciPath = nullptr;
  p->guid = 0x1000u + static_cast<uint64_t>(dev);
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 200000;  // Mbps: 200 Gb/s
  p->port = 1;
  p->latency = 0.0f;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  if constexpr (requires { p->netDeviceType; }) {
    p->netDeviceType = NCCL_NET_DEVICE_HOST;
    p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  }
  if constexpr (requires { p->regIsGlobal; }) p->regIsGlobal = 0;
  if constexpr (requires { p->forceFlush; }) {
    p->forceFlush = 0;
    p->vProps.ndevs = 1;
    p->vProps.devs[0] = dev;
    p->maxP2pBytes = NCCL_HA_NET_LEGACY_MAX_P2P_BYTES;
    p->maxCollBytes = NCCL_HA_NET_LEGACY_MAX_COLL_BYTES;
  }
  if constexpr (requires { p->maxMultiRequestSize; }) p->maxMultiRequestSize = 1;
  if constexpr (requires { p->railId; }) {
    p->railId = NCCL_NET_ID_UNDEF;
    p->planeId = NCCL_NET_ID_UNDEF;
  }
}

template <typename P> ncclResult_t fakeGetProperties(int dev, P* props) {
  if (dev < 0 || dev >= 2) return ncclInvalidArgument;
  std::memset(props, 0, sizeof *props);
  fillBase(props, dev);
  return ncclSuccess;
}

template <typename VP> ncclResult_t fakeMakeVDevice(int* d, VP* props) {
  if (props->ndevs < 1 || props->ndevs > static_cast<int>(sizeof props->devs / sizeof props->devs[0]))
    return ncclInvalidUsage;
  *d = 2;  // first index after the two physical devices
  return ncclSuccess;
}

void reset() { g = Fake{}; }

// ---------------------------------------------------------------------------
// Dummy tables, one per version.  Designated initialisers => order-checked.
// ---------------------------------------------------------------------------
const ncclNet_v6_t kNetV6 = {
    .name = "ha-v6",
    .init = [](ncclDebugLogger_t log) {
      ++g.inits; log(NCCL_LOG_INFO, NCCL_NET, "f", 1, "v%d", 6); return ncclSuccess; },
    .devices = fakeDevices,
    .getProperties = fakeGetProperties<ncclNetProperties_v6_t>,
    .listen = fakeListen,
    .connect = [](int, void* handle, void** sendComm) { return connectCommon(handle, sendComm); },
    .accept = [](void*, void** recvComm) { *recvComm = &g.recvComm; return ncclSuccess; },
    .regMr = [](void*, void*, int, int, void** mh) { ++g.regs; *mh = &g.mr; return ncclSuccess; },
    .regMrDmaBuf = fakeRegMrDmaBuf,
    .deregMr = fakeDeregMr,
    .isend = [](void*, void*, int size, int, void*, void** req) {
      g.lastSendSize = static_cast<size_t>(size); *req = &g.request; return ncclSuccess; },
    .irecv = [](void*, int, void**, int* sizes, int*, void**, void** req) {
      g.lastRecvSize = static_cast<size_t>(sizes[0]); *req = &g.request; return ncclSuccess; },
    .iflush = fakeIflush,
    .test = fakeTest,
    .closeSend = fakeClose,
    .closeRecv = fakeClose,
    .closeListen = fakeClose,
};

const ncclNet_v7_t kNetV7 = {
    .name = "ha-v7",
    .init = [](ncclDebugLogger_t) { ++g.inits; return ncclSuccess; },
    .devices = fakeDevices,
    .getProperties = fakeGetProperties<ncclNetProperties_v7_t>,
    .listen = fakeListen,
    .connect = [](int, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t**) {
      return connectCommon(handle, sendComm); },
    .accept = [](void*, void** recvComm, ncclNetDeviceHandle_v7_t**) { *recvComm = &g.recvComm; return ncclSuccess; },
    .regMr = [](void*, void*, int, int, void** mh) { ++g.regs; *mh = &g.mr; return ncclSuccess; },
    .regMrDmaBuf = fakeRegMrDmaBuf,
    .deregMr = fakeDeregMr,
    .isend = [](void*, void*, int size, int, void*, void** req) {
      g.lastSendSize = static_cast<size_t>(size); *req = &g.request; return ncclSuccess; },
    .irecv = [](void*, int, void**, int* sizes, int*, void**, void** req) {
      g.lastRecvSize = static_cast<size_t>(sizes[0]); *req = &g.request; return ncclSuccess; },
    .iflush = fakeIflush,
    .test = fakeTest,
    .closeSend = fakeClose,
    .closeRecv = fakeClose,
    .closeListen = fakeClose,
    .getDeviceMr = fakeGetDeviceMr,
    .irecvConsumed = fakeIrecvConsumed,
};

const ncclNet_v8_t kNetV8 = {
    .name = "ha-v8",
    .init = [](ncclDebugLogger_t) { ++g.inits; return ncclSuccess; },
    .devices = fakeDevices,
    .getProperties = fakeGetProperties<ncclNetProperties_v8_t>,
    .listen = fakeListen,
    .connect = [](int, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t**) {
      return connectCommon(handle, sendComm); },
    .accept = [](void*, void** recvComm, ncclNetDeviceHandle_v8_t**) { *recvComm = &g.recvComm; return ncclSuccess; },
    .regMr = [](void*, void*, size_t, int, void** mh) { ++g.regs; *mh = &g.mr; return ncclSuccess; },
    .regMrDmaBuf = fakeRegMrDmaBuf,
    .deregMr = fakeDeregMr,
    .isend = [](void*, void*, int size, int, void*, void** req) {
      g.lastSendSize = static_cast<size_t>(size); *req = &g.request; return ncclSuccess; },
    .irecv = [](void*, int, void**, int* sizes, int*, void**, void** req) {
      g.lastRecvSize = static_cast<size_t>(sizes[0]); *req = &g.request; return ncclSuccess; },
    .iflush = fakeIflush,
    .test = fakeTest,
    .closeSend = fakeClose,
    .closeRecv = fakeClose,
    .closeListen = fakeClose,
    .getDeviceMr = fakeGetDeviceMr,
    .irecvConsumed = fakeIrecvConsumed,
};

const ncclNet_v9_t kNetV9 = {
    .name = "ha-v9",
    .init = [](ncclDebugLogger_t) { ++g.inits; return ncclSuccess; },
    .devices = fakeDevices,
    .getProperties = fakeGetProperties<ncclNetProperties_v9_t>,
    .listen = fakeListen,
    .connect = [](int, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t**) {
      return connectCommon(handle, sendComm); },
    .accept = [](void*, void** recvComm, ncclNetDeviceHandle_v9_t**) { *recvComm = &g.recvComm; return ncclSuccess; },
    .regMr = [](void*, void*, size_t, int, void** mh) { ++g.regs; *mh = &g.mr; return ncclSuccess; },
    .regMrDmaBuf = fakeRegMrDmaBuf,
    .deregMr = fakeDeregMr,
    .isend = [](void*, void*, size_t size, int, void*, void** req) {
      g.lastSendSize = size; *req = &g.request; return ncclSuccess; },
    .irecv = [](void*, int, void**, size_t* sizes, int*, void**, void** req) {
      // v9+: NCCL may pre-load *req with the optional-completion hint.
      if (*req == reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION)) g.lastPhandle = *req;
      g.lastRecvSize = sizes[0]; *req = &g.request; return ncclSuccess; },
    .iflush = fakeIflush,
    .test = fakeTest,
    .closeSend = fakeClose,
    .closeRecv = fakeClose,
    .closeListen = fakeClose,
    .getDeviceMr = fakeGetDeviceMr,
    .irecvConsumed = fakeIrecvConsumed,
    .makeVDevice = fakeMakeVDevice<ncclNetVDeviceProps_v9_t>,
};

const ncclNet_v10_t kNetV10 = {
    .name = "ha-v10",
    .init = [](ncclDebugLogger_t, ncclProfilerCallback_t prof) {
      ++g.inits; return prof ? ncclSuccess : ncclInvalidArgument; },
    .devices = fakeDevices,
    .getProperties = fakeGetProperties<ncclNetProperties_v10_t>,
    .listen = fakeListen,
    .connect = [](int, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm, ncclNetDeviceHandle_v10_t**) {
      g.lastTrafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
      return connectCommon(handle, sendComm); },
    .accept = [](void*, void** recvComm, ncclNetDeviceHandle_v10_t**) {
      *recvComm = &g.recvComm; return ncclSuccess; },
    .regMr = [](void*, void*, size_t, int, void** mh) { ++g.regs; *mh = &g.mr; return ncclSuccess; },
    .regMrDmaBuf = fakeRegMrDmaBuf,
    .deregMr = fakeDeregMr,
    .isend = [](void*, void*, size_t size, int, void*, void* phandle, void** req) {
      g.lastSendSize = size; g.lastPhandle = phandle; *req = &g.request; return ncclSuccess; },
    .irecv = [](void*, int, void**, size_t* sizes, int*, void**, void** phandles, void** req) {
      g.lastRecvSize = sizes[0]; g.lastPhandle = phandles ? phandles[0] : nullptr; *req = &g.request;
      return ncclSuccess; },
    .iflush = fakeIflush,
    .test = fakeTest,
    .closeSend = fakeClose,
    .closeRecv = fakeClose,
    .closeListen = fakeClose,
    .getDeviceMr = fakeGetDeviceMr,
    .irecvConsumed = fakeIrecvConsumed,
    .makeVDevice = fakeMakeVDevice<ncclNetVDeviceProps_v10_t>,
};

template <typename Config> ncclResult_t fakeInitCtx(void** ctx, uint64_t commId, Config* config, ncclDebugLogger_t log,
                                                    ncclProfilerCallback_t) {
  ++g.inits;
  g.lastTrafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  if (log) log(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, __FILE__, __LINE__, "comm %llx",
               static_cast<unsigned long long>(commId));
  *ctx = &g.ctx;
  return ncclSuccess;
}
ncclResult_t fakeFinalize(void* ctx) {
  if (ctx != &g.ctx) return ncclInternalError;
  ++g.finalizes;
  return ncclSuccess;
}

const ncclNet_v11_t kNetV11 = {
    .name = "ha-v11",
    .init = fakeInitCtx<ncclNetCommConfig_v11_t>,
    .devices = fakeDevices,
    .getProperties = fakeGetProperties<ncclNetProperties_v11_t>,
    .listen = fakeListenCtx,
    .connect = [](void* ctx, int, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t**) {
      return ctx == &g.ctx ? connectCommon(handle, sendComm) : ncclInternalError; },
    .accept = [](void*, void** recvComm, ncclNetDeviceHandle_v11_t**) {
      *recvComm = &g.recvComm; return ncclSuccess; },
    .regMr = [](void*, void*, size_t, int, void** mh) { ++g.regs; *mh = &g.mr; return ncclSuccess; },
    .regMrDmaBuf = fakeRegMrDmaBuf,
    .deregMr = fakeDeregMr,
    .isend = [](void*, void*, size_t size, int, void*, void* phandle, void** req) {
      g.lastSendSize = size; g.lastPhandle = phandle; *req = &g.request; return ncclSuccess; },
    .irecv = [](void*, int, void**, size_t* sizes, int*, void**, void** phandles, void** req) {
      g.lastRecvSize = sizes[0]; g.lastPhandle = phandles ? phandles[0] : nullptr; *req = &g.request;
      return ncclSuccess; },
    .iflush = fakeIflush,
    .test = fakeTest,
    .closeSend = fakeClose,
    .closeRecv = fakeClose,
    .closeListen = fakeClose,
    .getDeviceMr = fakeGetDeviceMr,
    .irecvConsumed = fakeIrecvConsumed,
    .makeVDevice = fakeMakeVDevice<ncclNetVDeviceProps_v11_t>,
    .finalize = fakeFinalize,
    .setNetAttr = [](void* ctx, ncclNetAttr_v11_t* attr) {
      return (ctx == &g.ctx && attr) ? ncclSuccess : ncclInvalidArgument; },
};

const ncclNet_v12_t kNetV12 = {
    .name = "ha-v12",
    .init = fakeInitCtx<ncclNetCommConfig_v12_t>,
    .devices = fakeDevices,
    .getProperties = fakeGetProperties<ncclNetProperties_v12_t>,
    .listen = fakeListenCtx,
    .connect = [](void* ctx, int, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t**) {
      return ctx == &g.ctx ? connectCommon(handle, sendComm) : ncclInternalError; },
    .accept = [](void*, void** recvComm, ncclNetDeviceHandle_v12_t**) {
      *recvComm = &g.recvComm; return ncclSuccess; },
    .regMr = [](void*, void*, size_t, int, void** mh) { ++g.regs; *mh = &g.mr; return ncclSuccess; },
    .regMrDmaBuf = fakeRegMrDmaBuf,
    .deregMr = fakeDeregMr,
    .isend = [](void*, void*, size_t size, int, void*, void* phandle, void** req) {
      g.lastSendSize = size; g.lastPhandle = phandle; *req = &g.request; return ncclSuccess; },
    .irecv = [](void*, int, void**, size_t* sizes, int*, void**, void** phandles, void** req) {
      g.lastRecvSize = sizes[0]; g.lastPhandle = phandles ? phandles[0] : nullptr; *req = &g.request;
      return ncclSuccess; },
    .iflush = fakeIflush,
    .test = fakeTest,
    .closeSend = fakeClose,
    .closeRecv = fakeClose,
    .closeListen = fakeClose,
    .getDeviceMr = fakeGetDeviceMr,
    .irecvConsumed = fakeIrecvConsumed,
    .makeVDevice = fakeMakeVDevice<ncclNetVDeviceProps_v12_t>,
    .finalize = fakeFinalize,
    .setNetAttr = [](void* ctx, ncclNetAttr_v12_t* attr) {
      return (ctx == &g.ctx && attr) ? ncclSuccess : ncclInvalidArgument; },
};

// ---------------------------------------------------------------------------
// Drive a table through NCCL's call sequence.  `Version` selects the calling
// convention, mirroring how NCCL's per-version shims call the plugin.
// ---------------------------------------------------------------------------
template <int Version, typename Net, typename Props> void exercise(const Net& net) {
  reset();
  BOOST_TEST_CONTEXT("ncclNet_v" << Version) {
    void* ctx = nullptr;
    if constexpr (Version >= 11) {
      // The v11 and v12 comm configs are distinct types with one int each.
      using CfgT = std::conditional_t<Version == 11, ncclNetCommConfig_v11_t, ncclNetCommConfig_v12_t>;
      CfgT cfg{.trafficClass = 7};
      BOOST_TEST(net.init(&ctx, 0xabcdULL, &cfg, testLogger, testProfiler) == ncclSuccess);
      BOOST_TEST(ctx == static_cast<void*>(&g.ctx));
      BOOST_TEST(g.lastTrafficClass == 7);
    } else if constexpr (Version == 10) {
      BOOST_TEST(net.init(testLogger, testProfiler) == ncclSuccess);
    } else {
      BOOST_TEST(net.init(testLogger) == ncclSuccess);
    }
    BOOST_TEST(g.inits == 1);

    int ndev = 0;
    BOOST_TEST(net.devices(&ndev) == ncclSuccess);
    BOOST_TEST(ndev == 2);

    Props props{};
    BOOST_TEST(net.getProperties(1, &props) == ncclSuccess);
    BOOST_TEST(props.guid == 0x1001u);
    BOOST_TEST(props.speed == 200000);
    BOOST_TEST((props.ptrSupport & NCCL_PTR_HOST) != 0);

    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listenComm = nullptr;
    void* sendComm = nullptr;
    void* recvComm = nullptr;
    if constexpr (Version >= 11) {
      BOOST_TEST(net.listen(ctx, 0, handle, &listenComm) == ncclSuccess);
      BOOST_TEST(net.connect(ctx, 0, handle, &sendComm, nullptr) == ncclSuccess);
      BOOST_TEST(net.accept(listenComm, &recvComm, nullptr) == ncclSuccess);
    } else if constexpr (Version == 10) {
      ncclNetCommConfig_v10_t cfg{.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
      BOOST_TEST(net.listen(0, handle, &listenComm) == ncclSuccess);
      BOOST_TEST(net.connect(0, &cfg, handle, &sendComm, nullptr) == ncclSuccess);
      BOOST_TEST(g.lastTrafficClass == NCCL_NET_TRAFFIC_CLASS_UNDEF);
      BOOST_TEST(net.accept(listenComm, &recvComm, nullptr) == ncclSuccess);
    } else if constexpr (Version >= 7) {
      BOOST_TEST(net.listen(0, handle, &listenComm) == ncclSuccess);
      BOOST_TEST(net.connect(0, handle, &sendComm, nullptr) == ncclSuccess);
      BOOST_TEST(net.accept(listenComm, &recvComm, nullptr) == ncclSuccess);
    } else {
      BOOST_TEST(net.listen(0, handle, &listenComm) == ncclSuccess);
      BOOST_TEST(net.connect(0, handle, &sendComm) == ncclSuccess);
      BOOST_TEST(net.accept(listenComm, &recvComm) == ncclSuccess);
    }
    BOOST_TEST(listenComm != nullptr);
    BOOST_TEST(sendComm == static_cast<void*>(&g.sendComm));
    BOOST_TEST(recvComm == static_cast<void*>(&g.recvComm));

    char buf[64] = {};
    void* mh = nullptr;
    BOOST_TEST(net.regMr(sendComm, buf, sizeof buf, NCCL_PTR_HOST, &mh) == ncclSuccess);
    BOOST_TEST(mh == static_cast<void*>(&g.mr));

    void* sreq = nullptr;
    void* rreq = nullptr;
    void* data[1] = {buf};
    int tags[1] = {0};
    void* mhs[1] = {mh};
    int phandleTarget = 0;
    void* phandles[1] = {&phandleTarget};
    if constexpr (Version >= 10) {
      size_t sizes[1] = {sizeof buf};
      BOOST_TEST(net.isend(sendComm, buf, 48, 0, mh, &phandleTarget, &sreq) == ncclSuccess);
      BOOST_TEST(g.lastPhandle == static_cast<void*>(&phandleTarget));
      BOOST_TEST(net.irecv(recvComm, 1, data, sizes, tags, mhs, phandles, &rreq) == ncclSuccess);
    } else if constexpr (Version == 9) {
      size_t sizes[1] = {sizeof buf};
      BOOST_TEST(net.isend(sendComm, buf, 48, 0, mh, &sreq) == ncclSuccess);
      rreq = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
      BOOST_TEST(net.irecv(recvComm, 1, data, sizes, tags, mhs, &rreq) == ncclSuccess);
      BOOST_TEST(g.lastPhandle == reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION));
    } else {
      int sizes[1] = {sizeof buf};
      BOOST_TEST(net.isend(sendComm, buf, 48, 0, mh, &sreq) == ncclSuccess);
      BOOST_TEST(net.irecv(recvComm, 1, data, sizes, tags, mhs, &rreq) == ncclSuccess);
    }
    BOOST_TEST(g.lastSendSize == 48u);
    BOOST_TEST(g.lastRecvSize == sizeof buf);
    BOOST_TEST(rreq == static_cast<void*>(&g.request));

    int done = 0;
    int got[1] = {0};
    BOOST_TEST(net.test(sreq, &done, nullptr) == ncclSuccess);
    BOOST_TEST(net.test(rreq, &done, got) == ncclSuccess);
    BOOST_TEST(done == 1);
    BOOST_TEST(got[0] == 48);

    void* freq = nullptr;
    BOOST_TEST(net.iflush(recvComm, 1, data, got, mhs, &freq) == ncclSuccess);
    BOOST_TEST(freq != nullptr);

    if constexpr (Version >= 7) {
      void* dptr = nullptr;
      BOOST_TEST(net.getDeviceMr(sendComm, mh, &dptr) == ncclSuccess);
      BOOST_TEST(net.irecvConsumed(recvComm, 1, rreq) == ncclSuccess);
    }
    if constexpr (Version >= 9) {
      decltype(props.vProps) vp{};
      vp.ndevs = 2;
      vp.devs[0] = 0;
      vp.devs[1] = 1;
      int vdev = -1;
      BOOST_TEST(net.makeVDevice(&vdev, &vp) == ncclSuccess);
      BOOST_TEST(vdev == 2);
    }

    BOOST_TEST(net.deregMr(sendComm, mh) == ncclSuccess);
    BOOST_TEST(net.closeSend(sendComm) == ncclSuccess);
    BOOST_TEST(net.closeRecv(recvComm) == ncclSuccess);
    BOOST_TEST(net.closeListen(listenComm) == ncclSuccess);
    BOOST_TEST(g.closes == 3);
    BOOST_TEST(g.regs == 1);
    BOOST_TEST(g.deregs == 1);

    if constexpr (Version >= 11) {
      using Attr = std::conditional_t<Version == 11, ncclNetAttr_v11_t, ncclNetAttr_v12_t>;
      Attr attr{};
      attr.sendCommAttr.maxConcurrentPeers = NCCL_NET_ATTR_UNDEF;
      attr.op = static_cast<uint32_t>(NCCL_NET_ATTR_UNDEF);
      BOOST_TEST(net.setNetAttr(ctx, &attr) == ncclSuccess);
      BOOST_TEST(net.finalize(ctx) == ncclSuccess);
      BOOST_TEST(g.finalizes == 1);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(constants) {
  BOOST_TEST(NCCL_NET_HANDLE_MAXSIZE == 128);
  BOOST_TEST(NCCL_PTR_HOST == 0x1);
  BOOST_TEST(NCCL_PTR_CUDA == 0x2);
  BOOST_TEST(NCCL_PTR_DMABUF == 0x4);
  BOOST_TEST((NCCL_PTR_HOST & NCCL_PTR_CUDA) == 0);
  BOOST_TEST((NCCL_PTR_CUDA & NCCL_PTR_DMABUF) == 0);
  BOOST_TEST(NCCL_NET_OPTIONAL_RECV_COMPLETION == 0x1);
  BOOST_TEST(NCCL_NET_MAX_REQUESTS == 32);
  BOOST_TEST(NCCL_NET_MAX_DEVS_PER_NIC_V11 == 4);
  BOOST_TEST(NCCL_NET_MAX_DEVS_PER_NIC_V12 == 8);
  BOOST_TEST(NCCL_NET_MAX_DEVS_PER_NIC == NCCL_NET_MAX_DEVS_PER_NIC_V12);
  BOOST_TEST(NCCL_MAX_NET_SIZE_BYTES == (1LL << 40));
  BOOST_TEST(NCCL_HA_NET_LEGACY_MAX_P2P_BYTES == (1LL << 30));
  BOOST_TEST(NCCL_HA_NET_LEGACY_MAX_COLL_BYTES == (1LL << 29));
  BOOST_TEST(NCCL_NET_TRAFFIC_CLASS_UNDEF == -1);
  BOOST_TEST(NCCL_NET_DEVICE_UNPACK_VERSION == 0x7);
  BOOST_TEST(static_cast<int>(ncclSuccess) == 0);
  BOOST_TEST(static_cast<int>(ncclSystemError) == 2);
  BOOST_TEST(static_cast<int>(ncclRemoteError) == 6);
  BOOST_TEST(static_cast<int>(ncclInProgress) == 7);
  BOOST_TEST(static_cast<int>(NCCL_NET) == 0x10);
  BOOST_TEST(static_cast<int>(NCCL_ALL) == -1);
  BOOST_TEST(std::string_view(NCCL_HA_NET_PLUGIN_SYMBOL_V6) == "ncclNetPlugin_v6");
  BOOST_TEST(std::string_view(NCCL_HA_NET_PLUGIN_SYMBOL_V10) == "ncclNetPlugin_v10");
  BOOST_TEST(std::string_view(NCCL_HA_NET_PLUGIN_SYMBOL_LATEST) == "ncclNetPlugin_v12");
}

BOOST_AUTO_TEST_CASE(struct_sizes_x86_64) {
  // Duplicates a few of the header's static_asserts at runtime so a failure
  // shows up in test output too.
  BOOST_TEST(sizeof(ncclNetProperties_v6_t) == 48u);
  BOOST_TEST(sizeof(ncclNetProperties_v8_t) == 64u);
  BOOST_TEST(sizeof(ncclNetProperties_v9_t) == 104u);
  BOOST_TEST(sizeof(ncclNetProperties_v12_t) == 128u);
  BOOST_TEST(sizeof(ncclNet_v6_t) == 17 * sizeof(void*));
  BOOST_TEST(sizeof(ncclNet_v8_t) == 19 * sizeof(void*));
  BOOST_TEST(sizeof(ncclNet_v10_t) == 20 * sizeof(void*));
  BOOST_TEST(sizeof(ncclNet_v12_t) == 22 * sizeof(void*));
}

BOOST_AUTO_TEST_CASE(logger_is_callable) {
  reset();
  ncclDebugLogger_t log = testLogger;
  log(NCCL_LOG_WARN, NCCL_NET | NCCL_INIT, "x.cpp", 12, "hello %s %d", "net", 3);
  BOOST_TEST(g.log == "2/17/x.cpp:12:hello net 3\n");
}

BOOST_AUTO_TEST_CASE(net_v6) { exercise<6, ncclNet_v6_t, ncclNetProperties_v6_t>(kNetV6); }
BOOST_AUTO_TEST_CASE(net_v7) { exercise<7, ncclNet_v7_t, ncclNetProperties_v7_t>(kNetV7); }
BOOST_AUTO_TEST_CASE(net_v8) { exercise<8, ncclNet_v8_t, ncclNetProperties_v8_t>(kNetV8); }
BOOST_AUTO_TEST_CASE(net_v9) { exercise<9, ncclNet_v9_t, ncclNetProperties_v9_t>(kNetV9); }
BOOST_AUTO_TEST_CASE(net_v10) { exercise<10, ncclNet_v10_t, ncclNetProperties_v10_t>(kNetV10); }
BOOST_AUTO_TEST_CASE(net_v11) { exercise<11, ncclNet_v11_t, ncclNetProperties_v11_t>(kNetV11); }
BOOST_AUTO_TEST_CASE(net_v12) { exercise<12, ncclNet_v12_t, ncclNetProperties_v12_t>(kNetV12); }

BOOST_AUTO_TEST_CASE(v12_properties_defaults) {
  ncclNetProperties_v12_t p{};
  BOOST_TEST(kNetV12.getProperties(0, &p) == ncclSuccess);
  BOOST_TEST(p.railId == NCCL_NET_ID_UNDEF);
  BOOST_TEST(p.planeId == NCCL_NET_ID_UNDEF);
  BOOST_TEST(p.vProps.ndevs == 1);
  BOOST_TEST(p.maxP2pBytes > 0u);
  BOOST_TEST(p.maxP2pBytes <= static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
  BOOST_TEST(p.maxMultiRequestSize == 1);
  BOOST_TEST(p.netDeviceType == NCCL_NET_DEVICE_HOST);
}
