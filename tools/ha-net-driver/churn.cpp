#include "churn.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <cstring>

#include "logger.hpp"
#include "pattern.hpp"

namespace hnd {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kMsg = 64;
constexpr std::size_t kGuard = 64;
constexpr std::uint8_t kChurnGuardByte = 0x5a;
constexpr std::uint32_t kEpochChurn = 400;  // pattern epoch: churn data never passes for the stream's

double ms_between(std::int64_t a_ns, std::int64_t b_ns) { return static_cast<double>(b_ns - a_ns) / 1e6; }

}  // namespace

Churn::Churn(Plugin& net, Mgmt& mgmt, const Options& o, int rank, ChurnStats& st)
    : net_(net), mgmt_(mgmt), o_(o), rank_(rank), dev_(o.churn_dev >= 0 ? o.churn_dev : o.dev), st_(st) {
  void* m = ::mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail(Fail::usage, "cannot allocate the churn buffers");
  mem_ = static_cast<std::uint8_t*>(m);
  std::memset(mem_, 0, 2 * kPage);  // resident now, not in the middle of the phase
  st_.ran = true;
  st_.target = o.churn;
  st_.dev = dev_;
}

Churn::~Churn() { ::munmap(mem_, 2 * kPage); }

void Churn::start(std::int64_t phase_t0_ns) {
  t0_ns_ = phase_t0_ns;
  spacing_ns_ = o_.min_seconds > 0 ? static_cast<std::int64_t>(o_.min_seconds * 1e9 / o_.churn) : 0;
  st_.spacing_ms = static_cast<double>(spacing_ns_) / 1e6;
}

const char* Churn::state_name() const {
  switch (state_) {
    case State::idle: return "idle";
    case State::wait_peer: return "waiting for the peer's handle";
    case State::connecting: return "connect/accept";
    case State::traffic: return "moving its message";
    case State::backoff: return "waiting to open it again";
  }
  return "?";
}

void Churn::read_inbox() {
  while (auto m = mgmt_.try_recv(MsgType::churn)) {
    auto c = wire::parse_churn(*m);
    if (!c || c->pair < next_ || (c->kind == 'h' && c->body.size() != NCCL_NET_HANDLE_MAXSIZE))
      fail(Fail::peer, "management protocol: bad churn message from the peer");
    (c->kind == 'h' ? inbox_ : aborts_)[Key{c->pair, c->attempt}] = std::move(c->body);
  }
}

void Churn::abandon(std::int64_t now, const std::string& why, bool tell_peer) {
  if (++st_.connect_failures <= 5)
    st_.failure_lines.push_back(strf("pair %llu attempt %u: %s", static_cast<unsigned long long>(next_), attempt_, why.c_str()));
  log::warn("churn pair %llu attempt %u failed (%s); opening it again in 1 s", static_cast<unsigned long long>(next_),
            attempt_, why.c_str());
  if (tell_peer) mgmt_.send(MsgType::churn, strf("x %llu %u\n", static_cast<unsigned long long>(next_), attempt_) + why);
  if (io_.smh) check(net_.deregMr(send_, io_.smh), "deregMr (churn send comm)");
  if (io_.rmh) check(net_.deregMr(recv_, io_.rmh), "deregMr (churn recv comm)");
  if (send_) check(net_.closeSend(send_), "closeSend (churn, failed attempt)");
  if (!send_ && connecting_) {
    draining_.push_back(std::move(peer_handle_));
    ++st_.drained_connects;
  }
  connecting_ = false;
  if (recv_) check(net_.closeRecv(recv_), "closeRecv (churn, failed attempt)");
  if (listen_) check(net_.closeListen(listen_), "closeListen (churn, failed attempt)");
  send_ = recv_ = listen_ = nullptr;
  io_ = PairMessage{};
  inbox_.erase(Key{next_, attempt_});
  ++attempt_;
  retry_at_ = now + 1000000000LL;
  state_ = State::backoff;
}

bool Churn::open_listener(std::int64_t now) {
  if (state_ == State::backoff) {
    if (now < retry_at_) return false;
  } else {
    const std::int64_t due = t0_ns_ + static_cast<std::int64_t>(next_) * spacing_ns_ + spacing_ns_ / 2;
    if (now < due) return false;
    st_.late_ms_max = std::max(st_.late_ms_max, ms_between(due, now));
    pair_t0_ = now;
  }
  std::memset(handle_, 0, sizeof handle_);
  check(net_.listen(dev_, handle_, &listen_), "listen (churn)");
  if (!listen_) fail(Fail::plugin, "listen (churn) returned ncclSuccess with a NULL listenComm");
  mgmt_.send(MsgType::churn, strf("h %llu %u\n", static_cast<unsigned long long>(next_), attempt_) +
                                 std::string(handle_, sizeof handle_));
  state_ = State::wait_peer;
  return true;
}

bool Churn::poll_connect(std::int64_t now) {
  bool progress = false;
  try {
    if (!send_) {
      ++st_.connect_calls;
      connecting_ = true;
      check(net_.connect(dev_, peer_handle_.data(), &send_), "connect (churn)");
      progress = send_ != nullptr;
      if (send_) connecting_ = false;
    }
    if (!recv_) {
      ++st_.accept_calls;
      check(net_.accept(listen_, &recv_), "accept (churn)");
      if (recv_) progress = true;
    }
  } catch (const DriverError& e) {
    if (e.code < 0 || !o_.churn_retry) throw;
    if (!send_) connecting_ = false;  // the failed call was connect(): nothing left in progress
    abandon(now, e.what(), true);
    return true;
  }
  if (recv_ && listen_) {
    check(net_.closeListen(listen_), "closeListen (churn)");
    listen_ = nullptr;
  }
  if (!send_ || !recv_) return progress;
  ++st_.opened;
  const double ms = ms_between(pair_t0_, now);
  st_.connect_ms_max = std::max(st_.connect_ms_max, ms);
  st_.connect_ms_total += ms;
  std::uint8_t* sbuf = mem_;
  std::uint8_t* rbuf = mem_ + kPage;
  io_ = PairMessage{};
  check(net_.regMr(send_, sbuf, kPage, NCCL_PTR_HOST, &io_.smh), "regMr (churn send comm)");
  check(net_.regMr(recv_, rbuf, kPage, NCCL_PTR_HOST, &io_.rmh), "regMr (churn recv comm)");
  pattern::fill(sbuf, 0, kMsg, pattern::seed(rank_, kEpochChurn, next_));
  pattern::fill(rbuf, 0, kMsg, pattern::seed(1 - rank_, kEpochChurn, next_), 0xff);  // stale data must not pass
  std::memset(rbuf + kMsg, kChurnGuardByte, kGuard);
  state_ = State::traffic;
  return true;
}

bool Churn::poll_traffic(std::int64_t now) {
  bool progress = false;
  if (!io_.rreq) {
    void* data = mem_ + kPage;
    std::size_t cap = kPage - kGuard;
    int tag = 0;
    void* mh = io_.rmh;
    check(net_.irecv(recv_, 1, &data, &cap, &tag, &mh, &io_.rreq), "irecv (churn)");
    if (io_.rreq) progress = true;
    else ++st_.irecv_retries;
  }
  if (!io_.sreq) {
    check(net_.isend(send_, mem_, kMsg, 0, io_.smh, &io_.sreq), "isend (churn)");
    if (io_.sreq) progress = true;
    else ++st_.isend_retries;
  }
  if (io_.rreq && !io_.rdone) {
    int done = 0;
    check(net_.test(io_.rreq, &done, &io_.rsize), "test (churn irecv)");
    if (done) {
      io_.rdone = progress = true;
      if (net_.has_irecvConsumed()) check(net_.irecvConsumed(recv_, 1, io_.rreq), "irecvConsumed (churn)");
    }
  }
  if (io_.sreq && !io_.sdone) {
    int done = 0;
    check(net_.test(io_.sreq, &done, nullptr), "test (churn isend)");
    if (done) io_.sdone = progress = true;
  }
  if (io_.sdone && io_.rdone) finish_pair(now);
  return progress;
}

void Churn::finish_pair(std::int64_t now) {
  const std::uint8_t* rbuf = mem_ + kPage;
  pattern::Mismatch m;
  pattern::verify(rbuf, 0, kMsg, pattern::seed(1 - rank_, kEpochChurn, next_), &m);
  bool guard_ok = std::all_of(rbuf + kMsg, rbuf + kMsg + kGuard, [](std::uint8_t b) { return b == kChurnGuardByte; });
  if (m.bytes == 0 && io_.rsize == static_cast<int>(kMsg) && guard_ok) {
    ++st_.messages_ok;
  } else {
    if (st_.bad_messages++ < 5)
      log::warn("churn pair %llu: %d bytes reported (%zu sent), %llu wrong bytes%s",
                static_cast<unsigned long long>(next_), io_.rsize, kMsg, static_cast<unsigned long long>(m.bytes),
                guard_ok ? "" : ", written past the message");
  }
  check(net_.deregMr(send_, io_.smh), "deregMr (churn send comm)");
  check(net_.deregMr(recv_, io_.rmh), "deregMr (churn recv comm)");
  check(net_.closeSend(send_), "closeSend (churn)");
  check(net_.closeRecv(recv_), "closeRecv (churn)");
  send_ = recv_ = nullptr;
  io_ = PairMessage{};
  ++st_.closed;
  st_.pair_ms_max = std::max(st_.pair_ms_max, ms_between(pair_t0_, now));
  for (auto* box : {&aborts_, &inbox_})  // leftovers of this pair's failed attempts
    for (auto it = box->begin(); it != box->end();) it = it->first.first <= next_ ? box->erase(it) : std::next(it);
  ++next_;
  attempt_ = 0;
  state_ = State::idle;
}

bool Churn::drain() {
  bool progress = false;
  for (auto it = draining_.begin(); it != draining_.end();) {
    void* comm = nullptr;
    ncclResult_t r = net_.connect(dev_, it->data(), &comm);
    if (r == ncclSuccess && !comm) {
      ++it;
      continue;
    }
    if (comm) check(net_.closeSend(comm), "closeSend (churn, abandoned connect)");
    it = draining_.erase(it);
    progress = true;
  }
  return progress;
}

bool Churn::step() {
  if (done()) return false;
  read_inbox();
  const bool drained = !draining_.empty() && drain();
  if (next_ >= static_cast<std::uint64_t>(o_.churn)) return drained;
  const std::int64_t now = now_ns();
  if (state_ != State::idle && static_cast<double>(now - pair_t0_) / 1e9 > o_.timeout_s)
    fail(Fail::timeout, strf("timeout after %g s in churn pair %llu (%s; %llu connect and %llu accept calls so far)",
                             o_.timeout_s, static_cast<unsigned long long>(next_), state_name(),
                             static_cast<unsigned long long>(st_.connect_calls),
                             static_cast<unsigned long long>(st_.accept_calls)));
  if (state_ != State::idle && state_ != State::backoff) {
    auto ab = aborts_.find(Key{next_, attempt_});
    if (ab != aborts_.end()) {  // the peer's side of this attempt failed
      std::string why = "the peer: " + ab->second;
      aborts_.erase(ab);
      abandon(now, why, false);
      return true;
    }
  }
  switch (state_) {
    case State::idle:
    case State::backoff:
      return open_listener(now) || drained;
    case State::wait_peer: {
      auto it = inbox_.find(Key{next_, attempt_});
      if (it == inbox_.end()) return false;
      peer_handle_ = std::move(it->second);
      inbox_.erase(it);
      state_ = State::connecting;
      return true;
    }
    case State::connecting:
      return poll_connect(now);
    case State::traffic:
      return poll_traffic(now);
  }
  return false;
}

}  // namespace hnd
