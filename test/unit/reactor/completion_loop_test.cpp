// CompletionLoop driven by a fake CqEventSource: an eventfd stands in for the completion
// channel, completions are queued ibv_wc entries, and the fake behaves like a CQ: an event is
// raised only for a completion that arrives while the CQ is armed, and raising it disarms it.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nccl_ha/reactor/completion_loop.hpp"
#include "nccl_ha/reactor/reactor.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::reactor;
using namespace nccl_ha::test;

namespace {

class FakeCq final : public CqEventSource {
 public:
  FakeCq() : efd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) { BOOST_REQUIRE(efd_ >= 0); }
  ~FakeCq() override { ::close(efd_); }

  // --- CqEventSource (progress thread) ---
  int event_fd() const noexcept override { return efd_; }
  bool arm() noexcept override {
    std::lock_guard lock(m_);
    ++arms_;
    trace_.push_back("arm");
    if (fail_arm_at_ && arms_ == *fail_arm_at_) return false;
    if (inject_on_arm_ && arms_ == *inject_on_arm_) {
      // A completion that lands just before the CQ is armed: it raises no event.
      push_locked(inject_wr_id_, 1);
    }
    armed_ = true;
    return true;
  }
  int take_events() noexcept override {
    std::lock_guard lock(m_);
    trace_.push_back("take");
    if (fail_take_) return -1;
    std::uint64_t v = 0;
    if (::read(efd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return errno == EAGAIN ? 0 : -1;
    unacked_ += static_cast<unsigned>(v);
    taken_ += v;
    return static_cast<int>(v);
  }
  void ack_events() noexcept override {
    std::lock_guard lock(m_);
    trace_.push_back("ack");
    acked_ += unacked_;
    unacked_ = 0;
    ++ack_calls_;
  }
  unsigned unacked_events() const noexcept override {
    std::lock_guard lock(m_);
    return unacked_;
  }
  int poll(std::span<ibv_wc> out) noexcept override {
    std::lock_guard lock(m_);
    ++polls_;
    if (fail_poll_from_ && polls_ >= *fail_poll_from_) {
      trace_.push_back("poll:error");
      return -1;
    }
    const std::size_t n = std::min(out.size(), queue_.size());
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = queue_.front();
      queue_.pop_front();
    }
    trace_.push_back("poll:" + std::to_string(n));
    return static_cast<int>(n);
  }

  // --- test side (any thread) ---
  // `n` completions with consecutive wr_ids; raises one event if armed (and disarms).
  void complete(std::uint64_t first_wr_id, std::size_t n = 1) {
    std::lock_guard lock(m_);
    push_locked(first_wr_id, n);
    if (armed_) {
      armed_ = false;
      std::uint64_t one = 1;
      BOOST_REQUIRE(::write(efd_, &one, sizeof one) == static_cast<ssize_t>(sizeof one));
      ++events_raised_;
    }
  }
  // Raises `n` channel events at once (as if several CQs/arms had fired) without completions.
  void raise_events(std::uint64_t n) {
    std::lock_guard lock(m_);
    BOOST_REQUIRE(::write(efd_, &n, sizeof n) == static_cast<ssize_t>(sizeof n));
    armed_ = false;
    events_raised_ += n;
  }
  void fail_poll_from(int nth) { std::lock_guard lock(m_); fail_poll_from_ = nth; }
  void fail_arm_at(int nth) { std::lock_guard lock(m_); fail_arm_at_ = nth; }
  void fail_take() { std::lock_guard lock(m_); fail_take_ = true; }
  void inject_on_arm(int nth, std::uint64_t wr_id) {
    std::lock_guard lock(m_);
    inject_on_arm_ = nth;
    inject_wr_id_ = wr_id;
  }

  bool armed() const { std::lock_guard lock(m_); return armed_; }
  int arms() const { std::lock_guard lock(m_); return arms_; }
  int polls() const { std::lock_guard lock(m_); return polls_; }
  unsigned unacked() const { std::lock_guard lock(m_); return unacked_; }
  std::uint64_t acked() const { std::lock_guard lock(m_); return acked_; }
  int ack_calls() const { std::lock_guard lock(m_); return ack_calls_; }
  std::uint64_t events_raised() const { std::lock_guard lock(m_); return events_raised_; }
  std::size_t queued() const { std::lock_guard lock(m_); return queue_.size(); }
  std::vector<std::string> trace() const { std::lock_guard lock(m_); return trace_; }
  // The loop has gone back to waiting: the CQ is armed and empty, and the loop's last action
  // was a poll that returned a partial batch (so its drain is over).
  bool idle() const {
    std::lock_guard lock(m_);
    if (!armed_ || !queue_.empty() || trace_.empty()) return false;
    const auto& last = trace_.back();
    return last.rfind("poll:", 0) == 0 && last != "poll:32" && last != "poll:error";
  }

 private:
  void push_locked(std::uint64_t first, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      ibv_wc wc{};
      wc.wr_id = first + i;
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = IBV_WC_RECV;
      wc.byte_len = 8;
      queue_.push_back(wc);
    }
  }

  int efd_;
  mutable std::mutex m_;
  std::deque<ibv_wc> queue_;
  bool armed_ = false;
  int arms_ = 0, polls_ = 0, ack_calls_ = 0;
  unsigned unacked_ = 0;
  std::uint64_t acked_ = 0, taken_ = 0, events_raised_ = 0;
  std::optional<int> fail_poll_from_, fail_arm_at_, inject_on_arm_;
  std::uint64_t inject_wr_id_ = 0;
  bool fail_take_ = false;
  std::vector<std::string> trace_;
};

struct Recorder {
  std::mutex m;
  std::vector<std::uint64_t> ids;
  std::vector<std::size_t> batches;
  std::atomic<std::size_t> total{0};
  std::atomic<int> calls{0};
  std::atomic<bool> on_progress_thread{true};
  Reactor* reactor = nullptr;

  CompletionLoop::Handler handler() {
    return [this](std::span<const ibv_wc> wcs) { record(wcs); };
  }
  void record(std::span<const ibv_wc> wcs) {
    if (reactor && !reactor->in_progress_thread()) on_progress_thread = false;
    std::lock_guard lock(m);
    for (const auto& wc : wcs) ids.push_back(wc.wr_id);
    batches.push_back(wcs.size());
    total.fetch_add(wcs.size());
    calls.fetch_add(1);
  }
  std::vector<std::uint64_t> get_ids() {
    std::lock_guard lock(m);
    return ids;
  }
  std::vector<std::size_t> get_batches() {
    std::lock_guard lock(m);
    return batches;
  }
};

struct Errors {
  std::mutex m;
  std::vector<std::string> whats;
  std::atomic<int> calls{0};
  CompletionLoop::ErrorHandler handler() {
    return [this](const char* what) {
      std::lock_guard lock(m);
      whats.emplace_back(what);
      calls.fetch_add(1);
    };
  }
  std::vector<std::string> get() {
    std::lock_guard lock(m);
    return whats;
  }
};

// Declaration order = destruction order reversed: the reactor stops first, before the fake CQ
// and the recorders go; the log capture outlives everything.
struct Fixture {
  LogCapture log;
  FakeCq cq;
  Recorder rec;
  Errors errors;
  Reactor r;
  Fixture() {
    rec.reactor = &r;
    r.start();
  }
  CompletionLoop::Options opts(unsigned ack_batch = 16, std::string name = "fakecq") {
    CompletionLoop::Options o;
    o.ack_batch = ack_batch;
    o.name = std::move(name);
    return o;
  }
};

std::vector<std::uint64_t> iota_ids(std::uint64_t first, std::size_t n) {
  std::vector<std::uint64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

// Every wakeup must be: take, [ack], arm, then polls until one returns fewer than 32.
void check_wakeup_order(const std::vector<std::string>& trace) {
  std::size_t i = 0;
  // Start-up: arm, then the initial drain.
  BOOST_REQUIRE(!trace.empty());
  BOOST_TEST(trace[i++] == "arm");
  auto skip_polls = [&] {
    while (i < trace.size() && trace[i].rfind("poll:", 0) == 0) {
      const bool last = trace[i] == "poll:error" || std::stoi(trace[i].substr(5)) < 32;
      ++i;
      if (last) break;
    }
  };
  skip_polls();
  while (i < trace.size()) {
    BOOST_TEST_REQUIRE(trace[i] == "take", "at trace[" << i << "]");
    ++i;
    if (i < trace.size() && trace[i] == "ack") ++i;
    BOOST_TEST_REQUIRE(i < trace.size());
    BOOST_TEST_REQUIRE(trace[i] == "arm", "re-arm must follow take/ack, at trace[" << i << "]");
    ++i;
    BOOST_TEST_REQUIRE(i < trace.size());
    BOOST_TEST_REQUIRE(trace[i].rfind("poll:", 0) == 0u, "poll must follow the re-arm, at trace[" << i << "]");
    skip_polls();
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(completion_loop)

BOOST_AUTO_TEST_CASE(delivers_completions_signalled_by_an_event) {
  Fixture f;
  CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
  loop.start();
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  f.cq.complete(1, 3);
  BOOST_REQUIRE(wait_until([&] { return f.rec.total.load() == 3; }));
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  loop.close();
  BOOST_TEST(f.rec.get_ids() == iota_ids(1, 3));
  BOOST_TEST(f.rec.on_progress_thread.load());
  const auto st = loop.stats();
  BOOST_TEST(st.wakeups == 1u);
  BOOST_TEST(st.events == 1u);
  BOOST_TEST(st.completions == 3u);
  BOOST_TEST(st.ack_calls == 0u);  // 1 event < ack_batch
  BOOST_TEST(f.cq.unacked() == 1u);
  BOOST_TEST(f.errors.calls.load() == 0);
  check_wakeup_order(f.cq.trace());
}

BOOST_AUTO_TEST_CASE(completions_present_before_the_first_event_are_delivered) {
  Fixture f;
  f.cq.complete(10, 5);  // not armed yet: raises no event
  BOOST_TEST(f.cq.events_raised() == 0u);
  CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
  loop.start();
  BOOST_REQUIRE(wait_until([&] { return f.rec.total.load() == 5; }));
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  loop.close();
  BOOST_TEST(f.rec.get_ids() == iota_ids(10, 5));
  const auto st = loop.stats();
  BOOST_TEST(st.wakeups == 0u);
  BOOST_TEST(st.events == 0u);
  BOOST_TEST(st.completions == 5u);
  // Armed before the initial poll.
  const auto trace = f.cq.trace();
  BOOST_REQUIRE(trace.size() >= 2u);
  BOOST_TEST(trace[0] == "arm");
  BOOST_TEST(trace[1] == "poll:5");
}

BOOST_AUTO_TEST_CASE(more_than_32_completions_in_one_wakeup) {
  for (std::size_t n : {32u, 33u, 64u, 100u, 1000u}) {
    BOOST_TEST_CONTEXT("n = " << n) {
      Fixture f;
      CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
      loop.start();
      BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
      f.cq.complete(1000, n);
      BOOST_REQUIRE(wait_until([&] { return f.rec.total.load() == n; }));
      BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
      loop.close();
      BOOST_TEST(f.rec.get_ids() == iota_ids(1000, n));
      const auto batches = f.rec.get_batches();
      BOOST_TEST(batches.size() == (n + 31) / 32);
      for (std::size_t i = 0; i < batches.size(); ++i)
        BOOST_TEST(batches[i] == std::min<std::size_t>(32, n - 32 * i));
      const auto st = loop.stats();
      BOOST_TEST(st.wakeups == 1u);
      BOOST_TEST(st.events == 1u);
      BOOST_TEST(st.completions == n);
      BOOST_TEST(f.cq.queued() == 0u);
      check_wakeup_order(f.cq.trace());
    }
  }
}

BOOST_AUTO_TEST_CASE(events_are_acknowledged_in_batches) {
  for (unsigned batch : {1u, 4u, 16u}) {
    BOOST_TEST_CONTEXT("ack_batch = " << batch) {
      Fixture f;
      CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts(batch));
      loop.start();
      BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
      constexpr unsigned kEvents = 10;
      for (unsigned i = 0; i < kEvents; ++i) {
        f.cq.complete(i);  // one completion, one event
        BOOST_REQUIRE(wait_until([&] { return f.rec.total.load() == i + 1; }));
        BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
      }
      loop.close();
      const auto st = loop.stats();
      BOOST_TEST(st.wakeups == kEvents);
      BOOST_TEST(st.events == kEvents);
      BOOST_TEST(st.completions == kEvents);
      BOOST_TEST(st.ack_calls == kEvents / batch);
      BOOST_TEST(f.cq.ack_calls() == static_cast<int>(kEvents / batch));
      BOOST_TEST(f.cq.acked() == (kEvents / batch) * batch);
      BOOST_TEST(f.cq.unacked() == kEvents % batch);  // the rest is the CQ owner's to ack
      check_wakeup_order(f.cq.trace());
    }
  }
}

BOOST_AUTO_TEST_CASE(several_events_taken_in_one_wakeup_are_acked_together) {
  Fixture f;
  CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts(4));
  loop.start();
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  f.cq.raise_events(5);
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  loop.close();
  const auto st = loop.stats();
  BOOST_TEST(st.wakeups == 1u);
  BOOST_TEST(st.events == 5u);
  BOOST_TEST(st.completions == 0u);
  BOOST_TEST(st.ack_calls == 1u);
  BOOST_TEST(f.cq.acked() == 5u);
  BOOST_TEST(f.cq.unacked() == 0u);
  BOOST_TEST(f.rec.calls.load() == 0);  // an empty CQ never calls the handler
}

BOOST_AUTO_TEST_CASE(rearms_before_polling_so_no_completion_is_stranded) {
  // The second arm (the re-arm after the first wakeup) is preceded by a completion that
  // raises no event. Only a loop that polls after re-arming sees it without another event.
  Fixture f;
  f.cq.inject_on_arm(2, 777);
  CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
  loop.start();
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  f.cq.complete(1);
  BOOST_TEST(wait_until([&] { return f.rec.total.load() == 2; }, 10s), "the completion before the re-arm was stranded");
  loop.close();
  BOOST_TEST(f.rec.get_ids() == (std::vector<std::uint64_t>{1, 777}));
  BOOST_TEST(f.cq.events_raised() == 1u);
  BOOST_TEST(loop.stats().wakeups == 1u);
}

BOOST_AUTO_TEST_CASE(close_while_waiting) {
  Fixture f;
  std::optional<CompletionLoop> loop;
  loop.emplace(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
  loop->start();
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  BOOST_TEST(f.r.live_tasks() == 1u);
  loop->close();
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));  // the coroutine ended
  const auto trace_at_close = f.cq.trace();
  f.cq.complete(1, 3);  // still armed from the loop's point of view: raises an event
  BOOST_TEST(f.cq.events_raised() == 1u);
  std::this_thread::sleep_for(200ms);
  on_reactor(f.r, [] {});  // and let the reactor run whatever is queued
  BOOST_TEST(f.rec.calls.load() == 0);
  BOOST_TEST(f.cq.trace() == trace_at_close);  // the source is not touched after close()
  BOOST_TEST(loop->stats().wakeups == 0u);
  BOOST_TEST(f.errors.calls.load() == 0);
  BOOST_TEST(::fcntl(f.cq.event_fd(), F_GETFD) >= 0);  // the channel fd is not closed by the loop
  loop->close();  // idempotent
  loop.reset();
  BOOST_TEST(f.rec.calls.load() == 0);
}

BOOST_AUTO_TEST_CASE(destructor_closes_the_loop) {
  Fixture f;
  {
    CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
    loop.start();
    BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  }
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
  f.cq.complete(1);
  std::this_thread::sleep_for(100ms);
  on_reactor(f.r, [] {});
  BOOST_TEST(f.rec.calls.load() == 0);
}

BOOST_AUTO_TEST_CASE(close_from_inside_the_handler) {
  for (bool before_start : {false, true}) {
    BOOST_TEST_CONTEXT("completions queued before start: " << before_start) {
      Fixture f;
      std::optional<CompletionLoop> loop;
      std::atomic<int> calls{0};
      std::atomic<std::size_t> first_batch{0};
      loop.emplace(
          f.r, f.cq,
          [&](std::span<const ibv_wc> wcs) {
            if (calls.fetch_add(1) == 0) first_batch = wcs.size();
            loop->close();  // runs inline on the progress thread
          },
          f.errors.handler(), f.opts());
      if (before_start) f.cq.complete(1, 100);
      loop->start();
      if (!before_start) {
        BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
        f.cq.complete(1, 100);
      }
      BOOST_REQUIRE(wait_until([&] { return calls.load() >= 1; }));
      BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
      f.cq.complete(1000, 5);
      std::this_thread::sleep_for(100ms);
      on_reactor(f.r, [] {});
      BOOST_TEST(calls.load() == 1);  // never called again after close()
      BOOST_TEST(first_batch.load() == 32u);
      BOOST_TEST(f.cq.queued() == 100u - 32u + 5u);  // the rest was left in the CQ
      BOOST_TEST(loop->stats().completions == 32u);
      BOOST_TEST(f.errors.calls.load() == 0);
      loop->close();  // from the test thread too: no deadlock, no effect
      loop.reset();
    }
  }
}

BOOST_AUTO_TEST_CASE(poll_error_calls_the_error_handler_once) {
  for (int fail_at : {1, 2}) {  // the initial drain, or the drain after the first wakeup
    BOOST_TEST_CONTEXT("poll #" << fail_at << " fails") {
      Fixture f;
      f.cq.fail_poll_from(fail_at);
      CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts(16, "errcq"));
      loop.start();
      if (fail_at == 2) {
        BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
        f.cq.complete(1, 2);
      }
      BOOST_REQUIRE(wait_until([&] { return f.errors.calls.load() >= 1; }));
      BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));  // the loop died
      // More events do not produce more errors (or handler calls).
      f.cq.complete(10, 2);
      f.cq.raise_events(1);
      std::this_thread::sleep_for(100ms);
      on_reactor(f.r, [] {});
      BOOST_TEST(f.errors.calls.load() == 1);
      BOOST_TEST(f.errors.get().at(0) == "ibv_poll_cq failed");
      BOOST_TEST(f.rec.calls.load() == 0);
      BOOST_TEST(f.cq.polls() == fail_at);
      BOOST_TEST(f.log.contains(LogLevel::warn, {"errcq", "ibv_poll_cq failed"}), f.log.dump());
      loop.close();
      BOOST_TEST(f.errors.calls.load() == 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(arm_failure_calls_the_error_handler) {
  for (int fail_at : {1, 2}) {  // the first arm, or the re-arm after the first wakeup
    BOOST_TEST_CONTEXT("arm #" << fail_at << " fails") {
      Fixture f;
      f.cq.fail_arm_at(fail_at);
      CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
      loop.start();
      if (fail_at == 2) {
        BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
        f.cq.complete(1);
      }
      BOOST_REQUIRE(wait_until([&] { return f.errors.calls.load() >= 1; }));
      BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
      BOOST_TEST(f.errors.calls.load() == 1);
      BOOST_TEST(f.errors.get().at(0) == "ibv_req_notify_cq failed");
      BOOST_TEST(f.rec.calls.load() == 0);
      loop.close();
    }
  }
}

BOOST_AUTO_TEST_CASE(take_events_failure_calls_the_error_handler) {
  Fixture f;
  f.cq.fail_take();
  CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
  loop.start();
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  f.cq.complete(1);
  BOOST_REQUIRE(wait_until([&] { return f.errors.calls.load() >= 1; }));
  BOOST_TEST(wait_until([&] { return f.r.live_tasks() == 0; }));
  BOOST_TEST(f.errors.calls.load() == 1);
  BOOST_TEST(f.errors.get().at(0) == "ibv_get_cq_event failed");
  BOOST_TEST(loop.stats().wakeups == 1u);
  loop.close();
}

BOOST_AUTO_TEST_CASE(start_is_idempotent_and_close_before_start_prevents_it) {
  {
    Fixture f;
    CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
    loop.start();
    loop.start();
    BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
    BOOST_TEST(f.r.live_tasks() == 1u);
    BOOST_TEST(f.cq.arms() == 1);
    loop.close();
  }
  {
    Fixture f;
    CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
    loop.close();
    loop.start();
    on_reactor(f.r, [] {});
    std::this_thread::sleep_for(50ms);
    BOOST_TEST(f.r.live_tasks() == 0u);
    BOOST_TEST(f.cq.arms() == 0);
  }
}

BOOST_AUTO_TEST_CASE(reactor_stop_cancels_a_waiting_loop) {
  Fixture f;
  CompletionLoop loop(f.r, f.cq, f.rec.handler(), f.errors.handler(), f.opts());
  loop.start();
  BOOST_REQUIRE(wait_until([&] { return f.cq.idle(); }));
  f.r.stop(std::chrono::seconds(20));
  BOOST_TEST(f.r.live_tasks() == 0u);
  BOOST_TEST(!f.log.contains(LogLevel::warn, {"did not finish"}), f.log.dump());
  BOOST_TEST(f.errors.calls.load() == 0);  // cancellation is not an error
  loop.close();  // reactor stopped: runs inline
}

BOOST_AUTO_TEST_SUITE_END()
