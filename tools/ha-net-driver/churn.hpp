// ha-net-driver: comm churn during the integrity phase (--churn N).
//
// While the main stream flows, N extra comm pairs are opened and closed one after another, each
// the way NCCL's proxy opens a connection: listen, the handle to the peer (over the management
// connection), connect()/accept() polled without blocking, regMr of one page on each comm, one
// verified 64-byte message in each direction, then deregMr, closeSend, closeRecv. Every step is one
// non-blocking plugin call made from the stream's polling loop (Churn::step), so the churn never
// waits on the stream's behalf and the stream never waits for the churn.
//
// Pacing: with --min-seconds S, pair i is due (i + 0.5) * S / N after the phase start (spread over
// the phase); without it the pairs run back to back. A pair that is late starts at once; the
// phase ends only when the stream and every pair are done. Both ranks run the same pairs in the
// same order. MsgType::churn messages: "h <pair> <attempt>\n" + the 128-byte listen handle, and
// "x <pair> <attempt>\n<reason>" (this attempt failed here); they are read into an inbox every
// turn, so a message that arrives early never blocks the stream's own messages.
//
// --churn-retry: a connect() or accept() of a pair that returns an error abandons that attempt on
// both ranks (this rank tells the peer with an "x" message; each closes whatever the attempt had
// opened) and the pair is opened again 1 s later, until the pair's --timeout. The failures are
// counted (connect_failures, the first reasons kept) instead of ending the run: NCCL would abort,
// but a soak should go on and report them. Errors of any other call still end the run. NCCL's API
// cannot cancel a connect() in progress, so an abandoned attempt whose connect() had neither
// returned a comm nor failed yet is driven to its end in the background (connect() with the same
// handle each turn until it returns a comm, which is closed at once, or an error), so that its
// socket and state are released rather than leaked; the phase waits for these too.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>
#include <string>

#include "mgmt.hpp"
#include "options.hpp"
#include "plugin.hpp"
#include "report.hpp"
#include "session.hpp"

namespace hnd {

class Churn {
 public:
  // Allocates the pair's two buffer pages (so that the resource snapshot before the phase sees
  // them). `st` receives the counters as they happen.
  Churn(Plugin& net, Mgmt& mgmt, const Options& o, int rank, ChurnStats& st);
  ~Churn();
  Churn(const Churn&) = delete;
  Churn& operator=(const Churn&) = delete;

  void start(std::int64_t phase_t0_ns);  // the integrity phase started (paces the pairs)
  // One polling turn: reads the peer's handles, then advances the current pair by at most one
  // step of non-blocking plugin calls. Returns true when something moved.
  bool step();
  bool done() const { return next_ >= static_cast<std::uint64_t>(o_.churn) && draining_.empty(); }

 private:
  enum class State { idle, wait_peer, connecting, traffic, backoff };
  using Key = std::pair<std::uint64_t, std::uint32_t>;  // (pair, attempt)
  void read_inbox();
  void abandon(std::int64_t now, const std::string& why, bool tell_peer);
  bool drain();
  bool open_listener(std::int64_t now);
  bool poll_connect(std::int64_t now);
  bool poll_traffic(std::int64_t now);
  void finish_pair(std::int64_t now);
  const char* state_name() const;

  Plugin& net_;
  Mgmt& mgmt_;
  const Options& o_;
  const int rank_;
  const int dev_;
  ChurnStats& st_;
  std::uint8_t* mem_ = nullptr;  // two pages: send buffer, receive buffer
  std::int64_t t0_ns_ = 0, spacing_ns_ = 0;
  std::uint64_t next_ = 0;  // index of the current (or next) pair
  State state_ = State::idle;
  std::uint32_t attempt_ = 0;  // of the current pair (--churn-retry)
  std::map<Key, std::string> inbox_;  // the peer's listen handles
  std::map<Key, std::string> aborts_;  // the peer's failed attempts, with its reason
  std::int64_t retry_at_ = 0;
  std::string peer_handle_;
  bool connecting_ = false;  // connect() was called for this attempt and returned neither comm nor error
  std::vector<std::string> draining_;  // handles of abandoned connects still in progress
  char handle_[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  PairMessage io_;  // the pair's one verified message each way
  std::int64_t pair_t0_ = 0;
};

}  // namespace hnd
