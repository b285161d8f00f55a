// Re-protection without storms (issue #21): the process's send comms run at most
// kAttemptsInFlight re-protection attempts at once; the others wait in line, woken when their turn
// comes, those without a usable standby before those that only move a standby home.
//
// A port that comes back makes every comm that lost its standby there try again at once. Each
// attempt is three verbs jobs (our QP, the peer's, our RTR/RTS) on two worker threads per
// process, and the request waits for the peer's job within HA_NCCL_FAILOVER_TIMEOUT_MS: a
// thousand attempts at once queued the peer's jobs far beyond that, every attempt timed out, and
// its retry queued more work (bench/results/scale-*.md, before). In line, an attempt's request
// meets a peer queue of a few jobs, and the time to protect N comms grows linearly with N.
//
// An attempt holds its place from its admission until its step is idle again (installed, failed,
// given up), its comm closes or fails (settle_attempt, after every control step). A rescue
// (rescue.hpp: no path left) never waits. Progress thread only.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

namespace nccl_ha::plugin {

struct CommBase;

constexpr std::size_t kAttemptsInFlight = 4;

class AttemptGate {
 public:
  explicit AttemptGate(std::size_t limit = kAttemptsInFlight) noexcept : limit_(limit) {}
  // Whether `c` may start its attempt now: true once admitted (until leave); else it waits in line
  // (a move behind every comm without a standby) and is woken when admitted.
  bool enter(CommBase& c, bool move);
  // `c` gives its place (or its turn) up: the next in line is admitted.
  void leave(CommBase& c);
  std::size_t in_flight() const noexcept { return admitted_.size(); }
  std::size_t waiting() const noexcept { return waiting_[0].size() + waiting_[1].size(); }

 private:
  void dispatch(const CommBase* caller);

  std::size_t limit_;
  std::vector<std::weak_ptr<CommBase>> admitted_;
  std::deque<std::weak_ptr<CommBase>> waiting_[2];  // [0] without a usable standby, [1] moves
};

// After a control step of `c` (held): its place is given up once its attempt is over, or the comm
// failed or closes.
void settle_attempt(CommBase& c);

}  // namespace nccl_ha::plugin
