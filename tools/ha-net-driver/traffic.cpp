#include "traffic.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>

#include "churn.hpp"
#include "logger.hpp"
#include "pattern.hpp"
#include "profiler_standin.hpp"

namespace hnd {
namespace {

constexpr std::uint8_t kGuardByte = 0xa5;
constexpr int kMaxGroup = 64;
constexpr std::uint64_t kMiB = 1ull << 20;
// Phase epochs: part of the pattern seed, so data of one phase never passes for another's.
constexpr std::uint32_t kEpochIntegrity = 1, kEpochPingpong = 100, kEpochBw = 200;

void* const kOptionalHint = reinterpret_cast<void*>(static_cast<std::uintptr_t>(NCCL_NET_OPTIONAL_RECV_COMPLETION));

// --outlive-peer: true once the peer aborted (or its management connection broke) during a data
// phase and this rank keeps driving its plugin for its own verdict.
bool outliving(const DataCtx& c) { return c.peer_abort && c.peer_abort->ns != 0; }

// A peer abort or a lost management connection (kind peer) seen in a data phase: rethrown unless
// --outlive-peer asks to keep going, in which case it is recorded and the grace period starts.
void peer_lost(DataCtx& c, const DriverError& e) {
  if (e.kind != Fail::peer || !c.peer_abort || c.opt.outlive_peer_s <= 0 || outliving(c)) throw e;
  c.peer_abort->ns = now_ns();
  c.peer_abort->unix_ms = wall_ms();
  c.peer_abort->reason = e.what();
  log::warn("%s; --outlive-peer: driving the plugin for up to %g s more", e.what(), c.opt.outlive_peer_s);
}

// Ends the phase with the peer's abort once the grace period of --outlive-peer is over.
void outlive_check(const DataCtx& c) {
  if (static_cast<double>(now_ns() - c.peer_abort->ns) / 1e9 > c.opt.outlive_peer_s)
    fail(Fail::peer, strf("%s (and no plugin error here within --outlive-peer %g s)", c.peer_abort->reason.c_str(),
                          c.opt.outlive_peer_s));
}

// Called once per polling turn: checks the peer for an abort and the deadline every 256 turns,
// and yields the CPU on turns without progress (like NCCL's proxy thread when idle), which keeps
// the two ranks responsive when they share cores.
struct Pacer {
  DataCtx& c;
  const Deadline& d;
  const char* what;
  unsigned n = 0;
  void tick(bool progress = false) {
    if (!progress) ::sched_yield();
    if ((++n & 255) != 0) return;
    check_now();
  }
  // The peer's abort and the phase deadline, without any plugin call.
  void check_now() {
    if (outliving(c)) {
      outlive_check(c);
    } else if (c.watch_peer || c.mgmt.has_message()) {  // an abort always ends the phase
      try {
        c.mgmt.check_abort();
      } catch (const DriverError& e) {
        peer_lost(c, e);
      }
    } else if (c.peer_gone_ns && *c.peer_gone_ns == 0 && c.mgmt.peer_closed()) {
      *c.peer_gone_ns = now_ns();
    }
    d.check(c.opt.timeout_s, what);
  }
};

void fill_message(std::uint8_t* p, std::size_t size, std::uint64_t seed) { pattern::fill(p, 0, size, seed); }

// Checks one received buffer: size reported by test(), payload (all of it or the sampled windows)
// and the guard after the expected size.
void check_received(const DataCtx& c, Integrity& st, std::uint8_t* p, std::size_t expected, int reported,
                    std::uint64_t seed, bool full, bool optional, std::uint64_t k, const Deadline& d) {
  ++st.messages_received;
  st.bytes_received += expected;
  if (reported < 0 || static_cast<std::size_t>(reported) != expected) {
    if (optional) ++st.optional_size_mismatches;
    else if (st.size_errors++ < 5)
      log::warn("message %llu: test() reported %d bytes, %zu were sent", static_cast<unsigned long long>(k), reported,
                expected);
  }
  pattern::Mismatch m;
  auto verify_all = [&] {
    m = {};
    if (full) pattern::verify(p, 0, expected, seed, &m);
    else pattern::for_each_window(expected, [&](std::size_t a, std::size_t b) { pattern::verify(p, a, b, seed, &m); });
  };
  verify_all();
  // An optional-completion receive may complete before its data is visible (NCCL's LL protocols
  // detect arrival from the data): poll the data like LL would, bounded by the deadline.
  while (m.bytes && optional && !d.expired()) verify_all();
  if (m.bytes) {
    if (st.mismatches++ < 5)
      log::warn("message %llu (%zu bytes): %llu wrong bytes, first at offset %zu (got 0x%02x, want 0x%02x)",
                static_cast<unsigned long long>(k), expected, static_cast<unsigned long long>(m.bytes), m.first,
                p[m.first], pattern::byte_at(seed, m.first));
    st.mismatched_bytes += m.bytes;
  }
  std::size_t guard_end = std::min(expected + Buffers::kGuard, c.buf.stride());
  for (std::size_t b = expected; b < guard_end; ++b)
    if (p[b] != kGuardByte) {
      if (st.overruns++ < 5)
        log::warn("message %llu (%zu bytes): receive buffer modified past the message at offset %zu",
                  static_cast<unsigned long long>(k), expected, b);
      break;
    }
}

// How a receive buffer is prepared before it is posted. The guard after the expected size is
// always set. Stale data must not pass verification: with per-message patterns it cannot; with a
// repeated pattern the checked bytes are first overwritten with the inverted pattern.
enum class Prep { guard_only, poison_all, poison_windows };

void prepare_recv(const DataCtx& c, std::uint8_t* p, std::size_t expected, std::uint64_t seed, Prep how) {
  std::size_t guard_end = std::min(expected + Buffers::kGuard, c.buf.stride());
  std::memset(p + expected, kGuardByte, guard_end - expected);
  if (how == Prep::poison_all) pattern::fill(p, 0, expected, seed, 0xff);
  if (how == Prep::poison_windows)
    pattern::for_each_window(expected, [&](std::size_t a, std::size_t b) { pattern::fill(p, a, b, seed, 0xff); });
}

struct StreamSpec {
  const char* phase;
  std::vector<std::size_t> sizes;  // message k has size sizes[k % n]
  std::uint64_t send_messages;     // this rank sends (at least, with min_seconds) ...
  std::uint64_t recv_messages;     // ... and receives that many
  int window, group;
  bool per_message_pattern;  // false: every message uses key 0 and send slots are filled once
  bool full_verify;
  std::uint32_t epoch;
  std::size_t recv_size;  // size of every posted receive buffer (the largest --sizes entry, as NCCL
                          // posts its whole slot whatever the sender sends)
  double min_seconds = 0;  // > 0: each sender keeps going until this long and tells its receiver
                           // the final count over the management connection (see run_stream)
  const std::string* stop_file = nullptr;  // with min_seconds: ... and until this file exists
  Timeline* timeline = nullptr;
  const std::vector<IdleWindow>* idle = nullptr;  // --idle windows (sorted), from the phase start
  Churn* churn = nullptr;  // --churn: stepped every turn; the phase ends when it is done too
};

struct LastGroup {
  int n = 0;
  void* data[kMaxGroup];
  int sizes[kMaxGroup];
  void* mh[kMaxGroup];
};

// A completed receive group as iflush takes it: buffers, the sizes test() returned, handles.
LastGroup group_of(const DataCtx& c, int n, const int* slots, const int* sizes) {
  LastGroup g;
  g.n = n;
  for (int i = 0; i < n; ++i) {
    g.data[i] = c.buf.recv_slot(slots[i]);
    g.sizes[i] = sizes[i] < 0 ? 0 : sizes[i];
    g.mh[i] = c.recv_mh;
  }
  return g;
}

// --flush-each: what NCCL does for a GPU receive before the data is used: iflush the group and
// wait for the flush. A NULL request means "nothing to flush".
void flush_group(DataCtx& c, LastGroup& g, Integrity& st, const Deadline& d) {
  void* req = nullptr;
  check(c.net.iflush(c.recv_comm, g.n, g.data, g.sizes, g.mh, &req), "iflush");
  if (!req) return;
  wait_request(c.net, req, nullptr, d, c.opt.timeout_s, "test(iflush)");
  ++st.flushes;
}

// isend of one message: its request, or NULL ("try again", counted) when the plugin cannot take
// it now (e.g. no clear-to-send from the receiver yet).
// `step`: the profiler handle NCCL would pass (profiler_standin.hpp), in flight from the message's
// first call until test() reports its request done: a NULL return leaves it in flight, as NCCL's
// proxy step stays open (posted before its first isend, ended when the request is done; the call
// is repeated with the same step), and a fused comm may hold it in a member's part meanwhile;
// null: none (the latency phase).
void* post_isend(DataCtx& c, void* data, std::size_t size, int tag, Integrity& st, prof::StepHandle* step = nullptr) {
  void* req = nullptr;
  if (step) step->in_flight = true;
  check(c.net.isend(c.send_comm, data, size, tag, c.send_mh, &req, step), "isend");
  if (!req) ++st.isend_retries;
  return req;
}

// irecv of n buffers, with NCCL's NCCL_NET_OPTIONAL_RECV_COMPLETION hint preset in *request when
// `optional`: the request, or NULL ("try again", counted). A plugin must overwrite the hint.
void* post_irecv(DataCtx& c, int n, void** data, std::size_t* sizes, int* tags, void** mhs, bool optional,
                 Integrity& st, prof::StepHandle* const* steps = nullptr) {
  void* req = optional ? kOptionalHint : nullptr;
  void* phandles[kMaxGroup] = {};
  for (int i = 0; steps && i < n; ++i) {
    steps[i]->in_flight = true;
    phandles[i] = steps[i];
  }
  check(c.net.irecv(c.recv_comm, n, data, sizes, tags, mhs, &req, steps ? phandles : nullptr), "irecv");
  if (req == kOptionalHint)
    fail(Fail::plugin, "irecv left NCCL_NET_OPTIONAL_RECV_COMPLETION in *request (it must store a real request or NULL)");
  if (!req) ++st.irecv_retries;  // the steps stay in flight, as post_isend's
  return req;
}

struct StreamOut {
  std::int64_t recv_first_post_ns = 0, recv_last_done_ns = 0;
  LastGroup last;
};

// One stream per direction: this rank sends s.send_messages and receives s.recv_messages, W in
// flight each way. Counters go to st as they happen (so they survive an error). One polling turn
// (turn()) posts what the window allows, tests what is outstanding and verifies what arrived,
// like one pass of NCCL's proxy progress loop.
//
// With s.min_seconds > 0 the length is open-ended, and each sender decides it for its direction:
// its count starts at the given number ("limit"); whenever it has posted all but half an
// extension (E messages) below its limit, it either raises the limit by E, if min_seconds have not
// passed yet, or declares the limit final. Each new limit goes to the receiver over the management
// connection (MsgType::extend, "N" or "N final") before the sender may use it, and the receiver
// never posts a receive at or beyond the limit it knows, so no receive is ever left posted without
// its message (and no send without its receive). The receiver's lead is E/2 messages (>= 2 W).
class Stream {
 public:
  Stream(DataCtx& c, const StreamSpec& s, Integrity& st);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // False once both directions reached their final limit and the churn (if any) is done.
  bool active() const;
  void turn();
  StreamOut finish();

 private:
  struct SendOp {
    void* req;
    std::uint64_t k;
    int slot;
    std::size_t size;
  };
  struct RecvOp {
    void* req;
    std::uint64_t k0;
    int n;
    int slot[kMaxGroup];
    bool optional;
  };

  std::size_t size_of(std::uint64_t k) const { return s_.sizes[k % s_.sizes.size()]; }
  int tag_of(std::uint64_t k) const { return static_cast<int>(k % static_cast<std::uint64_t>(G_)); }
  std::uint64_t key_of(std::uint64_t k) const { return s_.per_message_pattern ? k : 0; }
  std::uint64_t round_up(std::uint64_t v) const {
    const auto g = static_cast<std::uint64_t>(G_);
    return (v + g - 1) / g * g;
  }
  void extend_send_limit();
  void announce(std::uint64_t limit, bool final);
  void read_limits();
  void take_idle(const IdleWindow& w);
  void post_sends();
  void post_recvs();
  void test_sends();
  void test_recvs();
  void complete_recv(const RecvOp& op, const int* sizes);
  void step_churn();

  DataCtx& c_;
  const StreamSpec& s_;
  Integrity& st_;
  const int W_, G_, RW_;
  const int peer_;
  const bool optional_ok_;
  const Prep prep_;
  const bool open_ended_;
  const std::uint64_t extension_;
  std::uint64_t send_limit_, recv_limit_;
  bool send_final_, recv_final_;
  std::deque<SendOp> sends_;
  std::deque<RecvOp> recvs_;
  std::vector<int> free_send_, free_recv_;
  // NCCL's profiler handle of each send / receive slot (profiler_standin.hpp): sized once.
  std::vector<prof::StepHandle> send_steps_, recv_steps_;
  std::optional<SendOp> pend_send_;  // taken a slot, but isend said "try again"
  std::optional<RecvOp> pend_recv_;
  std::uint64_t next_send_ = 0, next_recv_ = 0, sends_done_ = 0, recvs_done_ = 0;
  Deadline d_;
  std::string what_;
  Pacer pace_;
  std::int64_t t0_ = 0, phase_t0_ = 0;
  std::size_t next_idle_ = 0;
  std::vector<IdleTaken> idle_local_;
  bool progress_ = true;
  unsigned turn_ = 0;
  StreamOut out_;
};

Stream::Stream(DataCtx& c, const StreamSpec& s, Integrity& st)
    : c_(c),
      s_(s),
      st_(st),
      W_(s.window),
      G_(s.group),
      RW_(std::max(1, s.window / s.group)),
      peer_(1 - c.rank),
      optional_ok_(c.opt.optional_recv && c.net.version() >= 9),
      prep_(!s.full_verify ? Prep::poison_windows : s.per_message_pattern ? Prep::guard_only : Prep::poison_all),
      open_ended_(s.min_seconds > 0),
      extension_(round_up(std::max<std::uint64_t>(4 * static_cast<std::uint64_t>(s.window), 32))),
      send_limit_(s.send_messages),
      recv_limit_(s.recv_messages),
      send_final_(!open_ended_ || send_limit_ == 0),
      recv_final_(!open_ended_ || recv_limit_ == 0),
      d_(c.opt.timeout_s),
      what_(std::string("in the ") + s.phase + " phase"),
      pace_{c, d_, what_.c_str()} {
  st_.ran = true;
  send_steps_ = std::vector<prof::StepHandle>(static_cast<std::size_t>(W_));
  recv_steps_ = std::vector<prof::StepHandle>(static_cast<std::size_t>(W_));
  for (int i = W_ - 1; i >= 0; --i) {
    free_send_.push_back(i);
    free_recv_.push_back(i);
  }
  if (!s_.per_message_pattern) {
    const std::size_t max_size = *std::max_element(s_.sizes.begin(), s_.sizes.end());
    for (int i = 0; i < W_; ++i) fill_message(c_.buf.send_slot(i), max_size, pattern::seed(c_.rank, s_.epoch, 0));
  }
  d_ = Deadline(c_.opt.timeout_s);  // the phase's bound starts after the send slots were filled
  t0_ = now_ns();
  // --idle windows count from the phase start (the timeline's, when there is one).
  phase_t0_ = s_.timeline ? s_.timeline->start_ns : t0_;
  if (s_.churn) s_.churn->start(phase_t0_);
}

bool Stream::active() const {
  return sends_done_ < send_limit_ || !send_final_ || recvs_done_ < recv_limit_ || !recv_final_ ||
         (s_.churn && !s_.churn->done() && !outliving(c_));
}

void Stream::turn() {
  pace_.tick(progress_);
  progress_ = false;
  ++turn_;
  if (s_.idle && next_idle_ < s_.idle->size() && now_ns() - phase_t0_ >= (*s_.idle)[next_idle_].at_ms * 1000000) {
    take_idle((*s_.idle)[next_idle_++]);
    progress_ = true;  // no sched_yield right after the pause
  }
  if (!send_final_ && next_send_ + extension_ / 2 >= send_limit_) extend_send_limit();
  if (!recv_final_ && (next_recv_ >= recv_limit_ || (turn_ & 15) == 0)) read_limits();
  post_sends();
  post_recvs();
  test_sends();
  test_recvs();
  step_churn();
}

StreamOut Stream::finish() {
  st_.seconds = static_cast<double>(now_ns() - t0_) / 1e9;
  return out_;
}

// The sender's side of the open-ended length: a new limit E further, or the current one final.
void Stream::extend_send_limit() {
  if (static_cast<double>(now_ns() - t0_) / 1e9 >= s_.min_seconds &&
      (!s_.stop_file || s_.stop_file->empty() || ::access(s_.stop_file->c_str(), F_OK) == 0)) {
    send_final_ = true;
  } else {
    send_limit_ = round_up(send_limit_ + extension_);
  }
  announce(send_limit_, send_final_);
}

void Stream::announce(std::uint64_t limit, bool final) {
  if (outliving(c_)) return;
  try {
    c_.mgmt.send(MsgType::extend, strf("%llu%s", static_cast<unsigned long long>(limit), final ? " final" : ""));
  } catch (const DriverError& e) {
    peer_lost(c_, e);
  }
}

// The receiver's side: read the limits the peer announced (they precede anything else it sends).
void Stream::read_limits() {
  while (!recv_final_ && !outliving(c_)) {
    std::optional<std::string> m;
    try {
      m = c_.mgmt.try_recv(MsgType::extend);
    } catch (const DriverError& e) {
      peer_lost(c_, e);
    }
    if (!m) return;
    const auto limit = wire::parse_limit(*m);
    if (!limit || limit->messages < recv_limit_)
      fail(Fail::peer, "management protocol: bad stream limit '" + *m + "' from the peer");
    recv_limit_ = limit->messages;
    recv_final_ = limit->final;
  }
}

// --idle: at the start of a turn past a window's AT, this rank makes no plugin call for its
// duration (an NCCL proxy busy elsewhere). The management connection (the peer's stream limits
// and abort) and the phase deadline are still checked every 20 ms; the watchdog is not involved
// (no plugin call is running). A window whose AT comes after the stream ended is not taken.
void Stream::take_idle(const IdleWindow& w) {
  std::vector<IdleTaken>& taken = c_.idle_taken ? *c_.idle_taken : idle_local_;
  IdleTaken& t = taken.emplace_back();
  const std::int64_t start = now_ns(), end = start + w.duration_ms * 1000000;
  t.at_ms = w.at_ms;
  t.duration_ms = w.duration_ms;
  t.start_ms = (start - phase_t0_) / 1000000;
  t.start_unix_ms = t.end_unix_ms = wall_ms();
  log::info("idle: no plugin call for %lld ms from %lld ms into the %s phase", static_cast<long long>(w.duration_ms),
            static_cast<long long>(t.start_ms), s_.phase);
  for (std::int64_t left = end - start; left > 0; left = end - now_ns()) {
    ::usleep(static_cast<useconds_t>(std::min<std::int64_t>(left / 1000, 20000)));
    t.end_unix_ms = wall_ms();
    read_limits();  // the peer's stream limits, so that an abort queued behind them is seen
    pace_.check_now();
  }
  t.end_unix_ms = wall_ms();
  log::info("idle: resuming after %lld ms", static_cast<long long>(t.end_unix_ms - t.start_unix_ms));
}

// Post sends, in message order; a NULL request means "try again next turn".
void Stream::post_sends() {
  while (next_send_ < send_limit_ && sends_.size() < static_cast<std::size_t>(W_)) {
    if (!pend_send_) {
      SendOp op{nullptr, next_send_, free_send_.back(), size_of(next_send_)};
      free_send_.pop_back();
      if (s_.per_message_pattern) {
        std::uint8_t* p = c_.buf.send_slot(op.slot);
        const std::uint64_t seed = pattern::seed(c_.rank, s_.epoch, key_of(op.k));
        if (s_.full_verify) fill_message(p, op.size, seed);
        else pattern::for_each_window(op.size, [&](std::size_t a, std::size_t b) { pattern::fill(p, a, b, seed); });
      }
      pend_send_ = op;
    }
    void* req = post_isend(c_, c_.buf.send_slot(pend_send_->slot), pend_send_->size, tag_of(pend_send_->k), st_,
                           &send_steps_[static_cast<std::size_t>(pend_send_->slot)]);
    if (!req) break;
    pend_send_->req = req;
    progress_ = true;
    sends_.push_back(*pend_send_);
    pend_send_.reset();
    ++next_send_;
  }
}

// Post grouped receives of recv_size buffers (larger than most messages, as in NCCL).
void Stream::post_recvs() {
  while (next_recv_ < recv_limit_ && recvs_.size() < static_cast<std::size_t>(RW_)) {
    if (!pend_recv_) {
      RecvOp op{};
      op.k0 = next_recv_;
      op.n = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(G_), recv_limit_ - next_recv_));
      op.optional = optional_ok_ && op.n == 1;
      for (int i = 0; i < op.n; ++i) {
        op.slot[i] = free_recv_.back();
        free_recv_.pop_back();
        std::uint64_t k = op.k0 + static_cast<std::uint64_t>(i);
        prepare_recv(c_, c_.buf.recv_slot(op.slot[i]), size_of(k), pattern::seed(peer_, s_.epoch, key_of(k)), prep_);
      }
      pend_recv_ = op;
    }
    RecvOp& op = *pend_recv_;
    void* data[kMaxGroup];
    std::size_t sizes[kMaxGroup];
    int tags[kMaxGroup];
    void* mhs[kMaxGroup];
    prof::StepHandle* steps[kMaxGroup];
    for (int i = 0; i < op.n; ++i) {
      steps[i] = &recv_steps_[static_cast<std::size_t>(op.slot[i])];
      data[i] = c_.buf.recv_slot(op.slot[i]);
      sizes[i] = s_.recv_size;
      tags[i] = tag_of(op.k0 + static_cast<std::uint64_t>(i));
      mhs[i] = c_.recv_mh;
    }
    if (out_.recv_first_post_ns == 0) out_.recv_first_post_ns = now_ns();
    void* req = post_irecv(c_, op.n, data, sizes, tags, mhs, op.optional, st_, steps);
    if (!req) break;
    op.req = req;
    progress_ = true;
    next_recv_ += static_cast<std::uint64_t>(op.n);
    recvs_.push_back(op);
    pend_recv_.reset();
  }
}

// Test sends (oldest only, like NCCL, unless --test-order all).
void Stream::test_sends() {
  Timeline* tl = s_.timeline;
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0, size = -1;
    check(c_.net.test(it->req, &done, &size), "test(isend)");
    if (!done) {
      if (!c_.opt.test_all) break;
      ++it;
      continue;
    }
    send_steps_[static_cast<std::size_t>(it->slot)].in_flight = false;  // NCCL's step ends with it
    if (tl) tl->add(tl->send, now_ns(), 1, it->size);
    progress_ = true;
    if (size != -1 && static_cast<std::size_t>(size) != it->size) ++st_.send_size_mismatches;
    ++st_.messages_sent;
    st_.bytes_sent += it->size;
    ++sends_done_;
    free_send_.push_back(it->slot);
    it = sends_.erase(it);
  }
}

// Test receives, in the same order; each completed group is verified and its slots freed.
void Stream::test_recvs() {
  for (auto it = recvs_.begin(); it != recvs_.end();) {
    int done = 0;
    int sizes[kMaxGroup];
    std::fill(sizes, sizes + it->n, -1);
    check(c_.net.test(it->req, &done, sizes), "test(irecv)");
    if (!done) {
      if (!c_.opt.test_all) break;
      ++it;
      continue;
    }
    for (int i = 0; i < it->n; ++i) recv_steps_[static_cast<std::size_t>(it->slot[i])].in_flight = false;
    complete_recv(*it, sizes);
    recvs_done_ += static_cast<std::uint64_t>(it->n);
    it = recvs_.erase(it);
    if (c_.after_recv) c_.after_recv(recvs_done_);
  }
}

// A receive group test() reported done, with the sizes it returned: (--flush-each: flush it,)
// check every message of it, free its slots, tell the plugin the buffers were consumed.
void Stream::complete_recv(const RecvOp& op, const int* sizes) {
  out_.recv_last_done_ns = now_ns();
  progress_ = true;
  LastGroup group = group_of(c_, op.n, op.slot, sizes);
  if (c_.opt.flush_each) flush_group(c_, group, st_, d_);
  bool any_bytes = false;
  std::uint64_t group_bytes = 0;
  for (int i = 0; i < op.n; ++i) {
    std::uint64_t k = op.k0 + static_cast<std::uint64_t>(i);
    check_received(c_, st_, c_.buf.recv_slot(op.slot[i]), size_of(k), sizes[i],
                   pattern::seed(peer_, s_.epoch, key_of(k)), s_.full_verify, op.optional, k, d_);
    group_bytes += size_of(k);
    any_bytes = any_bytes || sizes[i] > 0;
    free_recv_.push_back(op.slot[i]);
  }
  if (Timeline* tl = s_.timeline)
    tl->add(tl->recv, out_.recv_last_done_ns, static_cast<std::uint64_t>(op.n), group_bytes);
  if (any_bytes) out_.last = group;  // the last receive that carried data, for the iflush
  // NCCL 2.30 tells the plugin the buffers were consumed, after test() reported done.
  if (c_.net.has_irecvConsumed()) check(c_.net.irecvConsumed(c_.recv_comm, op.n, op.req), "irecvConsumed");
}

// --churn: one step of the current extra pair (non-blocking calls only).
void Stream::step_churn() {
  Churn* churn = s_.churn;
  if (!churn || churn->done() || outliving(c_)) return;
  try {
    progress_ = churn->step() || progress_;
  } catch (const DriverError& e) {
    if (e.kind != Fail::peer) throw;
    peer_lost(c_, e);
  }
}

StreamOut run_stream(DataCtx& c, const StreamSpec& s, Integrity& st) {
  Stream stream(c, s, st);
  while (stream.active()) stream.turn();
  return stream.finish();
}

std::size_t largest(const std::vector<std::size_t>& v) { return *std::max_element(v.begin(), v.end()); }

std::vector<std::size_t> unique_sizes(const std::vector<std::size_t>& in) {
  std::vector<std::size_t> out;
  for (auto s : in)
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

// One request for the latency phase.
struct Op {
  void* req = nullptr;
  bool posted = false, done = false;
  int size = -1;
};

void try_isend(DataCtx& c, Op& op, std::size_t size, Integrity& st) {
  if (op.posted) return;
  op.req = post_isend(c, c.buf.send_slot(0), size, 0, st);
  op.posted = op.req != nullptr;
}

void try_irecv(DataCtx& c, Op& op, int slot, std::size_t cap, Integrity& st, bool optional) {
  if (op.posted) return;
  void* data = c.buf.recv_slot(slot);
  int tag = 0;
  void* mh = c.recv_mh;
  op.req = post_irecv(c, 1, &data, &cap, &tag, &mh, optional, st);
  op.posted = op.req != nullptr;
}

void poll(DataCtx& c, Op& op, const char* what) {
  if (!op.posted || op.done) return;
  int done = 0;
  check(c.net.test(op.req, &done, &op.size), what);
  op.done = done != 0;
}

// RTT/2 minimum, median and 99th percentile (nearest rank) of the timed round trips.
void set_latency(LatResult& res, std::vector<double>& rtt_us) {
  if (rtt_us.empty()) return;
  std::sort(rtt_us.begin(), rtt_us.end());
  auto at = [&](double q) {
    auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(rtt_us.size())));
    return rtt_us[std::min(rtt_us.size() - 1, i == 0 ? 0 : i - 1)] / 2;
  };
  res.min_us = rtt_us.front() / 2;
  res.median_us = at(0.5);
  res.p99_us = at(0.99);
}

// The ping-pong of one message size: rank 0 sends and waits for the reply, rank 1 waits and
// replies; warm-up round trips first, then --iters timed ones (capped at 256 MiB per size).
//
// Receives: with --lat-ahead N >= 2 each rank keeps N posted and posts the next one right after
// its own send, as NCCL's proxy keeps its receive steps posted ahead; every clear-to-send then
// leaves a round early. With 1, each is posted just in time: rank 0 right before its ping,
// rank 1 right before its reply, so its clear-to-send goes out in front of that message.
// Round k receives into slot k % (N + 1).
class PingPong {
 public:
  PingPong(DataCtx& c, std::size_t size, std::uint32_t epoch);
  PingPong(const PingPong&) = delete;
  PingPong& operator=(const PingPong&) = delete;
  LatResult run();

 private:
  static constexpr int kWarmup = 2;
  // Warm-up round trips check every byte; timed ones check the sampled windows only.
  Prep prep_for(int i) const { return i < kWarmup ? Prep::poison_all : Prep::poison_windows; }
  void post_until(int rounds);
  void wait_for(Op* s, Op* r);
  Op send(int i);
  void finish_recv(Op& r, int slot, int i);
  void round_rank0(int i, Op& r);
  void round_rank1(int i, Op& r);

  DataCtx& c_;
  const std::size_t size_;
  const bool optional_;
  LatResult res_;
  Integrity& st_;
  int total_ = 0;
  std::uint64_t peer_seed_ = 0;
  const std::size_t cap_;
  std::vector<double> rtt_us_;
  Deadline d_;
  std::string what_;
  Pacer pace_;
  const int ahead_, nslots_;
  const bool just_in_time_;
  std::deque<Op> recvs_;  // the posted receives, oldest (the current round's) first
  int posted_ = 0;        // rounds whose receive is posted
  std::int64_t last_done_ = 0;
};

PingPong::PingPong(DataCtx& c, std::size_t size, std::uint32_t epoch)
    : c_(c),
      size_(size),
      optional_(c.opt.optional_recv && c.net.version() >= 9),
      st_(res_.counters),
      cap_(largest(c.opt.sizes)),
      d_(c.opt.timeout_s),
      what_(strf("in ping-pong of %zu bytes", size)),
      pace_{c, d_, what_.c_str()},
      ahead_(c.opt.lat_ahead),
      nslots_(c.opt.lat_ahead + 1),
      just_in_time_(c.opt.lat_ahead == 1) {
  res_.size = size;
  st_.ran = true;
  const std::uint64_t cap_iters = std::max<std::uint64_t>(5, (256 * kMiB) / std::max<std::size_t>(size, 1));
  res_.iters = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(c.opt.iters), cap_iters));
  total_ = kWarmup + res_.iters;
  peer_seed_ = pattern::seed(1 - c.rank, epoch, 0);
  fill_message(c.buf.send_slot(0), size, pattern::seed(c.rank, epoch, 0));
  d_ = Deadline(c.opt.timeout_s);  // the bound starts after the message was filled
}

LatResult PingPong::run() {
  if (!just_in_time_ || c_.rank == 1) post_until(ahead_);
  for (int i = 0; i < total_; ++i) {
    // Rank 0 posts just in time before taking the round's receive (the deque is empty before).
    if (c_.rank == 0 && just_in_time_) post_until(i + 1);
    Op& r = recvs_.front();
    if (c_.rank == 0) round_rank0(i, r);
    else round_rank1(i, r);
    finish_recv(r, i % nslots_, i);
    recvs_.pop_front();
  }
  set_latency(res_, rtt_us_);
  return res_;
}

// Rank 0's round trip: from its send to the reply's completion.
void PingPong::round_rank0(int i, Op& r) {
  std::int64_t t0 = now_ns();
  Op s = send(i);
  wait_for(&s, &r);
  if (i >= kWarmup) rtt_us_.push_back(static_cast<double>(now_ns() - t0) / 1e3);
}

// Rank 1's round trip: from one receive completion to the next.
void PingPong::round_rank1(int i, Op& r) {
  wait_for(nullptr, &r);
  std::int64_t t = now_ns();
  if (i > kWarmup) rtt_us_.push_back(static_cast<double>(t - last_done_) / 1e3);
  last_done_ = t;
  if (just_in_time_) post_until(i + 2);
  Op s = send(i);
  wait_for(&s, nullptr);
}

// Posts the receives of rounds [posted_, rounds).
void PingPong::post_until(int rounds) {
  for (; posted_ < std::min(rounds, total_); ++posted_) {
    prepare_recv(c_, c_.buf.recv_slot(posted_ % nslots_), size_, peer_seed_, prep_for(posted_));
    Op& r = recvs_.emplace_back();
    while (!r.posted) {
      try_irecv(c_, r, posted_ % nslots_, cap_, st_, optional_);
      if (!r.posted) pace_.tick();
    }
  }
}

// Polls until both are done; either may be null.
void PingPong::wait_for(Op* s, Op* r) {
  for (;;) {
    if (s) poll(c_, *s, "test(isend)");
    if (r) poll(c_, *r, "test(irecv)");
    if ((!s || s->done) && (!r || r->done)) return;
    pace_.tick();
  }
}

// Posts this rank's message of round i.
Op PingPong::send(int i) {
  Op s;
  while (!s.posted) {
    try_isend(c_, s, size_, st_);
    if (!s.posted) pace_.tick();
  }
  if (!just_in_time_) post_until(i + 1 + ahead_);
  ++st_.messages_sent;
  st_.bytes_sent += size_;
  return s;
}

void PingPong::finish_recv(Op& r, int slot, int i) {
  check_received(c_, st_, c_.buf.recv_slot(slot), size_, r.size, peer_seed_, i < kWarmup, optional_,
                 static_cast<std::uint64_t>(i), d_);
  if (c_.net.has_irecvConsumed()) check(c_.net.irecvConsumed(c_.recv_comm, 1, r.req), "irecvConsumed");
}

}  // namespace

namespace {
// A region of `bytes`: a memfd's shared mapping (its fd in *fd), or anonymous memory. Backed at
// once (MAP_POPULATE), as NCCL's buffers are when it registers them (cudaMalloc'd device memory,
// cudaHostAlloc'd host memory): a regMr then costs what the registration costs, not first-touch
// page faults.
void* map_region(std::size_t bytes, bool memfd, UniqueFd* fd, const char* name) {
  if (!memfd)
    return ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  fd->reset(::memfd_create(name, MFD_CLOEXEC));
  if (!*fd || ::ftruncate(fd->get(), static_cast<off_t>(bytes)) != 0) return MAP_FAILED;
  return ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd->get(), 0);
}
}  // namespace

Buffers::Buffers(std::size_t max_size, int slots, bool memfd) : slots_(slots) {
  stride_ = (max_size + kGuard + 4095) / 4096 * 4096;
  bytes_ = stride_ * static_cast<std::size_t>(slots);
  void* s = map_region(bytes_, memfd, &send_fd_, "ha-net-driver send");
  void* r = map_region(bytes_, memfd, &recv_fd_, "ha-net-driver recv");
  if (s == MAP_FAILED || r == MAP_FAILED) {
    const int err = errno;
    if (s != MAP_FAILED) ::munmap(s, bytes_);
    if (r != MAP_FAILED) ::munmap(r, bytes_);
    fail(Fail::usage, strf("cannot allocate 2 x %zu bytes of buffers%s: %s", bytes_, memfd ? " (memfd)" : "",
                           std::strerror(err)));
  }
  send_ = static_cast<std::uint8_t*>(s);
  recv_ = static_cast<std::uint8_t*>(r);
}

Buffers::~Buffers() {
  ::munmap(send_, bytes_);
  ::munmap(recv_, bytes_);
}

void wait_request(Plugin& net, void* req, int* sizes, const Deadline& d, double timeout_s, const char* what) {
  for (;;) {
    int done = 0;
    check(net.test(req, &done, sizes), what);
    if (done) return;
    d.check(timeout_s, what);
  }
}

void run_integrity(DataCtx& c, Integrity& st) {
  const bool one_way = c.opt.one_way;
  StreamSpec s{"integrity", c.opt.sizes,
               one_way && c.rank == 0 ? 0 : c.opt.messages,  // --one-way: rank 1 -> rank 0 only
               one_way && c.rank == 1 ? 0 : c.opt.messages,
               c.opt.inflight, c.opt.group, true, !c.opt.sampled_verify, kEpochIntegrity, largest(c.opt.sizes), c.opt.min_seconds,
               &c.opt.stop_file, c.timeline, &c.opt.idle, c.churn};
  StreamOut out = run_stream(c, s, st);
  if (c.timeline) c.timeline->finish(now_ns());
  if (outliving(c))  // the stream ended here without a plugin error, but the peer is gone
    fail(Fail::peer, c.peer_abort->reason + " (the stream completed here nevertheless)");
  // iflush of the last received group that carried data, with the sizes test() returned (what
  // NCCL passes; NCCL flushes only receives of more than 0 bytes).
  if (out.last.n > 0) {
    void* req = nullptr;
    check(c.net.iflush(c.recv_comm, out.last.n, out.last.data, out.last.sizes, out.last.mh, &req), "iflush");
    if (!req) {
      st.flush = "null request";
    } else {
      Deadline d(c.opt.timeout_s);
      wait_request(c.net, req, nullptr, d, c.opt.timeout_s, "test(iflush)");
      st.flush = "completed";
    }
  }
}

std::vector<LatResult> run_pingpong(DataCtx& c) {
  std::vector<LatResult> results;
  for (std::size_t size : unique_sizes(c.opt.sizes)) {
    c.mgmt.barrier(strf("pingpong %zu", size), c.opt.timeout_s);
    results.push_back(PingPong(c, size, kEpochPingpong + static_cast<std::uint32_t>(results.size())).run());
  }
  return results;
}

std::vector<BwResult> run_bw(DataCtx& c) {
  std::vector<BwResult> results;
  for (std::size_t size : unique_sizes(c.opt.sizes)) {
    c.mgmt.barrier(strf("bw %zu", size), c.opt.timeout_s);
    std::uint64_t cap = std::max<std::uint64_t>(1, (1024 * kMiB) / std::max<std::size_t>(size, 1));
    std::uint64_t want = c.opt.bw_bytes ? c.opt.bw_bytes / std::max<std::size_t>(size, 1) : c.opt.bw_messages;
    std::uint64_t msgs = std::max<std::uint64_t>(static_cast<std::uint64_t>(c.opt.inflight), std::min(want, cap));
    StreamSpec s{"bandwidth", {size}, msgs, msgs, c.opt.inflight, c.opt.group, false, false,
                 kEpochBw + static_cast<std::uint32_t>(results.size()), largest(c.opt.sizes), 0, nullptr, nullptr, nullptr};
    BwResult r;
    StreamOut out = run_stream(c, s, r.counters);
    r.size = size;
    r.messages = r.counters.messages_received;
    r.bytes = r.counters.bytes_received;
    r.seconds = static_cast<double>(out.recv_last_done_ns - out.recv_first_post_ns) / 1e9;
    if (r.seconds > 0) {
      r.mib_s = static_cast<double>(r.bytes) / static_cast<double>(kMiB) / r.seconds;
      r.msgs_per_s = static_cast<double>(r.messages) / r.seconds;
    }
    results.push_back(r);
  }
  return results;
}

}  // namespace hnd
