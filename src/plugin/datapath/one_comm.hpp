// NCCL's data-path calls on one connection's comm (p2p.cpp, flush.cpp, reg.cpp): what the calls of
// p2p.hpp do once they know that NCCL's pointer names one comm and not a fused device's, and what
// a fused device's comm calls on each of its members (fused.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_net_abi.h"

namespace nccl_ha::plugin {

struct CommBase;
struct SendComm;
struct RecvComm;
struct Request;

// isend; the message lands at `remote_offset` in the receiver's buffer (a fused device's part).
ncclResult_t send_on(SendComm& c, void* data, std::size_t size, int tag, void* mhandle, void* phandle,
                     std::size_t remote_offset, void** request);
// irecv of 1..kMaxRecvs buffers (irecv checks n).
ncclResult_t recv_on(RecvComm& c, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                     void** phandles, void** request);
ncclResult_t flush_on(RecvComm& c, int n, void** data, const int* sizes, void** mhandles, void** request);
ncclResult_t test_one(Request& r, int* done, int* sizes);
// regMrDmaBuf; fd -1: regMr.
ncclResult_t reg_on(CommBase& c, void* data, std::size_t size, int type, std::uint64_t offset, int fd, void** mhandle);
ncclResult_t dereg_on(CommBase& c, void* mhandle);
// closeSend / closeRecv: NCCL's reference dropped, the paths retired.
ncclResult_t close_one(CommBase& c);

}  // namespace nccl_ha::plugin
