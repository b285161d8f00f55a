// Re-protection without storms (issue #21): the process's send comms run at most
// kAttemptsInFlight re-protection attempts at once; the others wait in line, woken when their turn
// comes, those without a usable standby before those that only move a standby home.
//
// A port that comes back makes every comm that lost its standby there try again at once. Each
// attempt is three verbs jobs (our QP, the peer's, our RTR/RTS) on two worker threads per
// process, and the request waits for the peer's job within HA_NCCL_FAILOVER_TIMEOUT_MS: a
// thousand attempts at once queued the peer's jobs far beyond that, every attempt timed out, and
// its retry queued more work (the scale benchmark, bench/README.md). In line, an attempt's request
// meets a peer queue of a few jobs, and the time to protect N comms grows linearly with N.
//
// An attempt holds its place from its admission until its step is idle again (installed, failed,
// given up), its comm closes or fails (settle_attempt, after every control step). A rescue
// (rescue.hpp: no path left) never waits. Progress thread only.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace nccl_ha::plugin {

struct CommBase;

constexpr std::size_t kAttemptsInFlight = 4;
// Failovers first: no attempt starts until the process's failovers have been quiet this long
// (none begun or finished), or half as long as they lasted, for at most kMaxFailoverDeferNs per comm.
constexpr std::uint64_t kFailoverQuietNs = 300'000'000;
constexpr std::uint64_t kMaxFailoverDeferNs = 30'000'000'000;

class AttemptGate {
 public:
  explicit AttemptGate(std::size_t limit = kAttemptsInFlight) noexcept : limit_(limit) {}
  // Whether `c` may start its attempt now: true once admitted (until leave); else it waits in line
  // (a move behind every comm without a standby) and is woken when admitted.
  bool enter(CommBase& c, bool move);
  // `c` gives its place (or its turn) up: the next in line is admitted.
  void leave(CommBase& c);
  // A failover of one of the process's comms began or finished at `now`: a port event begins every
  // failover on the port at once, and they finish over seconds. The quiet waited for is
  // kFailoverQuietNs, or half the storm's length so far when longer: the peer does the other half
  // of each failover at its own pace, and writes nothing back once its notices are out, so only
  // our half is seen here (scale bench, 1024 pairs: the peer finished 2.0 and 2.6 s after storms of
  // 6.5 and 10.6 s here, and attempts begun 0.3 s after ours timed out, unanswered).
  void failover_activity(std::uint64_t now) noexcept;
  // Failovers first: 0 when an attempt may start now, else when to ask again. A port event moves
  // every comm on the port, and each failover is the progress thread's work (here and at the
  // peer): an attempt started meanwhile waits behind that work on both sides, its request
  // unanswered for as long as the storm lasts (tens of seconds at 1024 comms under emulation).
  // `since_ns` (the comm's, 0 when not deferred) keeps a comm from waiting more than
  // kMaxFailoverDeferNs for a quiet that never comes.
  std::uint64_t defer(std::uint64_t now, std::uint64_t& since_ns) const noexcept;
  std::size_t in_flight() const noexcept { return admitted_.size(); }
  std::size_t waiting() const noexcept { return waiting_[0].size() + waiting_[1].size(); }

 private:
  void dispatch(const CommBase* caller);

  std::size_t limit_;
  std::vector<std::weak_ptr<CommBase>> admitted_;
  std::deque<std::weak_ptr<CommBase>> waiting_[2];  // [0] without a usable standby, [1] moves
  std::uint64_t quiet_at_ = 0;                       // the failovers' quiet begins (failover_activity)
  std::uint64_t storm_began_ = 0;                    // the first failover activity after the last quiet
};

// After a control step of `c` (held): its place is given up once its attempt is over, or the comm
// failed or closes.
void settle_attempt(CommBase& c);

// The request's deadline follows the peer's progress. An answer overdue after
// HA_NCCL_FAILOVER_TIMEOUT_MS (`timeout_ns`) is still waited for - the request reminded, the
// deadline one timeout further - while the peer's control plane was heard from (any control write
// of that process read here, `heard_ns`) within the last timeout, up to kAnswerWaitTimeouts
// timeouts after the request (`requested_ns`): a peer that works through a line of jobs answers
// late, and giving up would throw its finished job away and queue another. A request that found the
// peer in a conversation with us (heard from within a timeout before it) gets a second timeout even
// when the peer is quiet since: a failover storm is the peer's work as much as ours, and it writes
// nothing back while it works through its half (scale bench, 1024 pairs: the first attempts after
// the port came back went unanswered for 1 s while the peer, 2 s behind us, finished its
// failovers). A peer not heard from since a timeout before the request is given up on at the first
// deadline, as before.
constexpr std::uint64_t kAnswerWaitTimeouts = 16;
bool keep_waiting_for_answer(std::uint64_t requested_ns, std::uint64_t heard_ns, std::uint64_t now,
                             std::uint64_t timeout_ns) noexcept;

}  // namespace nccl_ha::plugin
