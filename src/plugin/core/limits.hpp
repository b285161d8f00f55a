// The protocol's limits: how many buffers one irecv groups, how many requests a comm has in
// flight. The wire records (rdma_records.hpp) and the comm's request arrays are sized by them.
#pragma once

namespace nccl_ha::plugin {

constexpr int kMaxRecvs = 8;     // grouped receives per irecv
constexpr int kMaxRequests = 32; // requests in flight per comm (receiver side; sender x kMaxRecvs)

}  // namespace nccl_ha::plugin
