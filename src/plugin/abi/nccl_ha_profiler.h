/* nccl-ha's events for NCCL's profiler (net plugin API v10+): what a profiler plugin reads from an
 * event of type ncclProfileNetPlugin whose netPlugin.id is NCCL_PROFILER_NET_TYPE_HA | version.
 *
 * NCCL lets a net plugin open events only under the profiler handle it gave with an isend/irecv
 * (the proxy step), while that request is in flight. So nccl-ha reports HA where it touches the
 * requests NCCL is waiting for:
 *   - a switch (failover, failback, re-synchronisation, failover onto a path the rescue service
 *     built) opens one event under every buffer in flight when it begins; the event ends when
 *     test() reports that request done (the delay NCCL saw), or when the comm fails (then it is
 *     updated with ncclHaProfileFatal first) or is closed. A further switch while it is open
 *     updates it (its descriptor as data);
 *   - protection restored (the comm's standby is up again) is an instant event (start and stop)
 *     under the next request posted on the comm.
 * Written for nccl-ha from NCCL's profiler ABI (pluginId = type << 16 | version,
 * NCCL_PROFILER_NET_VER_BITS 16); the type value is nccl-ha's own. */
#ifndef NCCL_HA_PROFILER_H_
#define NCCL_HA_PROFILER_H_

#include <stdint.h>

#define NCCL_PROFILER_NET_TYPE_HA (0x4841U << 16) /* "HA" */
#define NCCL_PROFILER_NET_HA_VER 1U
#define NCCL_PROFILER_NET_HA_ID ((int64_t)(NCCL_PROFILER_NET_TYPE_HA | NCCL_PROFILER_NET_HA_VER))

typedef enum {
  ncclHaProfileFailover = 1 << 0,  /* the active path failed: the standby takes over, undelivered work is replayed */
  ncclHaProfileFailback = 1 << 1,  /* a planned move back to the connection's home pair */
  ncclHaProfileResync = 1 << 2,    /* re-synchronised in place: the peer returned to the path we are on */
  ncclHaProfileRescue = 1 << 3,    /* failover onto a path the rescue service built (both paths had been lost) */
  ncclHaProfileReprotect = 1 << 4, /* instant: the connection's standby is up again */
  ncclHaProfileFatal = 1 << 5      /* update only: no path left, the connection failed */
} ncclHaProfileEventType_t;

typedef struct {
  uint8_t type;   /* ncclHaProfileEventType_t */
  int fromDev;    /* NCCL device index of the path left (-1: none) */
  int toDev;      /* of the path taken, or of the standby that is up again (-1: none) */
  uint32_t epoch; /* the connection's switches so far, this one included (both sides count alike) */
} ncclProfilerNetHaDescr_v1_t;

#endif /* NCCL_HA_PROFILER_H_ */
