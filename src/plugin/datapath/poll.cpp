// Polling a comm's path: its completions handed out as they come (on_success, p2p.cpp), an error
// completion kept for the caller. The data path (test) polls the active path and hands what goes
// wrong to the control plane (request_failover); the control plane polls what the data path
// leaves alone (poll_and_arm, control_step.cpp).
#include <algorithm>

#include "core/path_ops.hpp"
#include "datapath/p2p.hpp"
#include "ha/face.hpp"

namespace nccl_ha::plugin {

int poll_path(CommBase& c, Path& p, int max, ibv_wc* error) {
  ibv_wc wcs[64];
  const int n = ibv_poll_cq(p.cq.get(), std::min(max, 64), wcs);
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wr_kind(wc.wr_id) == WrKind::recv) {
      --p.recvs_out;
      --p.qp_recvs_out[wr_value(wc.wr_id) % net::kMaxEndpointQps];  // its QP's index (post_recvs)
    } else if (--p.sends_out == 0)
      p.rto_allowance_ns = 0;
    if (wc.status == IBV_WC_SUCCESS)
      on_success(c, p, wc);
    else if (error->status == IBV_WC_SUCCESS)
      *error = wc;
  }
  if (n > 0) p.completions += static_cast<std::uint64_t>(n);
  return n;
}

int poll_and_arm(CommBase& c, Path& p, int max, ibv_wc* error) {
  int n = 0;
  for (int round = 0; round < 4; ++round) {  // bounded: a busy path is the data path's to poll
    const int k = poll_path(c, p, max, error);
    if (k < 0) return k;
    n += k;
    if (k < max) break;
  }
  if (ibv_req_notify_cq(p.cq.get(), 0) == 0) {
    const int k = poll_path(c, p, max, error);
    if (k > 0) n += k;
  }
  return n;
}

void request_failover(CommBase& c, std::string cause) {
  if (c.cp.hand_over(std::move(cause))) wake(c);
}

ncclResult_t data_poll(CommBase& c) {
  if (!can_post(c)) return c.error;  // a failover is the control plane's
  ++c.polls;
  Path& p = c.path();
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  const int n = poll_path(c, p, c.max_poll, &err);
  if (n < 0)
    request_failover(c, "ibv_poll_cq failed on " + p.dev->port.id());
  else if (err.status != IBV_WC_SUCCESS)
    request_failover(c, describe_error(p, err));
  return c.error;
}

}  // namespace nccl_ha::plugin
