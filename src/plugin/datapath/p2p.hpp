// The data path's calls, as NCCL makes them (through api.cpp): memory registration (reg.cpp),
// isend / irecv / test and the closes (p2p.cpp), iflush (flush.cpp). On NCCL's proxy thread:
// isend / irecv / test / iflush never wait for another thread and never allocate (path_ops.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/limits.hpp"
#include "nccl_net_abi.h"

namespace nccl_ha::plugin {

ncclResult_t reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle);
ncclResult_t reg_mr_dmabuf(void* comm, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                           void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);

// `phandle` / `phandles`: NCCL's profiler handles (net v10+), or null (profiler.hpp).
ncclResult_t isend(void* send_comm, void* data, std::size_t size, int tag, void* mhandle, void* phandle, void** request);
ncclResult_t irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                   void** phandles, void** request);
ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* send_comm);
ncclResult_t close_recv(void* recv_comm);

struct CommBase;
struct Request;
// A comm NCCL never closed, at the last finalize (init.cpp): closed as closeSend / closeRecv would
// (NCCL's reference dropped too). The reactor is stopped by then.
void close_at_finalize(CommBase& c);


// ---- within the data path
// test(): poll the active path; an error goes to the control plane. Returns the comm's sticky
// error (poll.cpp).
ncclResult_t data_poll(CommBase& c);
// test() of an iflush request (flush.cpp).
ncclResult_t test_flush(Request& r, int* done);

}  // namespace nccl_ha::plugin
