// Reliable-connected queue pairs and their state machine RESET -> INIT -> RTR -> RTS.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>

#include "nccl_ha/net/discovery.hpp"
#include "nccl_ha/net/ece.hpp"
#include "nccl_ha/net/env.hpp"
#include "nccl_ha/net/verbs.hpp"

namespace nccl_ha::net {

constexpr int kMaxEndpointQps = 8;  // QPs one endpoint can name (a path's QPs: NCCL_IB_QPS_PER_CONNECTION)

// What one side tells the other to connect an RC QP (sent in the handshake).
struct Endpoint {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;       // first packet sequence number this side sends
  ibv_gid gid{};
  std::uint16_t lid = 0;
  std::uint8_t port = 1;
  std::uint8_t gid_index = 0;
  std::uint8_t link_layer = IBV_LINK_LAYER_UNSPECIFIED;
  std::uint8_t mtu = IBV_MTU_1024;  // the sender's active MTU (ibv_mtu)
  // The requester's offer, or the responder's reduced ECE (ece.hpp); not supported by default: a
  // QP offers ECE only when its owner queried it (query_ece).
  Ece ece{};
  // A connection of several QPs on the same port (NCCL_IB_QPS_PER_CONNECTION): `qpns` of them,
  // `qpn` the first, `more_qpn` the others in order; all start at `psn`, one ECE for all. QP i
  // connects to the peer's QP i. `split`: this side asks for each message to be split across them
  // (NCCL_IB_SPLIT_DATA_ON_QPS).
  std::uint8_t qpns = 1;  // 1..kMaxEndpointQps
  bool split = false;
  std::array<std::uint32_t, kMaxEndpointQps - 1> more_qpn{};

  std::uint32_t qpn_at(int i) const { return i == 0 ? qpn : more_qpn[static_cast<std::size_t>(i - 1)]; }
  // The endpoint of its QP i alone (what connect_rc_qp connects to).
  Endpoint single(int i) const {
    Endpoint e = *this;
    e.qpn = qpn_at(i);
    e.qpns = 1;
    e.split = false;
    e.more_qpn = {};
    return e;
  }
};

struct QpTimeouts {
  std::uint8_t timeout = 14;     // 4.096 us * 2^timeout per retry (HA_NCCL_QP_TIMEOUT, else NCCL_IB_TIMEOUT)
  std::uint8_t retry_cnt = 7;    // HA_NCCL_QP_RETRY_CNT, else NCCL_IB_RETRY_CNT
  std::uint8_t rnr_retry = 7;    // 7 = retry forever on RNR
  std::uint8_t min_rnr_timer = 12;
  std::uint8_t max_rd_atomic = 1;
  std::uint8_t service_level = 0;
  std::uint8_t traffic_class = 0;
  std::uint16_t pkey_index = 0;  // the port's P_Key table index (HA_NCCL_IB_PKEY, else NCCL_IB_PKEY)

  // Defaults, overridden by HA_NCCL_QP_TIMEOUT, else NCCL_IB_TIMEOUT (1..31), and by
  // HA_NCCL_QP_RETRY_CNT, else NCCL_IB_RETRY_CNT (0..7). The default timeout is shorter than
  // net_ib's 20 (67 ms per try instead of 4.3 s): the hardware reports a dead path within 0.54 s.
  // NCCL_IB_TIMEOUT, when an operator sets it, means what it means to net_ib. The P_Key index
  // from HA_NCCL_IB_PKEY, else NCCL_IB_PKEY (0..65535, default 0; net_ib's meaning: an index
  // into the port's P_Key table, not a P_Key).
  static QpTimeouts from_env();
  static QpTimeouts from_lookup(const EnvLookup& env);
};

struct QpCaps {
  std::uint32_t max_send_wr = 64;
  std::uint32_t max_recv_wr = 64;
  std::uint32_t max_send_sge = 1;
  std::uint32_t max_recv_sge = 1;
  std::uint32_t max_inline = 0;
};

constexpr int kDefaultQpAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

Expected<QpPtr> create_rc_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, const QpCaps& caps);

// A random 24-bit PSN.
std::uint32_t random_psn();

// This side's endpoint description for `qp` on `port`.
Endpoint local_endpoint(const ibv_qp* qp, const PortInfo& port, std::uint32_t psn);

// min(local, remote) - both are ibv_mtu enums.
ibv_mtu negotiate_mtu(ibv_mtu local, ibv_mtu remote) noexcept;

Status qp_to_init(ibv_qp* qp, std::uint8_t port, std::uint16_t pkey_index = 0, int access = kDefaultQpAccess);
// Uses GID (global routing) when either side is RoCE or the remote has no LID; LID otherwise.
Status qp_to_rtr(ibv_qp* qp, const Endpoint& local, const Endpoint& remote, const QpTimeouts& t);
Status qp_to_rts(ibv_qp* qp, std::uint32_t local_psn, const QpTimeouts& t);
// Moves the QP to ERROR: outstanding work requests flush with IBV_WC_WR_FLUSH_ERR.
Status qp_to_error(ibv_qp* qp);

// INIT -> RTR -> RTS in one go. ECE (ece.hpp), when both `local` and `remote` offer it: `remote`'s
// is set on the QP in INIT, and after RTS `local.ece` becomes what the QP reports (the reduced
// ECE, which a responder returns in its endpoint); when either does not, `local.ece` is cleared.
Status connect_rc_qp(ibv_qp* qp, Endpoint& local, const Endpoint& remote, const QpTimeouts& t);

}  // namespace nccl_ha::net
