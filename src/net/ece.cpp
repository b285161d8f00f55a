#include "nccl_ha/net/ece.hpp"

#include <cerrno>
#include <string>

namespace nccl_ha::net {
namespace {

using QueryEceFn = int (*)(ibv_qp*, ibv_ece*);
using SetEceFn = int (*)(ibv_qp*, ibv_ece*);

// Resolved at run time (loaded_verbs_symbol), as net_ib does: a library before rdma-core 31 has
// neither, and ECE is then unsupported.
struct EceFns {
  QueryEceFn query = reinterpret_cast<QueryEceFn>(loaded_verbs_symbol("ibv_query_ece", "IBVERBS_1.10"));
  SetEceFn set = reinterpret_cast<SetEceFn>(loaded_verbs_symbol("ibv_set_ece", "IBVERBS_1.10"));
};

const EceFns& fns() {
  static const EceFns f;
  return f;
}

bool unsupported(int rc) { return rc == EOPNOTSUPP || rc == ENOTSUP; }

}  // namespace

Expected<Ece> query_ece(ibv_qp* qp) {
  if (!fns().query) return Ece{};
  ibv_ece raw{};
  if (const int rc = fns().query(qp, &raw); rc != 0) {
    if (unsupported(rc)) return Ece{};
    return errno_error(Errc::verbs, "ibv_query_ece(QP " + std::to_string(qp->qp_num) + ")", rc);
  }
  return Ece{true, raw.vendor_id, raw.options, raw.comp_mask};
}

Expected<bool> set_ece(ibv_qp* qp, const Ece& ece) {
  if (!fns().set) return false;
  ibv_ece raw{};
  raw.vendor_id = ece.vendor_id;
  raw.options = ece.options;
  raw.comp_mask = ece.comp_mask;
  if (const int rc = fns().set(qp, &raw); rc != 0) {
    if (unsupported(rc)) return false;
    return errno_error(Errc::verbs, "ibv_set_ece(QP " + std::to_string(qp->qp_num) + ")", rc);
  }
  return true;
}

}  // namespace nccl_ha::net
