// A connection on a fused device (NCCL's makeVDevice, issue #33): one connection per member port,
// each a whole comm of its own - its paths, its standby on another NIC, its failover, replay and
// re-protection - and every message split between them by the members' weights (their ports'
// speeds, or what the stripe-weights file says: Device::stripe_weight, read at every isend): part i of each message, the bytes [offsets[i], offsets[i+1]) (weighted_offsets,
// path_ops.hpp), goes over member i, written at the same offset of the receiver's buffer. The
// receiver posts every buffer on every member and learns a buffer's size as the sum of what its
// parts carried, so it never needs the sender's weights; a message is complete when every part is.
// A member whose port fails fails over on its own, exactly once, as any comm does: the message
// waits only for that member's replay.
//
// NCCL holds the fused comm as a CommHead (comm.hpp) whose `fused` is set, and each request as the
// `head` Request of a FusedRequest (ReqType::fused); isend / irecv / iflush / test / regMr / deregMr /
// close dispatch here (p2p.cpp, flush.cpp, reg.cpp). A call that a member answers with "not yet"
// (its clear-to-send entry has not come, the control plane holds it) answers "not yet" as a whole
// and goes on where it stopped when NCCL repeats it (NCCL repeats the same call until it has a
// request). No locks, no allocation on the data path: requests live in fixed arrays.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/comm.hpp"
#include "core/request.hpp"
#include "nccl_net_abi.h"
#include "runtime/vdevice.hpp"

namespace nccl_ha::plugin {

struct FusedRequest {
  Request head;  // what NCCL holds: head.type is ReqType::fused (first member: the two convert)
  std::array<void*, kMaxVDeviceMembers> parts{};  // each member's request
  std::uint8_t waiting = 0;                     // members whose part test() has not seen done (bit mask)
  std::array<std::size_t, kMaxRecvs> sizes{};   // bytes each buffer received over all parts (send: [0] sent)
  bool busy = false;                            // handed out (or being posted), not yet tested done
};

// What NCCL calls call to start a request while some members have posted their part: the call is
// repeated with the same arguments (checked) and goes on with the members after `posted`.
struct FusedPending {
  FusedRequest* req = nullptr;
  std::uint8_t posted = 0;     // members whose part is posted (bit mask)
  const void* data = nullptr;  // the call's first buffer, size and tag: the same call again
  std::size_t size = 0;
  int tag = 0;
};

// A registration on a fused comm: one per member (each on the member's devices).
struct FusedReg {
  std::array<void*, kMaxVDeviceMembers> members{};
};

struct FusedComm : CommHead {
  explicit FusedComm(CommKind k) : kind(k) { fused = true; }
  CommKind kind;
  int count = 0;                                              // members, 2..kMaxVDeviceMembers
  std::array<std::shared_ptr<CommBase>, kMaxVDeviceMembers> members;  // each NCCL's reference until close
  // Each member's share: its home port's Device::stripe_weight (the file's watcher writes it).
  std::array<const std::atomic<std::uint32_t>*, kMaxVDeviceMembers> weights{};
  std::array<FusedRequest, kMaxRequests * kMaxRecvs> reqs{};  // sends, or receives and flushes
  FusedPending pending;
  std::array<std::uint64_t, kMaxVDeviceMembers + 1> offsets{};  // the parts of the send being posted
  std::string id;  // "fused send comm 0x... (rxe0+rxe1)" for log lines
};

// The fused comm over `members` (connected comms of one kind, in member order, each already handed
// to its control plane), weighted by their home ports' stripe weights. Logged.
std::unique_ptr<FusedComm> make_fused(CommKind kind, std::span<const std::shared_ptr<CommBase>> members);

ncclResult_t fused_isend(FusedComm& f, void* data, std::size_t size, int tag, void* mhandle, void* phandle,
                         void** request);
ncclResult_t fused_irecv(FusedComm& f, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                         void** phandles, void** request);
ncclResult_t fused_iflush(FusedComm& f, int n, void** data, const int* sizes, void** mhandles, void** request);
ncclResult_t fused_test(Request& head, int* done, int* sizes);
// regMr / regMrDmaBuf (fd -1: ordinary memory) on every member; all or nothing.
ncclResult_t fused_reg_mr(FusedComm& f, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                          void** mhandle);
ncclResult_t fused_dereg_mr(FusedComm& f, void* mhandle);
// Closes every member, then the fused comm itself (NCCL's pointer is gone).
ncclResult_t fused_close(FusedComm& f);

}  // namespace nccl_ha::plugin
