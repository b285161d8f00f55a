// The line of re-protection attempts (attempt_gate.hpp).
#include "ha/attempt_gate.hpp"

#include <algorithm>

#include "core/state.hpp"
#include "ha/control_ops.hpp"

namespace nccl_ha::plugin {

// The writer of a comm's place among the attempts (ControlPlane): defined here only.
struct GateWriter {
  static AttemptTicket& ticket(CommBase& c) noexcept { return c.cp.ticket_; }
};
namespace {
AttemptTicket& ticket_of(CommBase& c) noexcept { return GateWriter::ticket(c); }
}  // namespace

bool AttemptGate::enter(CommBase& c, bool move) {
  if (ticket_of(c).admitted) return true;
  if (!ticket_of(c).queued) {
    waiting_[move ? 1 : 0].push_back(c.weak_from_this());
    ticket_of(c).queued = true;
  }
  dispatch(&c);
  return ticket_of(c).admitted;
}

void AttemptGate::leave(CommBase& c) {
  if (!ticket_of(c).admitted) return;
  ticket_of(c).admitted = false;
  std::erase_if(admitted_, [&c](const std::weak_ptr<CommBase>& w) { return w.expired() || w.lock().get() == &c; });
  dispatch(&c);
}

void AttemptGate::failover_activity(std::uint64_t now) noexcept {
  if (now >= quiet_at_) storm_began_ = now;  // a storm begins
  quiet_at_ = std::max(quiet_at_, now + std::max(kFailoverQuietNs, (now - storm_began_) / 2));
}

std::uint64_t AttemptGate::defer(std::uint64_t now, std::uint64_t& since_ns) const noexcept {
  if (now >= quiet_at_ || (since_ns != 0 && now - since_ns >= kMaxFailoverDeferNs)) {
    since_ns = 0;
    return 0;
  }
  if (since_ns == 0) since_ns = now;
  return std::min(quiet_at_, since_ns + kMaxFailoverDeferNs);
}

void AttemptGate::dispatch(const CommBase* caller) {
  std::erase_if(admitted_, [](const std::weak_ptr<CommBase>& w) {
    const auto c = w.lock();
    return !c || !ticket_of(*c).admitted || c->closing.load(std::memory_order_relaxed);
  });
  while (admitted_.size() < limit_) {
    auto& line = !waiting_[0].empty() ? waiting_[0] : waiting_[1];
    if (line.empty()) return;
    const auto c = line.front().lock();
    line.pop_front();
    if (!c || c->closing.load(std::memory_order_relaxed)) continue;
    ticket_of(*c).queued = false;
    ticket_of(*c).admitted = true;
    admitted_.push_back(c);
    if (c.get() != caller) wake_here(*c);
  }
}

void settle_attempt(CommBase& c) {
  if (!ticket_of(c).admitted) return;
  if (c.cp.rp().step != ReprotectState::idle && c.error == ncclSuccess && !c.closing.load(std::memory_order_relaxed)) return;
  if (State* st = state()) st->attempts->leave(c);
}

bool keep_waiting_for_answer(std::uint64_t requested_ns, std::uint64_t heard_ns, std::uint64_t now,
                             std::uint64_t timeout_ns) noexcept {
  if (now - requested_ns >= kAnswerWaitTimeouts * timeout_ns) return false;
  const bool heard_lately = heard_ns != 0 && (heard_ns >= now || now - heard_ns < timeout_ns);
  const bool asked_mid_conversation =
      heard_ns != 0 && heard_ns + timeout_ns > requested_ns && now - requested_ns < 2 * timeout_ns;
  return heard_lately || asked_mid_conversation;
}

}  // namespace nccl_ha::plugin
