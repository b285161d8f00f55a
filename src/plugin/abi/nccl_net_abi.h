// SPDX-License-Identifier: Apache-2.0
//
// nccl-ha: binary interface between libnccl and an external network plugin.
//
// This file is nccl-ha's own description of the ABI that NCCL expects from
// `libnccl-net*.so` plugins, written from the facts of the upstream headers
// (see README.md in this directory for the upstream paths and commit).  Type,
// field and constant names intentionally match NCCL's spelling because they
// *are* the interface; everything else (layout of this file, comments,
// helper macros prefixed NCCL_HA_) is ours.
//
// Rules for editing:
//   * Never reorder, insert or remove members of a versioned struct: NCCL
//     reads them by offset.  A layout change upstream is always a new
//     version number, i.e. a new struct here.
//   * Every struct has size/offset checks in nccl_net_abi_checks.h.
//   * Do not include this header together with NCCL's own nccl.h /
//     nccl_net.h in the same translation unit; the names collide on purpose.
//
// Everything below is plain C so the header can also be consumed from C.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Result codes (from nccl.h)                                               */
/* ======================================================================== */

/* Every plugin entry point returns one of these.  ncclTimeout first appeared
 * in NCCL 2.30 (it moved ncclNumResults from 8 to 9); a plugin targeting
 * older NCCL must not return it. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

/* ======================================================================== */
/* Logging (from nccl_common.h)                                             */
/* ======================================================================== */

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* Subsystem bits for the `flags` argument of the logger; they are matched
 * against NCCL_DEBUG_SUBSYS.  NCCL_DESTROY (2.30.3+) and NCCL_ALLOC_HOST
 * (2.30.7+) are recent additions; older NCCL simply never enables them. */
typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_DESTROY = 0x10000,
  NCCL_ALLOC_HOST = 0x20000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* printf-style sink handed to every `init` version.  `file`/`line` are the
 * caller's source location (NCCL prints them at TRACE level), `flags` is a
 * mask of ncclDebugLogSubSys bits. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

/* ======================================================================== */
/* Profiler hook (net v10+)                                                 */
/* ======================================================================== */

/* Values for the `type` argument of ncclProfilerCallback_t. */
enum {
  ncclProfilerNetEventStart = 0,         /* open an event under pHandle; *eHandle receives it */
  ncclProfilerNetEventStop = 1,          /* close *eHandle */
  ncclProfilerNetEventUpdate = 2,        /* attach extData to *eHandle */
  ncclProfilerNetEventUpdateAndStop = 3  /* update then close */
};

/* Callback into NCCL core that lets a plugin emit its own profiler events.
 * `pHandle` is the opaque per-operation handle NCCL passed to isend/irecv
 * (v10+ `phandle`/`phandles`); `pluginId` and `extData` are forwarded verbatim
 * to the profiler plugin.  May be called with a NULL profiler attached: NCCL
 * then does nothing. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                               void* extData);

/* ======================================================================== */
/* Plain constants (from nccl_net.h / net_vN.h / net_device.h)              */
/* ======================================================================== */

/* Bytes NCCL reserves for the opaque connection handle filled by listen()
 * and handed (via bootstrap) to the peer's connect(). */
#define NCCL_NET_HANDLE_MAXSIZE 128

/* ptrSupport bits and the `type` argument of regMr/regMrDmaBuf. */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Sentinel NCCL stores in *request *before* calling irecv (v9+ only; NCCL's
 * shims clear it for v6-v8 plugins).  It means "LL/LL128 single receive:
 * completion is detected from flags in the data, so the plugin may complete
 * this request eagerly".  The plugin must still overwrite *request with a
 * real request (or NULL for "retry later"). */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1

/* Multi-request flag defined alongside maxMultiRequestSize (v11+).  NCCL
 * 2.30 core defines but does not consume it for the net transport. */
#define NCCL_NET_MULTI_REQUEST 0x2

/* Each sendComm/recvComm must cope with this many requests in flight (the
 * send side multiplied by maxRecvs).  v6-era NCCL used 8. */
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_REQUESTS_V6 8

/* Upper bound NCCL accepts for maxP2pBytes / maxCollBytes (1 TiB). */
#define NCCL_MAX_NET_SIZE_BYTES (1LL * 1024 * 1024 * 1024 * 1024)

/* What NCCL's compat shims assume for plugins older than v9, which cannot
 * report maxP2pBytes/maxCollBytes: 1 GiB per p2p transfer, 512 MiB per
 * collnet transfer.  (NCCL calls these MAX_NET_SIZE / MAX_COLLNET_SIZE.) */
#define NCCL_HA_NET_LEGACY_MAX_P2P_BYTES (1024LL * 1024 * 1024)
#define NCCL_HA_NET_LEGACY_MAX_COLL_BYTES (512LL * 1024 * 1024)

/* Physical NICs one virtual NIC may fuse (size of vProps.devs).  v9-v11
 * allow 4, v12 allows 8. */
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V10 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_MAX_DEVS_PER_NIC NCCL_NET_MAX_DEVS_PER_NIC_V12

/* "Not configured" markers. */
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1) /* ncclNetCommConfig.trafficClass */
#define NCCL_NET_ATTR_UNDEF (-1)          /* ncclNetAttr / ncclNetCommAttr fields */
#define NCCL_NET_ID_UNDEF (-1)            /* ncclNetProperties_v12 railId / planeId */

/* Device-side ("net device") offload versions. */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

/* Names of the data symbols NCCL looks up with dlsym(); each one must be a
 * global object (not a function) of the matching ncclNet_vN_t type. */
#define NCCL_HA_NET_PLUGIN_SYMBOL_V6 "ncclNetPlugin_v6"
#define NCCL_HA_NET_PLUGIN_SYMBOL_V7 "ncclNetPlugin_v7"
#define NCCL_HA_NET_PLUGIN_SYMBOL_V8 "ncclNetPlugin_v8"
#define NCCL_HA_NET_PLUGIN_SYMBOL_V9 "ncclNetPlugin_v9"
#define NCCL_HA_NET_PLUGIN_SYMBOL_V10 "ncclNetPlugin_v10"
#define NCCL_HA_NET_PLUGIN_SYMBOL_V11 "ncclNetPlugin_v11"
#define NCCL_HA_NET_PLUGIN_SYMBOL_V12 "ncclNetPlugin_v12"

/* ======================================================================== */
/* Device offload description (net_device.h)                                */
/* ======================================================================== */

/* Kind of device-side networking a NIC offers.  NCCL's net transport accepts
 * HOST, or UNPACK with netDeviceVersion == NCCL_NET_DEVICE_UNPACK_VERSION;
 * anything else reported for device 0 makes NCCL skip the plugin.  The GIN_*
 * values (2.29+) belong to the GIN plugin family, not to ncclNet. */
typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
  NCCL_NET_DEVICE_GIN_GPI = 4
} ncclNetDeviceType;

/* Device-offload handle exchanged through the last argument of connect()
 * and accept() (v7+).  That argument can arrive in three shapes:
 *   - NULL itself (NCCL's one-off GDR probe connection),
 *   - pointing at NULL: no offload wanted for this connection,
 *   - pointing at a handle NCCL allocated with netDeviceType/Version already
 *     set (today only UNPACK on the receive side): the plugin fills the rest.
 * The layout has not changed since v7; later versions are aliases. */
typedef struct {
  ncclNetDeviceType netDeviceType; /* preset by NCCL from getProperties */
  int netDeviceVersion;            /* preset by NCCL from getProperties */
  void* handle;                    /* device-visible plugin state */
  size_t size;                     /* bytes behind `handle` */
  int needsProxyProgress;          /* non-zero: NCCL keeps calling the proxy path */
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;

/* ======================================================================== */
/* Per-version helper structs                                               */
/* ======================================================================== */

/* Virtual-NIC (NIC fusion) description: indices of the physical devices
 * that make up one device.  Physical devices report {1, {self}}. */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V10];
} ncclNetVDeviceProps_v10_t;

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

/* Per-communicator configuration.  v10 passes it to every connect(); v11+
 * passes it once to init().  trafficClass is NCCL_NET_TRAFFIC_CLASS_UNDEF
 * unless the application set ncclConfig_t.trafficClass. */
typedef struct {
  int trafficClass;
} ncclNetCommConfig_v10_t;

typedef struct {
  int trafficClass;
} ncclNetCommConfig_v11_t;

typedef struct {
  int trafficClass;
} ncclNetCommConfig_v12_t;

/* Traffic-shape hints NCCL gives through setNetAttr (v11+).  Unset values
 * are NCCL_NET_ATTR_UNDEF. */
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;    /* bit mask over NCCL's ncclFunc_t values */
  uint32_t algo;  /* bit mask over NCCL algorithms */
  uint32_t proto; /* bit mask over NCCL protocols */
} ncclNetAttr_v11_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v12_t;

typedef struct {
  ncclNetCommAttr_v12_t sendCommAttr;
  ncclNetCommAttr_v12_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v12_t;

/* ======================================================================== */
/* Device properties, one struct per version                                */
/* ======================================================================== */
/* Field meanings (details in README.md):
 *   name        NIC name (logs, topology XML).
 *   pciPath     sysfs PCI directory of the NIC (NULL for virtual NICs); drives topology.
 *   guid        NICs reporting equal guids are treated as one fabric port.
 *   ptrSupport  NCCL_PTR_* mask the NIC can register.
 *   regIsGlobal 1 = registration is per NIC, not per comm (v8+).
 *   forceFlush  1 = always iflush GPU receives (v9+).
 *   speed       port speed in Mbps (10^6 bit/s); <= 0 is treated as 10 Gb/s.
 *   port        physical port number.
 *   latency     extra network latency in microseconds added to NCCL's tuner.
 *   maxComms    max comms per device (becomes NCCL's channel cap for it).
 *   maxRecvs    max buffers in one grouped irecv (n argument).
 *   netDeviceType / netDeviceVersion  device-offload capability (v7+).
 *   vProps      fused physical devices (v9+).
 *   maxP2pBytes / maxCollBytes  largest single transfer (v9+), in (0, 1 TiB].
 *   maxMultiRequestSize  (v11+) requests per multi-request; 1 = none.
 *   railId / planeId     (v12) topology hints; NCCL_NET_ID_UNDEF if unknown.
 */

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
} ncclNetProperties_v6_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType; /* new in v7 */
  int netDeviceVersion;            /* new in v7 */
} ncclNetProperties_v7_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal; /* new in v8; shifts every later field */
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush; /* new in v9 */
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps; /* new in v9 */
  size_t maxP2pBytes;              /* new in v9 */
  size_t maxCollBytes;             /* new in v9 */
} ncclNetProperties_v9_t;

/* Same layout as v9. */
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v10_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize; /* new in v11 */
} ncclNetProperties_v11_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps; /* devs[] grew from 4 to 8 in v12 */
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;  /* new in v12 */
  int16_t planeId; /* new in v12 */
} ncclNetProperties_v12_t;

/* ======================================================================== */
/* Function tables, one struct per version                                  */
/* ======================================================================== */
/* Common conventions (all versions):
 *   - connect/accept must not block: return ncclSuccess with *sendComm /
 *     *recvComm == NULL while the handshake is pending; NCCL calls again.
 *   - listen must not block and must return a non-NULL listenComm.
 *   - isend/irecv may return *request == NULL meaning "cannot post now,
 *     try again"; a non-NULL request is polled with test() until done.
 *   - test(): `sizes` may be NULL; for a grouped irecv of n buffers it
 *     receives n byte counts.  Always int, in every version.
 *   - iflush(): `sizes` is int* in every version (the sizes test() returned);
 *     it returns a request that is polled with test().
 *   - regMrDmaBuf may be NULL unless ptrSupport has NCCL_PTR_DMABUF.
 *   - getDeviceMr / irecvConsumed / makeVDevice / setNetAttr may be NULL.
 */

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclNet_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* v7: trailing device-offload handle (see ncclNetDeviceHandle_v7_t). */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v7_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* v7: device-offload helpers. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v7_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  /* v8: regMr size became size_t. */
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* v9: send size and receive sizes became size_t (test/iflush stay int). */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  /* v9: NIC fusion.  Creates a device from props->devs, returns its index in *d. */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

typedef struct {
  const char* name;
  /* v10: profiler callback added. */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* v10: per-communicator config inserted as the 2nd argument. */
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* v10: profiler handle(s) inserted just before `request`. */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

typedef struct {
  const char* name;
  /* v11: called once per communicator; returns a per-comm context in *ctx.
   * The config moved here from connect(). */
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logFunction,
                       ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  /* v11: listen/connect take the context returned by init. */
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  /* v11: per-communicator teardown (mandatory: NCCL calls it unconditionally). */
  ncclResult_t (*finalize)(void* ctx);
  /* v11: traffic hints for the communicator (optional). */
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

/* Same signatures as v11; only the referenced struct versions differ. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logFunction,
                       ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

/* ======================================================================== */
/* "Current" aliases: what NCCL 2.30 uses internally                        */
/* ======================================================================== */

typedef ncclNet_v12_t ncclNet_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;
typedef ncclNetCommAttr_v12_t ncclNetCommAttr_t;
typedef ncclNetDeviceHandle_v12_t ncclNetDeviceHandle_t;

#define NCCL_HA_NET_PLUGIN_SYMBOL_LATEST NCCL_HA_NET_PLUGIN_SYMBOL_V12

#ifdef __cplusplus
} /* extern "C" */
#endif

#include "nccl_net_abi_checks.h"
