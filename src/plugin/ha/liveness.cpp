// Heartbeats per pair of ports (liveness.hpp): the pair's loop on the progress thread.
#include "ha/liveness.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/path_ops.hpp"
#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "nccl_ha/net/gid.hpp"
#include "runtime/log.hpp"

namespace nccl_ha::plugin {

namespace asio = boost::asio;

namespace {

// Whether `p` is still one of `c`'s paths (a path is replaced whole when its slot is rebuilt).
bool holds(const CommBase& c, const Path& p) {
  return p.slot >= 0 && p.slot < kSlots && c.paths[p.slot].get() == &p;
}

// A member the pair has no more use for: its comm or path gone, closing, closed by the peer, or
// the path replaced. Read with the comm held.
bool gone(const CommBase& c, const Path& p) {
  return c.closing.load(std::memory_order_relaxed) || c.cp.peer_closed() || !holds(c, p);
}

// The comm (held) may carry a heartbeat on `p` now: no failover under way, the path up and idle
// (a heartbeat completes after the writes before it - a 4 MiB write takes a while - and the path's
// own completions and soft RTO watch a busy one), without the pair's last heartbeat still out.
bool may_probe(const CommBase& c, const Path& p) {
  return c.error == ncclSuccess && c.cp.fo().phase == FailoverState::normal && c.cp.fo().requested.empty() &&
         p.link.load(std::memory_order_acquire) == Path::up && p.pair_heartbeat == 0 && p.sends_out == 0;
}

std::string pair_name(const Device& d, const Path& p, const std::string& peer) {
  return d.port.id() + " -> " + net::gid_to_string(p.remote.gid) + " (" + peer + ")";
}

asio::awaitable<void> pair_loop(std::shared_ptr<PairLiveness> pair) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    const std::uint64_t due = now_ns() + pair->period_ns();
    timer.expires_after(std::chrono::nanoseconds(pair->period_ns()));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    const auto cs = co_await asio::this_coro::cancellation_state;
    if (ec || cs.cancelled() != asio::cancellation_type::none) co_return;  // the reactor stops
    const std::uint64_t now = now_ns();
    if (!pair->tick(now, now > due ? now - due : 0)) break;
  }
  if (State* st = state()) {
    auto& map = st->pairs->pairs;
    if (const auto it = map.find(pair->key()); it != map.end() && it->second.lock() == pair) map.erase(it);
  }
}

}  // namespace

void PairLiveness::join(const std::shared_ptr<CommBase>& c, const std::shared_ptr<Path>& p) {
  members_.push_back({c, p});
}

bool PairLiveness::tick(std::uint64_t now, std::uint64_t late_ns) {
  if (members_.empty()) {
    unanswered_.clear();  // nothing to judge: the comms are gone (closed in order, most likely)
    return ++empty_ticks_ < 2;
  }
  empty_ticks_ = 0;
  if (const std::uint64_t acked = acked_.load(std::memory_order_acquire); acked > seen_ack_) {
    seen_ack_ = acked;
    while (!unanswered_.empty() && unanswered_.front().seq <= acked) unanswered_.pop_front();
  }
  // The oldest heartbeat waiting with none posted after it answered: a link that answers late
  // (congested, delayed) stays silent instead of flapping.
  const std::uint64_t age = unanswered_.empty() ? 0 : now - unanswered_.front().ns;
  const Level level = age >= lost_ns_ ? Level::lost : age >= kMissesForSilent * period_ns_ ? Level::silent : Level::answering;
  // A tick a period late means a progress thread behind its work: the answers may be waiting in
  // CQs of comms whose steps are queued behind it. Only an answer is taken then, never a silence.
  if (level < level_ || (level > level_ && late_ns <= period_ns_)) set_level(level, age);
  post_next(now);
  return true;
}

void PairLiveness::post_next(std::uint64_t now) {
  constexpr std::size_t kMaxUnanswered = 64;
  // A few members per period, whatever their number: one that is gone leaves the list when the
  // rotation reaches it (the cost of a period does not grow with the comms on the pair).
  constexpr int kLooksPerPeriod = 8;
  for (int looks = 0; looks < kLooksPerPeriod && !members_.empty(); ++looks) {
    const std::size_t i = next_ % members_.size();
    const auto c = members_[i].comm.lock();
    const auto p = members_[i].path.lock();
    std::optional<Hold> hold;
    if (c && p) hold.emplace(*c);
    if (hold && !*hold) {  // the data path has it: another member
      ++next_;
      continue;
    }
    if (!hold || gone(*c, *p)) {
      members_[i] = std::move(members_.back());
      members_.pop_back();
      continue;
    }
    ++next_;
    if (!may_probe(*c, *p)) continue;
    if (post_heartbeat(*c, *p, seq_ + 1) != 0) {
      wake_here(*c);  // its path is broken: the comm's own control plane finds out
      continue;
    }
    p->pair_heartbeat = ++seq_;
    if (unanswered_.size() == kMaxUnanswered) unanswered_.erase(unanswered_.begin() + 1);  // the oldest's time stays
    unanswered_.push_back({seq_, now});
    return;
  }
}

void PairLiveness::set_level(Level level, std::uint64_t age_ns) {
  level_ = level;
  why_ = level == Level::answering ? std::string("heartbeats answered again")
                                   : "no heartbeat answered for " + std::to_string(age_ns / 1000000) + " ms (" +
                                         std::to_string(age_ns / period_ns_) + " periods) on " + name_;
  HA_INFO("NET/HA: pair %s: %s%s (%zu comm path(s) on it)", name_.c_str(), why_.c_str(),
          level == Level::lost ? ": lost" : "", members_.size());
  for (const Member& m : members_)
    if (auto c = m.comm.lock()) wake_here(*c);
}

void join_pair(CommBase& c, const std::shared_ptr<Path>& p) {
  State* st = state();
  if (!st || !c.watch_pairs || !p || p->pair || !p->dev) return;
  LivenessKey k;
  k.dev = p->dev->index;
  std::memcpy(k.peer_gid.data(), p->remote.gid.raw, k.peer_gid.size());
  k.peer_lid = p->remote.lid;
  k.peer = c.cp.rescue().peer.port() != 0 ? c.cp.rescue().peer.address().to_string() + ":" + std::to_string(c.cp.rescue().peer.port())
                                     : c.id;
  k.traffic_class = p->qos.traffic_class;
  k.service_level = p->qos.service_level;
  std::weak_ptr<PairLiveness>& entry = st->pairs->pairs[k];
  std::shared_ptr<PairLiveness> pair = entry.lock();
  if (!pair) {
    pair = std::make_shared<PairLiveness>(k, pair_name(*p->dev, *p, k.peer), c.heartbeat_ns, c.rto_ns);
    entry = pair;
    st->reactor.spawn("pair " + pair->name(), pair_loop(pair));
  }
  pair->join(c.shared_from_this(), p);
  p->pair = std::move(pair);
}

void heartbeat_acked(Path& p, std::uint64_t seq) noexcept {
  if (p.pair) p.pair->acked(seq);
}

void heard_from_peer(CommBase& c, std::uint64_t now, const Path* via) {
  const Path* p = nullptr;
  for (const auto& q : c.paths)
    if (q && q.get() == via) p = q.get();
  if (!p && c.active() >= 0 && c.active() < kSlots) p = c.paths[c.active()].get();
  if (p && p->pair) p->pair->heard(now);
}

}  // namespace nccl_ha::plugin
