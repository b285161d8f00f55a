#include "nccl_ha/net/qp.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::net {

QpTimeouts QpTimeouts::from_env() { return from_lookup(process_env()); }

QpTimeouts QpTimeouts::from_lookup(const EnvLookup& env) {
  QpTimeouts t;
  t.timeout = static_cast<std::uint8_t>(env_int(env, {"HA_NCCL_QP_TIMEOUT", "NCCL_IB_TIMEOUT"}, t.timeout, 1, 31));
  t.retry_cnt = static_cast<std::uint8_t>(env_int(env, {"HA_NCCL_QP_RETRY_CNT", "NCCL_IB_RETRY_CNT"}, t.retry_cnt, 0, 7));
  t.pkey_index = static_cast<std::uint16_t>(env_int(env, {"HA_NCCL_IB_PKEY", "NCCL_IB_PKEY"}, t.pkey_index, 0, 65535));
  return t;
}

Expected<QpPtr> create_rc_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, const QpCaps& caps) {
  ibv_qp_init_attr attr{};
  attr.send_cq = send_cq;
  attr.recv_cq = recv_cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = caps.max_send_wr;
  attr.cap.max_recv_wr = caps.max_recv_wr;
  attr.cap.max_send_sge = caps.max_send_sge;
  attr.cap.max_recv_sge = caps.max_recv_sge;
  attr.cap.max_inline_data = caps.max_inline;
  QpPtr qp(ibv_create_qp(pd, &attr));
  if (!qp) return errno_error(Errc::verbs, "ibv_create_qp(RC)", errno);
  return qp;
}

std::uint32_t random_psn() {
  std::uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = 0x5eed;
  return v & 0xffffffu;
}

Endpoint local_endpoint(const ibv_qp* qp, const PortInfo& port, std::uint32_t psn) {
  Endpoint ep;
  ep.qpn = qp->qp_num;
  ep.psn = psn & 0xffffffu;
  ep.gid = port.gid;
  ep.lid = port.lid;
  ep.port = static_cast<std::uint8_t>(port.port);
  ep.gid_index = static_cast<std::uint8_t>(port.gid_index);
  ep.link_layer = static_cast<std::uint8_t>(port.link_layer);
  ep.mtu = static_cast<std::uint8_t>(port.active_mtu);
  return ep;
}

ibv_mtu negotiate_mtu(ibv_mtu local, ibv_mtu remote) noexcept { return std::min(local, remote); }

Status qp_to_init(ibv_qp* qp, std::uint8_t port, std::uint16_t pkey_index, int access) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = pkey_index;
  a.port_num = port;
  a.qp_access_flags = static_cast<unsigned>(access);
  if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return errno_error(Errc::verbs, "QP " + std::to_string(qp->qp_num) + " RESET->INIT", rc);
  return {};
}

Status qp_to_rtr(ibv_qp* qp, const Endpoint& local, const Endpoint& remote, const QpTimeouts& t) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = negotiate_mtu(static_cast<ibv_mtu>(local.mtu), static_cast<ibv_mtu>(remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = t.max_rd_atomic;
  a.min_rnr_timer = t.min_rnr_timer;
  a.ah_attr.port_num = local.port;
  a.ah_attr.sl = t.service_level;
  const bool global = local.link_layer == IBV_LINK_LAYER_ETHERNET || remote.link_layer == IBV_LINK_LAYER_ETHERNET ||
                      remote.lid == 0;
  if (global) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = remote.gid;
    a.ah_attr.grh.sgid_index = local.gid_index;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = t.traffic_class;
  } else {
    a.ah_attr.is_global = 0;
    a.ah_attr.dlid = remote.lid;
  }
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return errno_error(Errc::verbs, "QP " + std::to_string(qp->qp_num) + " INIT->RTR (remote QP " +
                                        std::to_string(remote.qpn) + ")", rc);
  return {};
}

Status qp_to_rts(ibv_qp* qp, std::uint32_t local_psn, const QpTimeouts& t) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = local_psn;
  a.timeout = t.timeout;
  a.retry_cnt = t.retry_cnt;
  a.rnr_retry = t.rnr_retry;
  a.max_rd_atomic = t.max_rd_atomic;
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    return errno_error(Errc::verbs, "QP " + std::to_string(qp->qp_num) + " RTR->RTS", rc);
  return {};
}

Status qp_to_error(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE))
    return errno_error(Errc::verbs, "QP " + std::to_string(qp->qp_num) + " ->ERROR", rc);
  return {};
}

Status connect_rc_qp(ibv_qp* qp, Endpoint& local, const Endpoint& remote, const QpTimeouts& t) {
  if (auto s = qp_to_init(qp, local.port, t.pkey_index); !s) return s;
  if (local.ece.supported && remote.ece.supported) {
    auto set = set_ece(qp, remote.ece);
    if (!set) return std::move(set).error();
    if (!*set) local.ece = Ece{};
  } else {
    local.ece = Ece{};
  }
  if (auto s = qp_to_rtr(qp, local, remote, t); !s) return s;
  if (auto s = qp_to_rts(qp, local.psn, t); !s) return s;
  if (local.ece.supported) {  // what the device made of it
    auto reduced = query_ece(qp);
    if (!reduced) return std::move(reduced).error();
    local.ece = *reduced;
  }
  return {};
}

}  // namespace nccl_ha::net
