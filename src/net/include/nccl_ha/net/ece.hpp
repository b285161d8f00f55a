// Enhanced Connection Establishment (ECE): a vendor's options two RC QPs agree on before they
// connect (rdma-core's ibv_query_ece / ibv_set_ece, IBVERBS_1.10; mlx5 implements it). The
// exchange is net_ib's: the side that sends its endpoint first (the requester) offers the ECE its
// QP reports; the other side (the responder) sets that on its QP before RTR, and after connecting
// returns what its device reduced it to; the requester sets that reduced ECE before its own RTR
// (qp.hpp connect_rc_qp does both halves). A library or provider without ECE (Soft-RoCE answers
// EOPNOTSUPP) makes it "not supported", never an error, and a connection then goes without it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "nccl_ha/net/verbs.hpp"

namespace nccl_ha::net {

struct Ece {
  bool supported = false;       // false: the fields below are 0 and nothing is set
  std::uint32_t vendor_id = 0;  // ibv_ece's fields
  std::uint32_t options = 0;
  std::uint32_t comp_mask = 0;
};

// The ECE `qp` reports now: what its device offers before a set, the reduced one after a set and
// RTR. {supported = false} when libibverbs has no ibv_query_ece or the provider answers
// EOPNOTSUPP / ENOTSUP; any other failure is an error.
Expected<Ece> query_ece(ibv_qp* qp);

// Sets `ece` on `qp` (in INIT, before RTR). false when unsupported (as above); other failures are
// errors.
Expected<bool> set_ece(ibv_qp* qp, const Ece& ece);

}  // namespace nccl_ha::net
