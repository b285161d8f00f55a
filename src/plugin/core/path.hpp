// One RC connection of a comm on one device (Path): its CQ and QP, what is outstanding on it, the
// pair of ports whose heartbeats watch it; how one is made (make_path) and connected (rc_attrs).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "nccl_ha/net/qp.hpp"
#include "runtime/config.hpp"
#include "runtime/device.hpp"

namespace nccl_ha::plugin {

class PairLiveness;  // liveness.hpp
class Reaper;
struct CommBase;

// One RC connection of a comm on one device. Shared with the reactor while the standby is
// being connected in the background: the reactor owns everything until it publishes `link`.
struct Path {
  enum Link : int {
    connecting,  // not connected yet (the handshake's phase two, a re-protection job's path): only
                 // the code connecting it touches it
    up,          // connected: may carry traffic, heartbeats and control writes
    failed       // setup failed (`why`), or the QP went to ERROR (a failed heartbeat or flush
                 // read): dead until re-protection or tend_flush replaces the path
  };

  Device* dev = nullptr;
  int slot = 0;
  // The comm, for the device's completion channel: the CQ's cq_context points here. Declared
  // before `cq` so that it outlives the CQ (ibv_destroy_cq waits for a taken event's ack).
  std::weak_ptr<CommBase> owner;
  net::CqPtr cq;
  // Its QPs, all on `cq` (NCCL_IB_QPS_PER_CONNECTION, as net_ib: the ECMP spread of RoCE). QP i is
  // connected to the peer's QP i; `nqps` of them carry traffic once connected (the smaller count
  // of the two sides). QP 0 alone carries the control writes, heartbeats and clear-to-send
  // entries; data goes on QP seq % nqps, or, `split`, in nqps parts, part j on QP j
  // (path_ops.cpp post_data). Until it is connected, `nqps` is what this side made.
  std::array<net::QpPtr, net::kMaxEndpointQps> qps;
  int nqps = 1;
  bool split = false;  // both sides asked for it (NCCL_IB_SPLIT_DATA_ON_QPS) and nqps > 1
  net::Endpoint local{};
  net::Endpoint remote{};
  std::atomic<int> link{connecting};  // reactor -> proxy thread (release / acquire)
  std::string why;                    // set before link = failed

  // Whoever holds the comm (CommBase::owned), once the path carries traffic or heartbeats.
  std::uint32_t sends_out = 0;          // send WRs posted and not yet reaped (all are signalled)
  std::uint32_t recvs_out = 0;          // receive WRs posted and not yet reaped, on all its QPs
  // ... on each QP (a receive WR's wr_id value is its QP's index)
  std::array<std::uint32_t, net::kMaxEndpointQps> qp_recvs_out{};
  std::uint64_t completions = 0;        // reaped so far (the control plane compares it per tick)
  std::uint64_t seen_completions = 0;   // control plane: `completions` at its last look
  std::uint64_t last_progress_ns = 0;   // soft RTO base: last completion or empty send queue (0: unset)
  std::uint64_t last_completion_ns = 0; // idle probe base
  // The soft RTO's allowance for large writes: the largest data write outstanding, at a tenth of
  // the port's rate (reset when the send queue empties). A healthy path finishes its oldest
  // write well within that; a 64 MiB write is no black hole because it takes a while.
  std::uint64_t rto_allowance_ns = 0;
  // Receive WRs posted beyond what the receives outstanding need: a path left by a failback keeps
  // the WRs of the buffers that were then missing (it stays connected, as the standby); when it
  // carries traffic again, they stand for the next receives instead of new posts (failover.cpp).
  std::array<std::uint32_t, net::kMaxEndpointQps> spare_recvs{};  // per QP
  std::uint32_t fault_gen = 0;          // dev->fault_gen when the path came up
  Qos qos;                              // the comm's, set before the QP is connected
  int peer_dev = -1;                    // the peer's NCCL device index at the other end (-1: not known)
  // The pair of ports it runs on (liveness.hpp), once connected and with HA on: set by the control
  // plane (join_pair), read by whoever reaps a heartbeat's completion (PairLiveness::acked).
  std::shared_ptr<PairLiveness> pair;
  std::uint64_t pair_heartbeat = 0;     // the pair's heartbeat outstanding on it (its number; 0: none)

  ibv_qp* qp(int i = 0) const noexcept { return qps[static_cast<std::size_t>(i)].get(); }
  // The parts each message goes in (1, or nqps when split).
  int parts() const noexcept { return split ? nqps : 1; }
  // The QP that carries receive `seq`'s messages when they are not split (net_ib's seq % nqps).
  int qp_of(std::uint64_t seq) const noexcept { return nqps == 1 ? 0 : static_cast<int>(seq % static_cast<unsigned>(nqps)); }
};

// The RC attributes `p`'s QP is connected with: its port's timeouts, the comm's QoS.
net::QpTimeouts rc_attrs(const Path& p);

// Path::rto_allowance_ns of one write of `bytes` on a port of `speed_mbps` (unknown: 2500, SDR 1x):
// bytes / (speed / 8 / 10) = bytes * 80000 / speed_mbps nanoseconds.
constexpr std::uint64_t write_allowance_ns(std::uint64_t bytes, int speed_mbps) {
  return bytes * 80000u / static_cast<std::uint64_t>(speed_mbps > 0 ? speed_mbps : 2500);
}

// A path on `dev`: CQ + `qps.count` RC QPs in RESET, its local endpoint chosen (asking for the split
// when `qps.split`). With an `owner`, the CQ reports to the device's completion channel (wakes the
// owner's control plane). Dropped, it goes to `reaper` (null: an ordinary object). Each QP has
// the depths given; the CQ has room for what they can hold outstanding together.
Expected<std::shared_ptr<Path>> make_path(Reaper* reaper, Device& dev, int slot, int send_depth, int recv_depth,
                                          std::weak_ptr<CommBase> owner = {}, QpPlan qps = {});

// Connects p's QPs to the peer's `remote` (QP i to its QP i, as many as both have; the QPs beyond
// go), with rc_attrs(p): p.nqps and p.split become what both sides agreed, p.local says so (and
// carries the ECE QP 0 agreed: connect_rc_qp). Not yet shared with another thread.
Status connect_path(Path& p, const net::Endpoint& remote);

// Moves all of p's QPs to ERROR (their WRs flush); the first failure, if any.
Status path_to_error(Path& p);

}  // namespace nccl_ha::plugin
