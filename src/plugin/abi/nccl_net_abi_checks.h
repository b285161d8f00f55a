// SPDX-License-Identifier: Apache-2.0
//
// nccl-ha: compile-time layout checks for nccl_net_abi.h.
//
// The expected numbers below were worked out by hand from the upstream field
// types and order for the LP64 ABI used by x86-64 Linux (pointers, size_t and
// uint64_t are 8 bytes and 8-aligned; int, float and enums are 4; int16_t is
// 2; every member is naturally aligned).  AArch64 Linux lays these structs out
// identically, so the checks run there as well.  If one of them fires, the
// declaration drifted from what NCCL reads -- fix the header, not the number.
//
// Included at the end of nccl_net_abi.h; not meant to be included directly.
#pragma once

#ifdef __cplusplus
#define NCCL_HA_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define NCCL_HA_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* ---- constants that are part of the contract on every platform ---------- */
NCCL_HA_ABI_ASSERT(NCCL_NET_HANDLE_MAXSIZE == 128, "connection handle buffer is 128 bytes");
NCCL_HA_ABI_ASSERT(NCCL_PTR_HOST == 1 && NCCL_PTR_CUDA == 2 && NCCL_PTR_DMABUF == 4, "NCCL_PTR_* bit values");
NCCL_HA_ABI_ASSERT(NCCL_NET_OPTIONAL_RECV_COMPLETION == 1, "optional-completion sentinel value");
NCCL_HA_ABI_ASSERT(ncclSuccess == 0 && ncclInternalError == 3 && ncclRemoteError == 6 && ncclInProgress == 7 &&
                     ncclTimeout == 8,
                   "ncclResult_t values");
NCCL_HA_ABI_ASSERT(NCCL_NET == 0x10 && NCCL_INIT == 0x1, "NCCL_NET / NCCL_INIT subsystem bits");
NCCL_HA_ABI_ASSERT(NCCL_LOG_WARN == 2 && NCCL_LOG_INFO == 3 && NCCL_LOG_TRACE == 5, "log level values");
NCCL_HA_ABI_ASSERT(NCCL_NET_DEVICE_HOST == 0 && NCCL_NET_DEVICE_UNPACK == 1, "ncclNetDeviceType values");

/* ---- layout checks (LP64) ------------------------------------------------ */
#if defined(__x86_64__) || defined(__aarch64__)

#define NCCL_HA_ABI_SIZE(T, n) NCCL_HA_ABI_ASSERT(sizeof(T) == (n), "sizeof(" #T ") != " #n)
#define NCCL_HA_ABI_ALIGN(T, n) NCCL_HA_ABI_ASSERT(_Alignof(T) == (n), "alignof(" #T ") != " #n)
#define NCCL_HA_ABI_OFF(T, m, n) NCCL_HA_ABI_ASSERT(offsetof(T, m) == (n), "offsetof(" #T ", " #m ") != " #n)

#ifdef __cplusplus
#undef NCCL_HA_ABI_ALIGN
#define NCCL_HA_ABI_ALIGN(T, n) NCCL_HA_ABI_ASSERT(alignof(T) == (n), "alignof(" #T ") != " #n)
#endif

/* Scalars the structs are built from. */
NCCL_HA_ABI_SIZE(ncclResult_t, 4);
NCCL_HA_ABI_SIZE(ncclDebugLogLevel, 4);
NCCL_HA_ABI_SIZE(ncclNetDeviceType, 4);
NCCL_HA_ABI_SIZE(void*, 8);
NCCL_HA_ABI_SIZE(size_t, 8);
NCCL_HA_ABI_SIZE(ncclDebugLogger_t, 8);
NCCL_HA_ABI_SIZE(ncclProfilerCallback_t, 8);

/* Device handle (v7 layout, aliased through v12): 4+4+8+8+4 -> pad to 32. */
NCCL_HA_ABI_SIZE(ncclNetDeviceHandle_v7_t, 32);
NCCL_HA_ABI_ALIGN(ncclNetDeviceHandle_v7_t, 8);
NCCL_HA_ABI_OFF(ncclNetDeviceHandle_v7_t, netDeviceType, 0);
NCCL_HA_ABI_OFF(ncclNetDeviceHandle_v7_t, netDeviceVersion, 4);
NCCL_HA_ABI_OFF(ncclNetDeviceHandle_v7_t, handle, 8);
NCCL_HA_ABI_OFF(ncclNetDeviceHandle_v7_t, size, 16);
NCCL_HA_ABI_OFF(ncclNetDeviceHandle_v7_t, needsProxyProgress, 24);
NCCL_HA_ABI_SIZE(ncclNetDeviceHandle_v12_t, 32);

/* vNIC descriptors: int + int[4] = 20 (v9-v11), int + int[8] = 36 (v12). */
NCCL_HA_ABI_SIZE(ncclNetVDeviceProps_v9_t, 20);
NCCL_HA_ABI_SIZE(ncclNetVDeviceProps_v10_t, 20);
NCCL_HA_ABI_SIZE(ncclNetVDeviceProps_v11_t, 20);
NCCL_HA_ABI_SIZE(ncclNetVDeviceProps_v12_t, 36);
NCCL_HA_ABI_ALIGN(ncclNetVDeviceProps_v12_t, 4);
NCCL_HA_ABI_OFF(ncclNetVDeviceProps_v9_t, devs, 4);
NCCL_HA_ABI_OFF(ncclNetVDeviceProps_v10_t, devs, 4);
NCCL_HA_ABI_OFF(ncclNetVDeviceProps_v11_t, devs, 4);
NCCL_HA_ABI_OFF(ncclNetVDeviceProps_v12_t, devs, 4);

/* Comm config: a single int. */
NCCL_HA_ABI_SIZE(ncclNetCommConfig_v10_t, 4);
NCCL_HA_ABI_SIZE(ncclNetCommConfig_v11_t, 4);
NCCL_HA_ABI_SIZE(ncclNetCommConfig_v12_t, 4);
NCCL_HA_ABI_OFF(ncclNetCommConfig_v12_t, trafficClass, 0);

/* Net attributes: 2 x 16-byte comm attr + 3 x uint32 = 44. */
NCCL_HA_ABI_SIZE(ncclNetCommAttr_v11_t, 16);
NCCL_HA_ABI_SIZE(ncclNetCommAttr_v12_t, 16);
NCCL_HA_ABI_OFF(ncclNetCommAttr_v12_t, maxConcurrentPeers, 0);
NCCL_HA_ABI_OFF(ncclNetCommAttr_v12_t, minConcurrentPeers, 4);
NCCL_HA_ABI_OFF(ncclNetCommAttr_v12_t, maxFlowsPerPeer, 8);
NCCL_HA_ABI_OFF(ncclNetCommAttr_v12_t, minFlowsPerPeer, 12);
NCCL_HA_ABI_SIZE(ncclNetAttr_v11_t, 44);
NCCL_HA_ABI_SIZE(ncclNetAttr_v12_t, 44);
NCCL_HA_ABI_ALIGN(ncclNetAttr_v12_t, 4);
NCCL_HA_ABI_OFF(ncclNetAttr_v11_t, sendCommAttr, 0);
NCCL_HA_ABI_OFF(ncclNetAttr_v11_t, recvCommAttr, 16);
NCCL_HA_ABI_OFF(ncclNetAttr_v11_t, op, 32);
NCCL_HA_ABI_OFF(ncclNetAttr_v11_t, algo, 36);
NCCL_HA_ABI_OFF(ncclNetAttr_v11_t, proto, 40);
NCCL_HA_ABI_OFF(ncclNetAttr_v12_t, sendCommAttr, 0);
NCCL_HA_ABI_OFF(ncclNetAttr_v12_t, recvCommAttr, 16);
NCCL_HA_ABI_OFF(ncclNetAttr_v12_t, op, 32);
NCCL_HA_ABI_OFF(ncclNetAttr_v12_t, algo, 36);
NCCL_HA_ABI_OFF(ncclNetAttr_v12_t, proto, 40);

/* ---- properties ----------------------------------------------------------- */

/* v6: 8+8+8 + 6x4 = 48. */
NCCL_HA_ABI_SIZE(ncclNetProperties_v6_t, 48);
NCCL_HA_ABI_ALIGN(ncclNetProperties_v6_t, 8);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, name, 0);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, pciPath, 8);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, guid, 16);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, ptrSupport, 24);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, speed, 28);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, port, 32);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, latency, 36);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, maxComms, 40);
NCCL_HA_ABI_OFF(ncclNetProperties_v6_t, maxRecvs, 44);

/* v7: v6 + two 4-byte fields = 56. */
NCCL_HA_ABI_SIZE(ncclNetProperties_v7_t, 56);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, name, 0);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, pciPath, 8);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, guid, 16);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, ptrSupport, 24);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, speed, 28);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, port, 32);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, latency, 36);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, maxComms, 40);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, maxRecvs, 44);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, netDeviceType, 48);
NCCL_HA_ABI_OFF(ncclNetProperties_v7_t, netDeviceVersion, 52);

/* v8: regIsGlobal after ptrSupport; 60 bytes of data padded to 64. */
NCCL_HA_ABI_SIZE(ncclNetProperties_v8_t, 64);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, name, 0);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, pciPath, 8);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, guid, 16);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, ptrSupport, 24);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, regIsGlobal, 28);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, speed, 32);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, port, 36);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, latency, 40);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, maxComms, 44);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, maxRecvs, 48);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, netDeviceType, 52);
NCCL_HA_ABI_OFF(ncclNetProperties_v8_t, netDeviceVersion, 56);

/* v9/v10: forceFlush, vProps (20 bytes at 64), then two size_t at 88/96 = 104. */
#define NCCL_HA_ABI_PROPS_V9_LAYOUT(T)                                                                                 \
  NCCL_HA_ABI_SIZE(T, 104);                                                                                           \
  NCCL_HA_ABI_ALIGN(T, 8);                                                                                            \
  NCCL_HA_ABI_OFF(T, name, 0);                                                                                        \
  NCCL_HA_ABI_OFF(T, pciPath, 8);                                                                                     \
  NCCL_HA_ABI_OFF(T, guid, 16);                                                                                       \
  NCCL_HA_ABI_OFF(T, ptrSupport, 24);                                                                                 \
  NCCL_HA_ABI_OFF(T, regIsGlobal, 28);                                                                                \
  NCCL_HA_ABI_OFF(T, forceFlush, 32);                                                                                 \
  NCCL_HA_ABI_OFF(T, speed, 36);                                                                                      \
  NCCL_HA_ABI_OFF(T, port, 40);                                                                                       \
  NCCL_HA_ABI_OFF(T, latency, 44);                                                                                    \
  NCCL_HA_ABI_OFF(T, maxComms, 48);                                                                                   \
  NCCL_HA_ABI_OFF(T, maxRecvs, 52);                                                                                   \
  NCCL_HA_ABI_OFF(T, netDeviceType, 56);                                                                              \
  NCCL_HA_ABI_OFF(T, netDeviceVersion, 60);                                                                           \
  NCCL_HA_ABI_OFF(T, vProps, 64);                                                                                     \
  NCCL_HA_ABI_OFF(T, maxP2pBytes, 88);                                                                                \
  NCCL_HA_ABI_OFF(T, maxCollBytes, 96)
NCCL_HA_ABI_PROPS_V9_LAYOUT(ncclNetProperties_v9_t);
NCCL_HA_ABI_PROPS_V9_LAYOUT(ncclNetProperties_v10_t);
#undef NCCL_HA_ABI_PROPS_V9_LAYOUT

/* v11: v10 + maxMultiRequestSize at 104; 108 padded to 112. */
NCCL_HA_ABI_SIZE(ncclNetProperties_v11_t, 112);
NCCL_HA_ABI_OFF(ncclNetProperties_v11_t, forceFlush, 32);
NCCL_HA_ABI_OFF(ncclNetProperties_v11_t, netDeviceVersion, 60);
NCCL_HA_ABI_OFF(ncclNetProperties_v11_t, vProps, 64);
NCCL_HA_ABI_OFF(ncclNetProperties_v11_t, maxP2pBytes, 88);
NCCL_HA_ABI_OFF(ncclNetProperties_v11_t, maxCollBytes, 96);
NCCL_HA_ABI_OFF(ncclNetProperties_v11_t, maxMultiRequestSize, 104);

/* v12: vProps grows to 36 bytes (64..100), so maxP2pBytes moves to 104;
 * railId/planeId fill what used to be tail padding: exactly 128. */
NCCL_HA_ABI_SIZE(ncclNetProperties_v12_t, 128);
NCCL_HA_ABI_ALIGN(ncclNetProperties_v12_t, 8);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, name, 0);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, pciPath, 8);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, guid, 16);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, ptrSupport, 24);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, regIsGlobal, 28);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, forceFlush, 32);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, speed, 36);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, port, 40);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, latency, 44);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, maxComms, 48);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, maxRecvs, 52);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, netDeviceType, 56);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, netDeviceVersion, 60);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, vProps, 64);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, maxP2pBytes, 104);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, maxCollBytes, 112);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, railId, 124);
NCCL_HA_ABI_OFF(ncclNetProperties_v12_t, planeId, 126);

/* ---- function tables: one 8-byte slot per member ------------------------- */

/* The first 17 slots are in the same order in every version. */
#define NCCL_HA_ABI_NET_COMMON_SLOTS(T)                                                                                \
  NCCL_HA_ABI_ALIGN(T, 8);                                                                                            \
  NCCL_HA_ABI_OFF(T, name, 0);                                                                                        \
  NCCL_HA_ABI_OFF(T, init, 8);                                                                                        \
  NCCL_HA_ABI_OFF(T, devices, 16);                                                                                    \
  NCCL_HA_ABI_OFF(T, getProperties, 24);                                                                              \
  NCCL_HA_ABI_OFF(T, listen, 32);                                                                                     \
  NCCL_HA_ABI_OFF(T, connect, 40);                                                                                    \
  NCCL_HA_ABI_OFF(T, accept, 48);                                                                                     \
  NCCL_HA_ABI_OFF(T, regMr, 56);                                                                                      \
  NCCL_HA_ABI_OFF(T, regMrDmaBuf, 64);                                                                                \
  NCCL_HA_ABI_OFF(T, deregMr, 72);                                                                                    \
  NCCL_HA_ABI_OFF(T, isend, 80);                                                                                      \
  NCCL_HA_ABI_OFF(T, irecv, 88);                                                                                      \
  NCCL_HA_ABI_OFF(T, iflush, 96);                                                                                     \
  NCCL_HA_ABI_OFF(T, test, 104);                                                                                      \
  NCCL_HA_ABI_OFF(T, closeSend, 112);                                                                                 \
  NCCL_HA_ABI_OFF(T, closeRecv, 120);                                                                                 \
  NCCL_HA_ABI_OFF(T, closeListen, 128)

#define NCCL_HA_ABI_NET_DEVICE_SLOTS(T)                                                                                \
  NCCL_HA_ABI_OFF(T, getDeviceMr, 136);                                                                               \
  NCCL_HA_ABI_OFF(T, irecvConsumed, 144)

/* v6: 17 slots. */
NCCL_HA_ABI_NET_COMMON_SLOTS(ncclNet_v6_t);
NCCL_HA_ABI_SIZE(ncclNet_v6_t, 136);

/* v7, v8: + getDeviceMr, irecvConsumed = 19 slots. */
NCCL_HA_ABI_NET_COMMON_SLOTS(ncclNet_v7_t);
NCCL_HA_ABI_NET_DEVICE_SLOTS(ncclNet_v7_t);
NCCL_HA_ABI_SIZE(ncclNet_v7_t, 152);
NCCL_HA_ABI_NET_COMMON_SLOTS(ncclNet_v8_t);
NCCL_HA_ABI_NET_DEVICE_SLOTS(ncclNet_v8_t);
NCCL_HA_ABI_SIZE(ncclNet_v8_t, 152);

/* v9, v10: + makeVDevice = 20 slots. */
NCCL_HA_ABI_NET_COMMON_SLOTS(ncclNet_v9_t);
NCCL_HA_ABI_NET_DEVICE_SLOTS(ncclNet_v9_t);
NCCL_HA_ABI_OFF(ncclNet_v9_t, makeVDevice, 152);
NCCL_HA_ABI_SIZE(ncclNet_v9_t, 160);
NCCL_HA_ABI_NET_COMMON_SLOTS(ncclNet_v10_t);
NCCL_HA_ABI_NET_DEVICE_SLOTS(ncclNet_v10_t);
NCCL_HA_ABI_OFF(ncclNet_v10_t, makeVDevice, 152);
NCCL_HA_ABI_SIZE(ncclNet_v10_t, 160);

/* v11, v12: + finalize, setNetAttr = 22 slots. */
NCCL_HA_ABI_NET_COMMON_SLOTS(ncclNet_v11_t);
NCCL_HA_ABI_NET_DEVICE_SLOTS(ncclNet_v11_t);
NCCL_HA_ABI_OFF(ncclNet_v11_t, makeVDevice, 152);
NCCL_HA_ABI_OFF(ncclNet_v11_t, finalize, 160);
NCCL_HA_ABI_OFF(ncclNet_v11_t, setNetAttr, 168);
NCCL_HA_ABI_SIZE(ncclNet_v11_t, 176);
NCCL_HA_ABI_NET_COMMON_SLOTS(ncclNet_v12_t);
NCCL_HA_ABI_NET_DEVICE_SLOTS(ncclNet_v12_t);
NCCL_HA_ABI_OFF(ncclNet_v12_t, makeVDevice, 152);
NCCL_HA_ABI_OFF(ncclNet_v12_t, finalize, 160);
NCCL_HA_ABI_OFF(ncclNet_v12_t, setNetAttr, 168);
NCCL_HA_ABI_SIZE(ncclNet_v12_t, 176);

#undef NCCL_HA_ABI_NET_COMMON_SLOTS
#undef NCCL_HA_ABI_NET_DEVICE_SLOTS
#undef NCCL_HA_ABI_SIZE
#undef NCCL_HA_ABI_ALIGN
#undef NCCL_HA_ABI_OFF

#endif /* LP64 layout checks */

#undef NCCL_HA_ABI_ASSERT
