// Liveness of a pair of ports (issue #21): one heartbeat conversation per (our port, the peer's
// port, the peer process, QoS), shared by every comm path that runs between them, instead of one
// per comm.
//
// A process holds hundreds to thousands of comms, most of them idle most of the time, and many of
// them between the same two ports. Whether the link between two ports carries traffic is one fact:
// the PairLiveness finds it out once per HA_NCCL_HEARTBEAT_MS, with one heartbeat write posted on one
// of its member paths (rotating over them; a path the data path holds, or with work outstanding,
// is skipped: its own completions and soft RTO watch it), and tells
// every member when its answer changes. A comm itself runs no timer while it is idle: it sleeps
// until a completion-channel event, a port event, a verbs job, the data path or its pairs wake it
// (control.cpp); its own checks (the soft RTO, the failover) run only while it has work.
//
// Its state is the age of the oldest heartbeat still unanswered with none posted after it
// answered. `silent` from three periods (kMissesForSilent): a member whose standby runs there marks
// it down (tried anyway by a failover: it is connected and may only be slow). `lost` from the soft
// RTO (HA_NCCL_RTO_MS, at least three periods): a member whose active path runs there, and has
// seen nothing complete on it for as long, fails over to a healthy standby (the soft RTO of an
// idle path). An answer brings the pair back, and the standbys with it. Any member's answer
// counts: one member's QP that is stuck (its peer comm gone) does not silence the pair while the
// others answer. A tick that comes a period late (the progress thread behind its work: answers may
// still wait in the CQs of comms whose steps are queued behind it) takes answers but declares no
// silence. A path carries at most one of its pair's heartbeats at a time. An error completion of
// a heartbeat is the member comm's own (its failover, its standby's loss).
//
// The peer process is part of the key (its rescue service's address, rescue.hpp): a dead process
// leaves its pairs silent, not another process's on the same host. A comm whose peer has no rescue
// service (HA off there) gets pairs of its own. Progress thread only, except `acked`.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <compare>
#include <deque>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace nccl_ha::plugin {

struct CommBase;
struct Path;

constexpr std::uint64_t kMissesForSilent = 3;

struct LivenessKey {
  int dev = -1;                             // our Device::index
  std::array<std::uint8_t, 16> peer_gid{};  // the peer's port
  std::uint16_t peer_lid = 0;
  std::string peer;                         // the peer process (its rescue service), or the comm itself
  std::uint8_t traffic_class = 0;           // the paths' QoS: another class may take another route
  std::uint8_t service_level = 0;
  auto operator<=>(const LivenessKey&) const = default;
};

class PairLiveness {
 public:
  PairLiveness(LivenessKey key, std::string name, std::uint64_t period_ns, std::uint64_t rto_ns) noexcept
      : key_(std::move(key)), name_(std::move(name)), period_ns_(period_ns),
        lost_ns_(std::max(rto_ns, kMissesForSilent * period_ns)) {}

  // Any thread (whoever reaps the completion): the pair's heartbeat `seq` completed.
  void acked(std::uint64_t seq) noexcept {
    std::uint64_t cur = acked_.load(std::memory_order_relaxed);
    while (cur < seq && !acked_.compare_exchange_weak(cur, seq, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }

  // Progress thread.
  const LivenessKey& key() const noexcept { return key_; }
  const std::string& name() const noexcept { return name_; }
  std::uint64_t period_ns() const noexcept { return period_ns_; }
  bool silent() const noexcept { return level_ >= Level::silent; }
  bool lost() const noexcept { return level_ == Level::lost; }
  const std::string& why() const noexcept { return why_; }
  std::uint64_t heartbeats() const noexcept { return seq_; }
  std::size_t members() const noexcept { return members_.size(); }
  // The peer process's control plane is running: one of its control records (a failover notice, a
  // re-protection request or answer) was read by a member comm at `now`. Its requests' deadlines
  // follow it (keep_waiting_for_answer, attempt_gate.hpp).
  void heard(std::uint64_t now) noexcept { heard_ns_ = std::max(heard_ns_, now); }
  std::uint64_t heard_ns() const noexcept { return heard_ns_; }
  // `p` (a connected path of `c`) runs on this pair.
  void join(const std::shared_ptr<CommBase>& c, const std::shared_ptr<Path>& p);
  // One period, `late_ns` after it was due: the heartbeats answered or missed, the next one posted
  // (members that are gone leave as the rotation reaches them). Returns false once the pair has
  // had no member for a whole period (its loop ends).
  bool tick(std::uint64_t now, std::uint64_t late_ns);

 private:
  struct Member {
    std::weak_ptr<CommBase> comm;
    std::weak_ptr<Path> path;
  };
  struct Posted {
    std::uint64_t seq;
    std::uint64_t ns;
  };
  void post_next(std::uint64_t now);
  enum class Level : std::uint8_t { answering, silent, lost };
  void set_level(Level level, std::uint64_t age_ns);

  LivenessKey key_;
  std::string name_;  // "rxe0:1 -> fe80::...:1 (peer 10.0.0.2:41234)"
  std::uint64_t period_ns_;
  std::vector<Member> members_;
  std::size_t next_ = 0;               // the member the next heartbeat goes to
  std::uint64_t seq_ = 0;              // heartbeats posted
  std::atomic<std::uint64_t> acked_{0};  // the newest one answered
  std::uint64_t seen_ack_ = 0;         // acked_ at the last tick
  std::deque<Posted> unanswered_;      // posted after the newest answer, oldest first (capped)
  std::uint64_t lost_ns_;              // unanswered this long: lost
  std::uint64_t heard_ns_ = 0;         // the peer's control plane last heard from (heard())
  Level level_ = Level::answering;
  std::string why_;
  int empty_ticks_ = 0;
};

// The registry of the process's pairs (State::pairs). Progress thread only.
struct LivenessRegistry {
  std::map<LivenessKey, std::weak_ptr<PairLiveness>> pairs;
};

// Progress thread: puts the connected path `p` of `c` on its pair (found, or created with its
// heartbeat loop started), unless it is there already. A comm with HA off joins none.
void join_pair(CommBase& c, const std::shared_ptr<Path>& p);

// Progress thread: `c` read a control record of its peer at `now` that came over `via` (one of its
// paths; null, or none of them any more: its active path): that path's pair hears of it
// (PairLiveness::heard). A failover notice comes over the standby, read before the switch: it is
// heard on the pair the comm goes on with, not on the one that failed.
void heard_from_peer(CommBase& c, std::uint64_t now, const Path* via = nullptr);

}  // namespace nccl_ha::plugin
