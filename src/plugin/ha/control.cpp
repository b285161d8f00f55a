// The control task: the comm's HA control plane on the reactor's progress thread.
//
// One coroutine per comm sleeps on the comm's timer until the time control_step() asked for,
// or until something wakes it: a completion-channel event of one of the comm's CQs (a
// heartbeat's or control write's completion, the peer's failover notice, an error completion
// on an idle path), a port event of one of its devices, a finished verbs job, or the data path
// handing over a fault. It then takes the comm (Hold: never waiting for NCCL's thread; if the
// data path has it, it looks again shortly) and runs control_step(). It ends when the comm is
// closed, or when the reactor stops.
//
// Completion channels: one per device (Device::channel), shared by the CQs of every comm path
// on it; cq_context is the path's Path::owner (a weak reference to the comm).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>


#include "core/state.hpp"
#include "ha/attempt_gate.hpp"
#include "ha/control_ops.hpp"
#include "nccl_ha/reactor/fd_watcher.hpp"

namespace nccl_ha::plugin {

namespace asio = boost::asio;

struct ControlTask {
  explicit ControlTask(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;  // progress thread only
  bool pending = false;      // woken while not waiting: run a step before sleeping again
};

namespace {

constexpr std::uint64_t kBusyRetryNs = 200'000;  // the data path holds the comm: look again then

asio::steady_timer::time_point at_ns(std::uint64_t ns) {
  // steady_clock is CLOCK_MONOTONIC on Linux, like now_ns().
  return asio::steady_timer::time_point(std::chrono::duration_cast<asio::steady_timer::duration>(std::chrono::nanoseconds(ns)));
}

void watch_devices(const std::shared_ptr<CommBase>& c) {
  for (Device* d : c->devs)
    if (d) watch_device(c, *d);
}

asio::awaitable<void> control_loop(std::shared_ptr<CommBase> comm) {
  CommBase& c = *comm;
  ControlTask& t = *c.task;
  watch_devices(comm);
  t.pending = true;  // first step at once: arm the CQs, start the heartbeats
  for (;;) {
    if (!t.pending) {
      auto [ec] = co_await t.timer.async_wait(asio::as_tuple(asio::use_awaitable));
      (void)ec;  // expired, or cancelled by wake_here()
      const auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none) co_return;  // the reactor stops
    }
    t.pending = false;
    if (c.closing.load(std::memory_order_relaxed)) break;
    const std::uint64_t now = now_ns();
    std::uint64_t next = now + kBusyRetryNs;
    if (Hold hold{c}) {
      next = control_step(c, now);
      settle_attempt(c);
    }
    if (c.closing.load(std::memory_order_relaxed)) break;
    t.timer.expires_at(next ? at_ns(next) : asio::steady_timer::time_point::max());
  }
  settle_attempt(c);  // closed: its place in the line of re-protection attempts goes to the next
}

}  // namespace

void start_control(const std::shared_ptr<CommBase>& c) {
  State* st = state();
  if (!st) return;
  c->task = std::make_shared<ControlTask>(st->reactor.context());
  register_comm(c);
  st->reactor.spawn(c->id + " control", control_loop(c));
}

void wake_here(CommBase& c) {
  if (!c.task) return;
  c.task->pending = true;
  c.task->timer.cancel();
}

void wake(CommBase& c) {
  State* st = state();
  if (!st) return;
  st->reactor.post([owner = c.weak_from_this()] {
    if (auto comm = owner.lock()) wake_here(*comm);
  });
}

void watch_device(const std::shared_ptr<CommBase>& c, Device& d) {
  auto& w = d.watchers;
  std::erase_if(w, [&c](const std::weak_ptr<CommBase>& x) { return x.expired() || x.lock() == c; });
  w.push_back(c);
}

// The woken steps run in that order, one after another on this thread: with many comms on a
// failed port, those whose traffic stopped fail over first, and giving up the standby paths of
// the others (a verbs call and a log line each) comes after.
void wake_watchers(Device& d) {
  auto& w = d.watchers;
  std::erase_if(w, [](const std::weak_ptr<CommBase>& x) { return x.expired(); });
  for (const bool carrying : {true, false})
    for (const auto& x : w)
      if (auto comm = x.lock(); comm && (comm->devs[comm->active()] == &d) == carrying) wake_here(*comm);
}

void watch_channel(Device& d) {
  State* st = state();
  if (!st || !d.channel) return;
  st->reactor.spawn("completion channel of " + d.port.id(), [](Device& dev) -> asio::awaitable<void> {
    reactor::FdWatcher watcher(co_await asio::this_coro::executor, dev.channel->fd);
    for (;;) {
      const auto ec = co_await watcher.readable();
      if (ec) co_return;
      for (;;) {
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        if (ibv_get_cq_event(dev.channel.get(), &cq, &context) != 0) break;  // EAGAIN: drained
        // The CQ cannot be destroyed before the ack below, nor its path's `owner` (declared first).
        if (context)
          if (auto comm = static_cast<const std::weak_ptr<CommBase>*>(context)->lock()) wake_here(*comm);
        ibv_ack_cq_events(cq, 1);
      }
    }
  }(d));
}

}  // namespace nccl_ha::plugin
