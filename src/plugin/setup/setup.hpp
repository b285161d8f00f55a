// Connection setup's calls, as NCCL makes them (through api.cpp): listen, accept and closeListen
// (listen.cpp), connect (connect.cpp). Each does local work and returns; the handshakes run on
// the progress thread (handshake_common.hpp).
#pragma once

#include "core/comm_params.hpp"
#include "nccl_net_abi.h"

namespace nccl_ha::plugin {

ncclResult_t listen(const CommParams& params, int dev, void* handle, void** listen_comm);
ncclResult_t connect(const CommParams& params, int dev, void* handle, void** send_comm);
ncclResult_t accept(void* listen_comm, void** recv_comm);
ncclResult_t close_listen(void* listen_comm);
// Finalize, before the devices close: the comms of connections whose connect() was never called
// again (and of handshakes still running, when they end) go to the reaper, none outlives the state.
void drop_connect_ops();

}  // namespace nccl_ha::plugin
