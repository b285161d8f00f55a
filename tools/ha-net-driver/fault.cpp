#include "fault.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "flood.hpp"
#include "handle_layout.hpp"
#include "logger.hpp"
#include "pattern.hpp"
#include "session.hpp"
#include "sysinfo.hpp"
#include "traffic.hpp"

namespace hnd {

struct FaultCtx {
  const Options& o;
  Plugin& net;
  Mgmt& mgmt;
  Report& rep;
};

namespace {

using Ctx = FaultCtx;

constexpr std::size_t kH = NCCL_NET_HANDLE_MAXSIZE;
constexpr std::uint32_t kEpochFault = 400;
constexpr std::uint32_t kEpochLate = 401;
constexpr std::uint32_t kEpochRail = 402;
constexpr std::uint32_t kEpochOpen = 403;
constexpr std::uint32_t kEpochAbort = 404;

// The bad-handle and bad-token scenarios corrupt the handle's magic, version, length and token.
using handle_layout::kLengthOff, handle_layout::kMagicOff, handle_layout::kTokenOff, handle_layout::kVersionOff;

// Between polls of a plugin call that is expected to take a while (handshakes): short, but leaves
// the CPU to the plugin's threads (the test VMs have one vCPU).
void pause() { std::this_thread::sleep_for(std::chrono::microseconds(500)); }

double ms_since(std::int64_t t0) { return static_cast<double>(now_ns() - t0) / 1e6; }

FaultStep make_step(const std::string& name, Entry call, bool want_error, ncclResult_t rc, std::int64_t t0,
                    std::uint64_t calls) {
  FaultStep s;
  s.name = name;
  s.call = entry_name(call);
  s.expect = want_error ? "error" : "success";
  s.code = static_cast<int>(rc);
  s.result = result_name(rc);
  s.ms = ms_since(t0);
  s.calls = calls;
  s.ok = want_error ? rc != ncclSuccess : rc == ncclSuccess;
  return s;
}

// Adds the step to the report and as a check (a step that did not behave fails the run, exit 1).
void record(Ctx& f, FaultStep s, const std::string& extra = "") {
  const char* what = s.call == "isend" ? "request" : "comm";
  if (s.comm_null && !*s.comm_null) s.ok = false;  // an error (or no result yet) must leave it NULL
  s.detail = strf("%s returned %s (%d) after %.1f ms, %llu call(s)", s.call.c_str(), s.result.c_str(), s.code, s.ms,
                  static_cast<unsigned long long>(s.calls));
  if (s.comm_null) s.detail += *s.comm_null ? strf(", %s NULL", what) : strf(", %s NOT NULL", what);
  if (s.since_peer_gone_ms) s.detail += strf(", %.1f ms after the peer's death was visible", *s.since_peer_gone_ms);
  if (!extra.empty()) s.detail += "; " + extra;
  if (!s.ok) s.detail += strf(" (expected %s)", s.expect == "error" ? "an error" : "ncclSuccess");
  log::info("fault %s: %s: %s", f.o.fault.c_str(), s.name.c_str(), s.detail.c_str());
  f.rep.check("fault " + f.o.fault + ": " + s.name, s.ok, s.detail);
  f.rep.fault.steps.push_back(std::move(s));
}

// A listen or connect that must fail: its step, with whether the comm stayed NULL; a comm it
// returned anyway is closed (closeListen, closeSend).
void record_rejected(Ctx& f, const std::string& name, Entry call, ncclResult_t rc, void* comm, std::int64_t t0,
                     std::uint64_t calls) {
  FaultStep s = make_step(name, call, true, rc, t0, calls);
  s.comm_null = comm == nullptr;
  record(f, s);
  if (comm && call == Entry::listen) check(f.net.closeListen(comm), "closeListen");
  else if (comm) check(f.net.closeSend(comm), "closeSend");
}

// Rank 0: listen on --dev and ship the handle to rank 1.
void* listen_and_ship(Ctx& f) {
  std::string h(kH, '\0');
  void* lc = nullptr;
  check(f.net.listen(f.o.dev, h.data(), &lc), "listen");
  if (!lc) fail(Fail::plugin, "listen returned ncclSuccess with a NULL listenComm");
  f.mgmt.send(MsgType::handles, h);
  return lc;
}

// Rank 1: the handle rank 0 shipped.
std::string recv_handle(Ctx& f) {
  std::string h = f.mgmt.recv(MsgType::handles, Deadline(f.o.timeout_s), "the peer's listen handle");
  if (h.size() != kH) fail(Fail::peer, strf("peer sent a %zu-byte handle, expected %zu", h.size(), kH));
  return h;
}

struct Outcome {
  ncclResult_t rc = ncclSuccess;
  void* comm = nullptr;
  std::uint64_t calls = 0;
  std::int64_t t0 = 0;
};

// Calls connect() with the same handle buffer until it returns an error or a comm (like NCCL).
// No outcome within --timeout is a timeout (exit 4): the plugin hung the connection.
Outcome connect_until(Ctx& f, std::string& handle, const char* what) {
  Outcome out;
  out.t0 = now_ns();
  Deadline d(f.o.timeout_s);
  for (unsigned turn = 1;; ++turn) {
    ++out.calls;
    out.rc = f.net.connect(f.o.dev, handle.data(), &out.comm);
    if (out.rc != ncclSuccess || out.comm) return out;
    if ((turn & 63) == 0) f.mgmt.check_abort();
    d.check(f.o.timeout_s, what);
    pause();
  }
}

// Rank 0: accept() until it returns a comm. If `mid` is set, rank 1 reaches barrier `mid` after
// its bad connect attempt(s) and before its good one: accept() must not have produced a comm
// (nor an error) by then, which is recorded as a step.
void* accept_until(Ctx& f, void* lc, const char* mid, const char* mid_step) {
  Deadline d(f.o.timeout_s);
  std::int64_t t0 = now_ns();
  std::uint64_t calls = 0;
  bool mid_done = mid == nullptr;
  for (unsigned turn = 1;; ++turn) {
    void* rc = nullptr;
    ++calls;
    ncclResult_t r = f.net.accept(lc, &rc);
    if (!mid_done && (r != ncclSuccess || rc)) {  // before the peer's good connect: wrong
      FaultStep s = make_step(mid_step, Entry::accept, false, r, t0, calls);
      s.comm_null = rc == nullptr;
      record(f, s, "during the peer's rejected connect(s)");
    }
    check(r, "accept");
    if (rc && mid_done) return rc;
    if (rc) check(f.net.closeRecv(rc), "closeRecv");  // a comm that must not exist; the good one follows
    if (!mid_done && (rc || f.mgmt.has_message())) {
      f.mgmt.barrier(mid, f.o.timeout_s);
      if (!rc) {
        FaultStep s = make_step(mid_step, Entry::accept, false, ncclSuccess, t0, calls);
        s.comm_null = true;
        record(f, s, "while the peer's bad connect(s) were rejected");
      }
      mid_done = true;
      continue;
    }
    if ((turn & 63) == 0) f.mgmt.check_abort();
    d.check(f.o.timeout_s, "waiting for accept() to return the peer's connection");
    pause();
  }
}

// One verified 64-byte message from rank 1 (sender) to rank 0 (receiver) over a connection made
// after the fault: the plugin (and the listener) still work. The receiver records it as a check
// unless `record` is false; it returns whether the message arrived intact (the sender: true).
bool one_message(Ctx& f, void* comm, bool sender, bool record = true) {
  constexpr std::size_t kPage = 4096, kMsg = 64;
  void* mem = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fail(Fail::usage, "cannot allocate a page");
  auto* p = static_cast<std::uint8_t*>(mem);
  const std::uint64_t seed = pattern::seed(1, kEpochFault, 0);
  void* mh = nullptr;
  check(f.net.regMr(comm, p, kPage, NCCL_PTR_HOST, &mh), sender ? "regMr(send comm)" : "regMr(recv comm)");
  Deadline d(f.o.timeout_s);
  void* req = nullptr;
  if (sender) {
    pattern::fill(p, 0, kMsg, seed);
    for (;;) {
      check(f.net.isend(comm, p, kMsg, 0, mh, &req), "isend");
      if (req) break;
      d.check(f.o.timeout_s, "posting the message after the fault");
      pause();
    }
  } else {
    std::memset(p, 0xa5, kPage);
    void* data = p;
    std::size_t cap = kPage;
    int tag = 0;
    for (;;) {
      check(f.net.irecv(comm, 1, &data, &cap, &tag, &mh, &req), "irecv");
      if (req) break;
      d.check(f.o.timeout_s, "posting the receive after the fault");
      pause();
    }
  }
  int done = 0, size = -1;
  for (;;) {
    check(f.net.test(req, &done, &size), sender ? "test(isend)" : "test(irecv)");
    if (done) break;
    d.check(f.o.timeout_s, "moving one message after the fault");
    ::sched_yield();
  }
  bool intact = true;
  if (!sender) {
    pattern::Mismatch m;
    pattern::verify(p, 0, kMsg, seed, &m);
    if (f.net.has_irecvConsumed()) check(f.net.irecvConsumed(comm, 1, req), "irecvConsumed");
    intact = m.bytes == 0 && size == static_cast<int>(kMsg) && p[kMsg] == 0xa5;
    if (record)
      f.rep.check("fault " + f.o.fault + ": a verified message crossed a new connection afterwards", intact,
                  strf("%d bytes reported, %llu wrong bytes", size, static_cast<unsigned long long>(m.bytes)));
  }
  check(f.net.deregMr(comm, mh), sender ? "deregMr(send comm)" : "deregMr(recv comm)");
  ::munmap(mem, kPage);
  return intact;
}

// After the fault, a connection with an intact handle must work: rank 0 accepts on `lc` (answering
// rank 1's barrier `mid` on the way, if given), rank 1 connects, one message crosses, both close.
void accept_side(Ctx& f, void* lc, const char* mid = nullptr, const char* mid_step = nullptr) {
  void* rc = accept_until(f, lc, mid, mid_step);
  check(f.net.closeListen(lc), "closeListen");
  one_message(f, rc, false);
  f.mgmt.barrier("fault close", f.o.timeout_s);
  check(f.net.closeRecv(rc), "closeRecv");
}

void connect_side(Ctx& f, const std::string& handle) {
  std::string h = handle;
  Outcome c = connect_until(f, h, "connecting with an intact handle after the fault");
  check(c.rc, "connect (intact handle, after the fault)");
  one_message(f, c.comm, true);
  f.mgmt.barrier("fault close", f.o.timeout_s);
  check(f.net.closeSend(c.comm), "closeSend");
}

// 1. Rank 1 corrupts the magic, the version, the length of rank 0's handle (each on its own copy)
//    and calls connect() once with each: an immediate error, no comm, nothing sent to rank 0.
//    Then the intact handle connects.
void bad_handle(Ctx& f) {
  if (f.o.rank == 0) {
    accept_side(f, listen_and_ship(f), "bad handles done", "accept() undisturbed by the rejected handles");
    return;
  }
  const std::string h = recv_handle(f);
  struct Corruption {
    const char* name;
    void (*apply)(std::string&);
  };
  const Corruption cases[] = {
      {"connect with a corrupted handle magic", [](std::string& b) { b[kMagicOff] = static_cast<char>(b[kMagicOff] ^ 0xff); }},
      {"connect with a handle of another version",
       [](std::string& b) {
         std::uint16_t v;
         std::memcpy(&v, &b[kVersionOff], 2);
         v = static_cast<std::uint16_t>(v + 1);
         std::memcpy(&b[kVersionOff], &v, 2);
       }},
      {"connect with a handle of a shorter length",
       [](std::string& b) {
         std::uint16_t len = 64;
         std::memcpy(&b[kLengthOff], &len, 2);
       }},
  };
  for (const auto& c : cases) {
    std::string bad = h;
    c.apply(bad);
    std::int64_t t0 = now_ns();
    void* comm = nullptr;
    ncclResult_t rc = f.net.connect(f.o.dev, bad.data(), &comm);
    record_rejected(f, c.name, Entry::connect, rc, comm, t0, 1);
  }
  f.mgmt.barrier("bad handles done", f.o.timeout_s);
  connect_side(f, h);
}

// 2. Rank 1 flips every bit of the token: rank 0's listener must reject the connection and rank
//    1's connect() must return an error, not hang. accept() on rank 0 keeps returning NULL and the
//    same listener then accepts the intact handle.
void bad_token(Ctx& f) {
  if (f.o.rank == 0) {
    accept_side(f, listen_and_ship(f), "bad token done", "accept() returned NULL through the rejected connection");
    return;
  }
  const std::string h = recv_handle(f);
  std::string bad = h;
  std::uint64_t token;
  std::memcpy(&token, &bad[kTokenOff], 8);
  token = ~token;
  std::memcpy(&bad[kTokenOff], &token, 8);
  Outcome c = connect_until(f, bad, "connecting with a flipped token");
  record_rejected(f, "connect with a flipped token", Entry::connect, c.rc, c.comm, c.t0, c.calls);
  f.mgmt.barrier("bad token done", f.o.timeout_s);
  connect_side(f, h);
}

// 3. Rank 0 closes its listener (a) right after shipping the handle, before rank 1 connects, and
//    (b) right after rank 1's first connect() call started the handshake. Both connects must end
//    with an error (not hang, not return a comm whose peer is gone). Then a new listener works.
void close_listen(Ctx& f) {
  if (f.o.rank == 0) {
    void* lc = listen_and_ship(f);
    std::int64_t t0 = now_ns();
    record(f, make_step("closeListen right after shipping the handle", Entry::closeListen, false,
                        f.net.closeListen(lc), t0, 1));
    f.mgmt.barrier("close-listen early done", f.o.timeout_s);
    // (b) The plugin's handshake must really be in flight: wait until it accepted rank 1's TCP
    // connection (one more fd in this process), then close at once. A handshake takes tens of ms
    // on the test VMs; a plugin without such an fd is closed after at most 2 s.
    std::string h(kH, '\0');
    lc = nullptr;
    check(f.net.listen(f.o.dev, h.data(), &lc), "listen");
    if (!lc) fail(Fail::plugin, "listen returned ncclSuccess with a NULL listenComm");
    const int fds0 = count_fds();
    f.mgmt.send(MsgType::handles, h);
    f.mgmt.barrier("connecting", f.o.timeout_s);
    t0 = now_ns();
    int fds = fds0;
    for (Deadline d(2); fds <= fds0 && !d.expired(); fds = count_fds()) pause();
    const double waited = ms_since(t0);
    t0 = now_ns();
    record(f, make_step("closeListen with the peer's handshake in flight", Entry::closeListen, false,
                        f.net.closeListen(lc), t0, 1),
           strf("%s after %.1f ms (fds %d -> %d)", fds > fds0 ? "handshake connection accepted" : "NO new connection",
                waited, fds0, fds));
    f.mgmt.barrier("close-listen in-flight done", f.o.timeout_s);
    accept_side(f, listen_and_ship(f));
    return;
  }
  {
    std::string h = recv_handle(f);
    Outcome c = connect_until(f, h, "connecting to a closed listener");
    record_rejected(f, "connect to a listener closed before the connect", Entry::connect, c.rc, c.comm, c.t0, c.calls);
    f.mgmt.barrier("close-listen early done", f.o.timeout_s);
  }
  {
    std::string h = recv_handle(f);
    std::int64_t t0 = now_ns();
    void* comm = nullptr;
    ncclResult_t rc = f.net.connect(f.o.dev, h.data(), &comm);
    FaultStep first = make_step("first connect() starts the handshake", Entry::connect, false, rc, t0, 1);
    first.comm_null = comm == nullptr;
    record(f, first, "in progress: ncclSuccess with a NULL comm");
    f.mgmt.barrier("connecting", f.o.timeout_s);  // rank 0 closes its listener now
    Outcome c;
    if (rc == ncclSuccess && !comm) {
      c = connect_until(f, h, "connecting while the listener is closed");
      c.t0 = t0;
      c.calls += 1;
    } else {
      c.rc = rc;
      c.comm = comm;
      c.t0 = t0;
      c.calls = 1;
    }
    record_rejected(f, "connect while the listener is closed mid-handshake", Entry::connect, c.rc, c.comm, c.t0,
                    c.calls);
    f.mgmt.barrier("close-listen in-flight done", f.o.timeout_s);
  }
  connect_side(f, recv_handle(f));
}

// 3b. The listener is closed while it holds the acknowledgement of a handshake that is otherwise
//     complete (the plugin's test setting HA_NCCL_TEST_ACK_DELAY_MS holds every accepted handshake
//     between the connector's conn_ready and the listener's decision, and says so in a WARN).
//     Rank 0 closes its listener as soon as that WARN appears; rank 1's connect() must fail, not
//     return a comm whose peer was dropped. Then a new listener works.
void close_listen_ack(Ctx& f) {
  if (f.o.rank == 0) {
    const std::uint64_t w0 = log::plugin_warnings();
    void* lc = listen_and_ship(f);
    const std::int64_t t0 = now_ns();
    Deadline d(f.o.timeout_s);
    auto holding = [] {
      for (const auto& w : log::plugin_warning_lines())
        if (w.find("HA_NCCL_TEST_ACK_DELAY_MS") != std::string::npos && w.find("holding") != std::string::npos) return true;
      return false;
    };
    while (!(log::plugin_warnings() > w0 && holding())) {
      d.check(f.o.timeout_s, "waiting for the plugin to hold a handshake's acknowledgement (HA_NCCL_TEST_ACK_DELAY_MS)");
      pause();
    }
    const double waited = ms_since(t0);
    const std::int64_t t1 = now_ns();
    record(f, make_step("closeListen while the acknowledgement is held", Entry::closeListen, false, f.net.closeListen(lc),
                        t1, 1),
           strf("the plugin held the acknowledgement %.1f ms after the handle was shipped", waited));
    f.mgmt.barrier("close-listen-ack done", f.o.timeout_s);
    accept_side(f, listen_and_ship(f));
    return;
  }
  std::string h = recv_handle(f);
  Outcome c = connect_until(f, h, "connecting while the listener holds the acknowledgement");
  record_rejected(f, "connect while the listener is closed before acknowledging", Entry::connect, c.rc, c.comm, c.t0,
                  c.calls);
  f.mgmt.barrier("close-listen-ack done", f.o.timeout_s);
  connect_side(f, recv_handle(f));
}

// 3c. Bad connectors interleaved with good ones on one listener. Rank 1 opens kFloodHolders raw
//     TCP connections that send nothing, then kFloodRounds rounds of: one raw connection of every
//     kBadRound kind (garbage, another token, half a frame, a hello without the proof ...;
//     flood.hpp), then one good connect() with the intact handle and one verified message. Rank 0
//     accepts and verifies every good connection on the same listener; then, told how many bad
//     connectors there were, waits until the holders are dropped (the admission deadline) and checks
//     that the plugin WARNed for none of them (they prove nothing: an INFO line per source, checked
//     from the log) and that no fd is left behind. Rank 1 measures how long each holder was held and
//     how many bytes the listener sent the bad connectors (none).
constexpr int kFloodRounds = 8, kFloodHolders = 6;

// Rank 0 of flood: accepts and verifies the good connections, then checks that no WARN came of the
// bad ones and waits for their fds.
void flood_listener(Ctx& f) {
  void* lc = listen_and_ship(f);
  const int fds_listening = count_fds();
  const std::uint64_t w0 = log::plugin_warnings();
  int intact = 0;
  for (int k = 0; k < kFloodRounds; ++k) {
    void* rc = accept_until(f, lc, nullptr, nullptr);
    intact += one_message(f, rc, false, false) ? 1 : 0;
    f.mgmt.barrier(strf("flood good %d", k), f.o.timeout_s);
    check(f.net.closeRecv(rc), "closeRecv");
  }
  f.rep.check("fault flood: every good connection carried a verified message", intact == kFloodRounds,
              strf("%d of %d", intact, kFloodRounds));
  const std::string bad_text = f.mgmt.recv(MsgType::data, Deadline(f.o.timeout_s), "the number of bad connectors");
  const auto bad_or = wire::parse_count(bad_text);
  if (!bad_or) fail(Fail::peer, "management protocol: bad count of bad connectors '" + bad_text + "'");
  const std::uint64_t bad = *bad_or;
  std::int64_t t0 = now_ns();
  f.mgmt.barrier("flood holders dropped", f.o.timeout_s);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // a late one would show now
  const std::uint64_t warned = log::plugin_warnings() - w0;
  FaultStep s = make_step("no WARN for the bad connectors", Entry::accept, false, ncclSuccess, t0, 0);
  s.ok = warned == 0;
  record(f, s, strf("%llu bad connectors, %llu WARN lines", static_cast<unsigned long long>(bad),
                    static_cast<unsigned long long>(warned)));
  t0 = now_ns();
  const int fds = wait_fds_at_most(fds_listening, 3000);
  FaultStep fs = make_step("no fd left by the connectors (listener open)", Entry::accept, false, ncclSuccess, t0, 0);
  fs.ok = fds <= fds_listening;
  record(f, fs, strf("fds %d while listening before the flood, %d after", fds_listening, fds));
  check(f.net.closeListen(lc), "closeListen");
  f.mgmt.barrier("flood done", f.o.timeout_s);
}

// Rank 1 of flood: the holders, then the rounds of bad connectors and one good connect each.
void flood_connector(Ctx& f) {
  const std::string h = recv_handle(f);
  const HandshakeTarget target = handshake_target(h);
  std::vector<int> holders;
  std::vector<std::int64_t> held_since;
  std::map<std::string, std::uint64_t> count;
  for (int i = 0; i < kFloodHolders; ++i) {
    held_since.push_back(now_ns());
    holders.push_back(bad_connect(target, BadKind::silent_hold, f.o.timeout_s).fd);
    ++count[bad_kind_name(BadKind::silent_hold)];
  }
  std::vector<double> held_ms;
  std::size_t bytes_back = 0, held_bytes_back = 0;
  std::thread watcher([&] { held_ms = wait_closed_by_peer(holders, held_since, f.o.timeout_s, held_bytes_back); });
  int good = 0;
  try {
    for (int k = 0; k < kFloodRounds; ++k) {
      for (BadKind kind : kBadRound) {
        bytes_back += bad_connect(target, kind, f.o.timeout_s).bytes_back;
        ++count[bad_kind_name(kind)];
      }
      std::string hk = h;
      Outcome c = connect_until(f, hk, "connecting with the intact handle among bad connectors");
      check(c.rc, "connect (intact handle, among bad connectors)");
      one_message(f, c.comm, true);
      f.mgmt.barrier(strf("flood good %d", k), f.o.timeout_s);
      check(f.net.closeSend(c.comm), "closeSend");
      ++good;
    }
  } catch (...) {
    watcher.join();
    throw;
  }
  watcher.join();
  std::uint64_t bad = 0;
  for (const auto& [kind, n] : count) {
    f.rep.fault.counts.emplace_back(kind, n);
    bad += n;
  }
  f.rep.fault.counts.emplace_back("good", static_cast<std::uint64_t>(good));
  const double longest = held_ms.empty() ? -1 : *std::max_element(held_ms.begin(), held_ms.end());
  const bool all_closed = std::none_of(held_ms.begin(), held_ms.end(), [](double ms) { return ms < 0; });
  FaultStep s = make_step("silent connectors dropped by the listener", Entry::connect, false, ncclSuccess,
                          now_ns(), 0);
  s.ok = all_closed && held_ms.size() == static_cast<std::size_t>(kFloodHolders);
  s.ms = longest;
  std::string list;
  for (double ms : held_ms) list += strf("%s%.0f", list.empty() ? "" : ", ", ms);
  record(f, s, strf("held for [%s] ms", list.c_str()));
  bytes_back += held_bytes_back;
  FaultStep quiet = make_step("nothing sent to the bad connectors", Entry::connect, false, ncclSuccess, now_ns(), 0);
  quiet.ok = bytes_back == 0;
  record(f, quiet, strf("%zu bytes from the listener to %llu bad connectors", bytes_back, static_cast<unsigned long long>(bad)));
  f.mgmt.send(MsgType::data, std::to_string(bad));
  f.mgmt.barrier("flood holders dropped", f.o.timeout_s);
  f.mgmt.barrier("flood done", f.o.timeout_s);
}

void flood(Ctx& f) {
  if (f.o.rank == 0) flood_listener(f);
  else flood_connector(f);
}

// 3d. Rank 1 calls connect() once, which starts the handshake, and never again: the connection
//     completes in the plugin (rank 0 accepts it) but connect() never hands it over. Rank 1 then
//     finalizes: the plugin must release that comm's QPs with the rest (the usual resource checks
//     after finalize and dlclose), not keep them past its devices.
void abandon_connect(Ctx& f) {
  if (f.o.rank == 0) {
    void* lc = listen_and_ship(f);
    const std::int64_t t0 = now_ns();
    void* rc = accept_until(f, lc, nullptr, nullptr);
    FaultStep s = make_step("accept() returns the connection rank 1 never takes", Entry::accept, false, ncclSuccess, t0, 0);
    s.ok = rc != nullptr;  // accept_until returns only a comm
    record(f, s);
    check(f.net.closeListen(lc), "closeListen");
    f.mgmt.barrier("abandon accepted", f.o.timeout_s);
    f.mgmt.barrier("abandon finalizing", f.o.timeout_s);
    check(f.net.closeRecv(rc), "closeRecv");
    return;
  }
  std::string h = recv_handle(f);
  const std::int64_t t0 = now_ns();
  void* comm = nullptr;
  const ncclResult_t rc = f.net.connect(f.o.dev, h.data(), &comm);
  FaultStep s = make_step("connect() called once, never again", Entry::connect, false, rc, t0, 1);
  s.comm_null = comm == nullptr;
  record(f, s, "the handshake completes in the plugin; the comm is never taken");
  if (comm) check(f.net.closeSend(comm), "closeSend");
  f.mgmt.barrier("abandon accepted", f.o.timeout_s);
  // The peer accepted: its acknowledgement is on the way (and its standby phase after it).
  std::this_thread::sleep_for(std::chrono::seconds(2));
  f.mgmt.barrier("abandon finalizing", f.o.timeout_s);
}

// 4. Rank 0 posts a receive of N bytes (N = largest --sizes), rank 1 isends N + 1 bytes: isend
//    must fail without posting anything; the receive stays pending and its buffer untouched.
void oversize(Ctx& f) {
  const std::size_t n = *std::max_element(f.o.sizes.begin(), f.o.sizes.end());
  const std::size_t bytes = (n + 1 + 64 + 4095) / 4096 * 4096;
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fail(Fail::usage, strf("cannot allocate %zu bytes", bytes));
  auto* p = static_cast<std::uint8_t*>(mem);
  void* mh = nullptr;
  if (f.o.rank == 0) {
    void* lc = listen_and_ship(f);
    void* comm = accept_until(f, lc, nullptr, nullptr);
    check(f.net.closeListen(lc), "closeListen");
    check(f.net.regMr(comm, p, bytes, NCCL_PTR_HOST, &mh), "regMr(recv comm)");
    std::memset(p, 0xa5, bytes);
    void* data = p;
    std::size_t cap = n;
    int tag = 0;
    void* req = nullptr;
    Deadline d(f.o.timeout_s);
    for (;;) {
      check(f.net.irecv(comm, 1, &data, &cap, &tag, &mh, &req), "irecv");
      if (req) break;
      d.check(f.o.timeout_s, "posting the receive");
      pause();
    }
    f.mgmt.barrier("oversize posted", f.o.timeout_s);
    f.mgmt.barrier("oversize sent", f.o.timeout_s);
    std::int64_t t0 = now_ns();
    int done = 0, size = -1;
    ncclResult_t rc = f.net.test(req, &done, &size);
    const bool untouched = std::all_of(p, p + bytes, [](std::uint8_t b) { return b == 0xa5; });
    FaultStep s = make_step("the posted receive stays pending, its buffer untouched", Entry::test, false, rc, t0, 1);
    s.ok = s.ok && !done && untouched;
    record(f, s, strf("done=%d, buffer %s", done, untouched ? "untouched" : "WRITTEN"));
    check(f.net.deregMr(comm, mh), "deregMr(recv comm)");
    check(f.net.closeRecv(comm), "closeRecv (a receive still posted)");
  } else {
    std::string h = recv_handle(f);
    Outcome c = connect_until(f, h, "connecting");
    check(c.rc, "connect");
    void* comm = c.comm;
    check(f.net.regMr(comm, p, bytes, NCCL_PTR_HOST, &mh), "regMr(send comm)");
    pattern::fill(p, 0, n + 1, pattern::seed(1, kEpochFault, 1));
    f.mgmt.barrier("oversize posted", f.o.timeout_s);
    std::int64_t t0 = now_ns();
    std::uint64_t calls = 0;
    void* req = nullptr;
    ncclResult_t rc = ncclSuccess;
    Deadline d(f.o.timeout_s);
    for (;;) {  // NULL requests until the receiver's clear-to-send arrives
      ++calls;
      rc = f.net.isend(comm, p, n + 1, 0, mh, &req);
      if (rc != ncclSuccess || req) break;
      d.check(f.o.timeout_s, "waiting for isend of the oversized message to return");
      ::sched_yield();
    }
    FaultStep s = make_step(strf("isend of %zu bytes into a %zu-byte receive", n + 1, n), Entry::isend, true, rc, t0, calls);
    s.comm_null = req == nullptr;
    record(f, s);
    if (req) {  // it was posted after all: let it finish (bounded) before closing
      int done = 0;
      while (!done && !d.expired() && f.net.test(req, &done, nullptr) == ncclSuccess) ::sched_yield();
    }
    f.mgmt.barrier("oversize sent", f.o.timeout_s);
    check(f.net.deregMr(comm, mh), "deregMr(send comm)");
    check(f.net.closeSend(comm), "closeSend");
  }
  ::munmap(mem, bytes);
  f.mgmt.barrier("oversize closed", f.o.timeout_s);
}

// 5. Both ranks stream (the integrity phase on the ring); rank 1 SIGKILLs itself after receiving
//    half of --messages. Rank 0's isend/test must return an error (not hang); rank 0 then closes
//    everything and finalizes.
void peer_death(Ctx& f) {
  std::vector<Link> ring = open_links(f.net, f.mgmt, f.o.dev, 1, f.o.timeout_s, &f.rep.connect);
  Link& link = ring[0];
  const std::size_t max_size = *std::max_element(f.o.sizes.begin(), f.o.sizes.end());
  Buffers buf(max_size, std::max(f.o.inflight, 2));
  void* smh = nullptr;
  void* rmh = nullptr;
  check(f.net.regMr(link.send, buf.send_base(), buf.region_bytes(), NCCL_PTR_HOST, &smh), "regMr(send comm)");
  check(f.net.regMr(link.recv, buf.recv_base(), buf.region_bytes(), NCCL_PTR_HOST, &rmh), "regMr(recv comm)");
  f.mgmt.barrier("stream", f.o.timeout_s);
  DataCtx dc{f.net, f.mgmt, link.send, link.recv, buf, smh, rmh, f.o.rank, f.o, true, nullptr, {}, nullptr, nullptr, nullptr};
  if (f.o.rank == 1) {
    const std::uint64_t kill_at = f.o.messages / 2;
    dc.after_recv = [kill_at](std::uint64_t received) {
      if (received < kill_at) return;
      log::warn("fault peer-death: received %llu messages: SIGKILL to myself now",
                static_cast<unsigned long long>(received));
      ::kill(::getpid(), SIGKILL);
    };
    Integrity st;
    run_integrity(dc, st);
    fail(Fail::verify, "fault peer-death: the stream ended before rank 1 reached its kill point");
  }
  std::int64_t gone_ns = 0;
  dc.watch_peer = false;
  dc.peer_gone_ns = &gone_ns;
  const auto calls_before = f.net.stats();
  std::int64_t t0 = now_ns();
  FaultStep s;
  try {
    run_integrity(dc, f.rep.integrity);
    s = make_step("isend/test after the peer died mid-stream", Entry::test, true, ncclSuccess, t0, 0);
    s.detail = "the stream completed although the peer died";
  } catch (const DriverError& e) {
    const Entry which = f.net.last_error_entry();
    if (e.kind != Fail::plugin || which == Entry::kCount) throw;  // a timeout (hang), a driver problem
    const auto i = static_cast<std::size_t>(which);
    s = make_step("isend/test after the peer died mid-stream", which, true, f.net.last_error_result(), t0,
                  f.net.stats()[i].count - calls_before[i].count);
    log::info("fault peer-death: %s", e.what());
  }
  // The error must come from the peer's death: by now the management connection shows it.
  Deadline grace(2);
  while (gone_ns == 0 && !grace.expired()) {
    if (f.mgmt.peer_closed()) gone_ns = now_ns();
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::int64_t err_ns = t0 + static_cast<std::int64_t>(s.ms * 1e6);
  // Negative: the error came before this rank noticed the closed management connection (it looks
  // every 256 polling turns).
  if (gone_ns) s.since_peer_gone_ms = static_cast<double>(err_ns - gone_ns) / 1e6;
  else s.ok = false;
  record(f, s, gone_ns ? "" : "the peer's management connection is still open");
  f.rep.peer_gone = true;
  // NCCL's abort path: deregister and close the failed comms with requests still outstanding.
  check(f.net.deregMr(link.send, smh), "deregMr(send comm, after the peer died)");
  check(f.net.deregMr(link.recv, rmh), "deregMr(recv comm, after the peer died)");
  close_link(f.net, link);
}

// 6. An out-of-range --dev: getProperties, listen and connect must return an error.
void bad_dev(Ctx& f) {
  {
    std::int64_t t0 = now_ns();
    Properties p;
    ncclResult_t rc = f.net.getProperties(f.o.dev, &p);
    record(f, make_step(strf("getProperties(%d)", f.o.dev), Entry::getProperties, true, rc, t0, 1));
  }
  {
    std::string h(kH, '\0');
    void* lc = nullptr;
    std::int64_t t0 = now_ns();
    ncclResult_t rc = f.net.listen(f.o.dev, h.data(), &lc);
    record_rejected(f, strf("listen(%d)", f.o.dev), Entry::listen, rc, lc, t0, 1);
  }
  {
    std::string h(kH, '\0');  // the device index is checked before the handle
    void* comm = nullptr;
    std::int64_t t0 = now_ns();
    ncclResult_t rc = f.net.connect(f.o.dev, h.data(), &comm);
    record_rejected(f, strf("connect(%d)", f.o.dev), Entry::connect, rc, comm, t0, 1);
  }
  f.mgmt.barrier("bad-dev done", f.o.timeout_s);
}


// Waits for the request to complete (true) or for the deadline (false); plugin errors throw.
bool wait_done(Ctx& f, void* req, const char* what, Deadline& d, int* size = nullptr) {
  for (unsigned turn = 1;; ++turn) {
    int done = 0;
    check(f.net.test(req, &done, size), what);
    if (done) return true;
    if (d.expired()) return false;
    if ((turn & 1023) == 0) f.mgmt.check_abort();
    ::sched_yield();
  }
}

// Calls isend / irecv (n = 1, tag 0) until the plugin returns a request; plugin errors throw.
void* post_until(Ctx& f, bool send, void* comm, void* data, std::size_t size, void* mh, const char* what) {
  Deadline d(f.o.timeout_s);
  for (;;) {
    void* req = nullptr;
    if (send) {
      check(f.net.isend(comm, data, size, 0, mh, &req), what);
    } else {
      int tag = 0;
      check(f.net.irecv(comm, 1, &data, &size, &tag, &mh, &req), what);
    }
    if (req) return req;
    d.check(f.o.timeout_s, what);
    ::sched_yield();
  }
}

// 7. Rank 0 posts 8 receives (their clear-to-send entries reach rank 1), receives two messages,
//    then closes its recv comm with six receives still posted. Its buffers stay registered (a
//    second registration through its send comm, as NCCL's global registration cache keeps them)
//    and are poisoned right after closeRecv. Rank 1 then isends into the six entries it holds:
//    nothing may land (the plugin moves the closed comm's QPs to ERROR at once, whenever the
//    reaper destroys them), and rank 1's sends must fail or never complete.
constexpr int kLateSlots = 8, kLateEarly = 2;
constexpr double kLateWindowS = 20;  // rank 1 tries this long

// Rank 0 of late-writes: posts every receive, takes the first messages, closes its recv comm with
// the rest posted and checks that its buffers stay poisoned while rank 1 sends.
void late_writes_receiver(Ctx& f, Link& link, Buffers& buf, std::size_t n) {
  void* rmh = nullptr;
  void* keep = nullptr;
  check(f.net.regMr(link.recv, buf.recv_base(), buf.region_bytes(), NCCL_PTR_HOST, &rmh), "regMr(recv comm)");
  check(f.net.regMr(link.send, buf.recv_base(), buf.region_bytes(), NCCL_PTR_HOST, &keep),
        "regMr(send comm, the receive buffers again)");
  std::vector<void*> reqs;
  for (int i = 0; i < kLateSlots; ++i)
    reqs.push_back(post_until(f, false, link.recv, buf.recv_slot(i), n, rmh, "irecv"));
  Deadline d(f.o.timeout_s);
  for (int i = 0; i < kLateEarly; ++i) {
    int size = -1;
    if (!wait_done(f, reqs[static_cast<std::size_t>(i)], "test(irecv)", d, &size))
      fail(Fail::timeout, "late-writes: the first messages did not arrive");
    pattern::Mismatch m;
    pattern::verify(buf.recv_slot(i), 0, n, pattern::seed(1, kEpochLate, static_cast<std::uint64_t>(i)), &m);
    f.rep.check(strf("fault late-writes: message %d verified before the close", i),
                m.bytes == 0 && size == static_cast<int>(n),
                strf("%d bytes, %llu wrong", size, static_cast<unsigned long long>(m.bytes)));
  }
  f.mgmt.barrier("late-writes ready", f.o.timeout_s);
  check(f.net.deregMr(link.recv, rmh), "deregMr(recv comm)");
  std::int64_t t0 = now_ns();
  record(f, make_step(strf("closeRecv with %d receives posted", kLateSlots - kLateEarly), Entry::closeRecv, false,
                      f.net.closeRecv(link.recv), t0, 1));
  link.recv = nullptr;
  for (int i = kLateEarly; i < kLateSlots; ++i) std::memset(buf.recv_slot(i), 0x5a, buf.stride());
  f.mgmt.barrier("late-writes closed", f.o.timeout_s);
  f.mgmt.barrier("late-writes sent", f.o.timeout_s + kLateWindowS);
  std::size_t landed = 0;
  for (int i = kLateEarly; i < kLateSlots; ++i)
    landed += static_cast<std::size_t>(std::count_if(buf.recv_slot(i), buf.recv_slot(i) + buf.stride(),
                                                     [](std::uint8_t b) { return b != 0x5a; }));
  FaultStep s = make_step("the closed comm's buffers stay poisoned while the peer sends", Entry::closeRecv, false,
                          ncclSuccess, t0, 1);
  s.ok = landed == 0;
  record(f, s, strf("%zu byte(s) written after closeRecv", landed));
  check(f.net.deregMr(link.send, keep), "deregMr(send comm)");
}

// Rank 1 of late-writes: sends the first messages, then, once rank 0 closed, into the clear-to-send
// entries it still holds for kLateWindowS.
void late_writes_sender(Ctx& f, Link& link, Buffers& buf, std::size_t n) {
  void* smh = nullptr;
  check(f.net.regMr(link.send, buf.send_base(), buf.region_bytes(), NCCL_PTR_HOST, &smh), "regMr(send comm)");
  for (int i = 0; i < kLateSlots; ++i)
    pattern::fill(buf.send_slot(i), 0, n, pattern::seed(1, kEpochLate, static_cast<std::uint64_t>(i)));
  Deadline d(f.o.timeout_s);
  for (int i = 0; i < kLateEarly; ++i)
    if (!wait_done(f, post_until(f, true, link.send, buf.send_slot(i), n, smh, "isend"), "test(isend)", d))
      fail(Fail::timeout, "late-writes: the first messages were not delivered");
  // Their clear-to-send entries were written after the first ones, over the same RC QP.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  f.mgmt.barrier("late-writes ready", f.o.timeout_s);
  f.mgmt.barrier("late-writes closed", f.o.timeout_s);
  const std::int64_t t0 = now_ns();
  std::vector<void*> reqs;
  ncclResult_t rc = ncclSuccess;
  int completed = 0, posted = 0;
  Deadline window(kLateWindowS);
  for (int i = kLateEarly; i < kLateSlots && rc == ncclSuccess; ++i) {
    void* req = nullptr;
    while (rc == ncclSuccess && !req && !window.expired()) {
      rc = f.net.isend(link.send, buf.send_slot(i), n, 0, smh, &req);
      if (!req) ::sched_yield();
    }
    if (req) {
      reqs.push_back(req);
      ++posted;
    }
  }
  std::vector<bool> done(reqs.size(), false);
  while (rc == ncclSuccess && !window.expired()) {
    for (std::size_t i = 0; i < reqs.size() && rc == ncclSuccess; ++i) {
      if (done[i]) continue;
      int d1 = 0;
      rc = f.net.test(reqs[i], &d1, nullptr);
      if (d1) {
        done[i] = true;
        ++completed;
      }
    }
    ::sched_yield();
  }
  FaultStep s = make_step("sends into the closed receiver's clear-to-send entries fail or never complete",
                          Entry::test, true, rc, t0, static_cast<std::uint64_t>(posted));
  s.ok = completed == 0;  // an error, or nothing completed within the window
  record(f, s, strf("%d posted, %d completed, %s after %.1f ms", posted, completed,
                    rc == ncclSuccess ? "no error" : result_name(rc), ms_since(t0)));
  f.mgmt.barrier("late-writes sent", f.o.timeout_s);
  check(f.net.deregMr(link.send, smh), "deregMr(send comm)");
}

void late_writes(Ctx& f) {
  const std::size_t n = *std::max_element(f.o.sizes.begin(), f.o.sizes.end());
  std::vector<Link> ring = open_links(f.net, f.mgmt, f.o.dev, 1, f.o.timeout_s, &f.rep.connect);
  Link& link = ring[0];
  Buffers buf(n, kLateSlots);
  if (f.o.rank == 0) late_writes_receiver(f, link, buf, n);
  else late_writes_sender(f, link, buf, n);
  close_link(f.net, link);
  // With the plugin's HA_NCCL_TEST_REAPER_DELAY_MS, the QPs just closed are destroyed that much
  // later: wait for it, so that finalize finds nothing left to destroy.
  if (const char* delay = std::getenv("HA_NCCL_TEST_REAPER_DELAY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay) + 1000));
  f.mgmt.barrier("late-writes done", f.o.timeout_s + 60);
}

// One comm pair per link, each direction carrying a stream of messages of the largest --sizes
// entry, one at a time.
struct Stream {
  std::vector<Link> links;
  void* mem = nullptr;
  std::size_t bytes = 0;
  std::size_t msg = 64;    // message size
  std::size_t slot = 0;    // msg rounded up to pages
  std::vector<void*> smh, rmh, sreq, rreq;
  std::uint64_t messages = 0;
  static constexpr std::size_t kPage = 4096;
  std::uint8_t* sbuf(std::size_t i) const { return static_cast<std::uint8_t*>(mem) + i * 2 * slot; }
  std::uint8_t* rbuf(std::size_t i) const { return sbuf(i) + slot; }
};

void open_stream(Ctx& f, Stream& st, std::uint32_t epoch) {
  st.links = open_links(f.net, f.mgmt, f.o.dev, f.o.comms, f.o.timeout_s, &f.rep.connect);
  const std::size_t n = st.links.size();
  st.msg = std::max<std::size_t>(1, *std::max_element(f.o.sizes.begin(), f.o.sizes.end()));
  st.slot = (st.msg + Stream::kPage - 1) / Stream::kPage * Stream::kPage;
  st.bytes = n * 2 * st.slot;
  st.mem = ::mmap(nullptr, st.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (st.mem == MAP_FAILED) fail(Fail::usage, "cannot allocate the comms' buffers");
  st.smh.assign(n, nullptr);
  st.rmh.assign(n, nullptr);
  st.sreq.assign(n, nullptr);
  st.rreq.assign(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    check(f.net.regMr(st.links[i].send, st.sbuf(i), st.slot, NCCL_PTR_HOST, &st.smh[i]), "regMr(send comm)");
    check(f.net.regMr(st.links[i].recv, st.rbuf(i), st.slot, NCCL_PTR_HOST, &st.rmh[i]), "regMr(recv comm)");
    pattern::fill(st.sbuf(i), 0, st.msg, pattern::seed(f.o.rank, epoch, i));
  }
}

// One turn over link i: post the receive and the send that are not posted (the receive only if
// `post_recv`), test what is outstanding and verify what arrived. Returns the link's requests still
// outstanding. (An isend without the peer's receive returns no request: nothing is posted.)
std::size_t link_turn(Ctx& f, Stream& st, std::size_t i, std::uint32_t epoch, bool post_recv, bool post_send) {
  std::size_t out = 0;
  Link& l = st.links[i];
  if (post_recv && !st.rreq[i]) {
    void* data = st.rbuf(i);
    std::size_t cap = st.msg;
    int tag = 0;
    std::memset(st.rbuf(i), 0xa5, st.msg);
    check(f.net.irecv(l.recv, 1, &data, &cap, &tag, &st.rmh[i], &st.rreq[i]), "irecv");
  }
  if (post_send && !st.sreq[i]) check(f.net.isend(l.send, st.sbuf(i), st.msg, 0, st.smh[i], &st.sreq[i]), "isend");
  int done = 0, size = -1;
  if (st.rreq[i]) {
    check(f.net.test(st.rreq[i], &done, &size), "test(irecv)");
    if (done) {
      pattern::Mismatch m;
      pattern::verify(st.rbuf(i), 0, st.msg, pattern::seed(1 - f.o.rank, epoch, i), &m);
      if (m.bytes || size != static_cast<int>(st.msg))
        fail(Fail::verify, strf("link %zu: %d bytes received, %llu wrong", i, size, static_cast<unsigned long long>(m.bytes)));
      if (f.net.has_irecvConsumed()) check(f.net.irecvConsumed(l.recv, 1, st.rreq[i]), "irecvConsumed");
      st.rreq[i] = nullptr;
      ++st.messages;
    } else {
      ++out;
    }
  }
  if (st.sreq[i]) {
    done = 0;
    check(f.net.test(st.sreq[i], &done, nullptr), "test(isend)");
    if (done) st.sreq[i] = nullptr;
    else ++out;
  }
  return out;
}

// The same over every link: the requests still outstanding.
std::size_t stream_turn(Ctx& f, Stream& st, std::uint32_t epoch, bool post_recv, bool post_send = true) {
  std::size_t out = 0;
  for (std::size_t i = 0; i < st.links.size(); ++i) out += link_turn(f, st, i, epoch, post_recv, post_send);
  return out;
}

// Every 256th turn of a scenario's stream: the peer's abort ends the run; true once --wait-file
// exists (at once without one); past the deadline, a timeout.
bool told_to_stop(Ctx& f, unsigned turn, const Deadline& d) {
  if ((turn & 255) != 0) return false;
  f.mgmt.check_abort();
  if (f.o.wait_file.empty() || ::access(f.o.wait_file.c_str(), F_OK) == 0) return true;
  d.check(f.o.timeout_s, "waiting for --wait-file");
  return false;
}

// 8. --comms N pairs stream 64-byte messages until --wait-file exists (meanwhile the guest script
//    takes a rail down: the comms fail over and go on), then every comm is closed and the plugin
//    finalized. The QPs left on the dead port take the kernel tens of seconds each to destroy:
//    finalize must still return within its bound (the JSON's calls.finalize), the rest being
//    destroyed in the background. The resource checks after finalize are informational here.
void dead_rail(Ctx& f) {
  Stream st;
  open_stream(f, st, kEpochRail);
  note_phase(f.o, f.rep, "traffic");
  f.mgmt.barrier("dead-rail traffic", f.o.timeout_s);
  Deadline d(f.o.timeout_s);
  for (unsigned turn = 1;; ++turn) {
    stream_turn(f, st, kEpochRail, true);
    if (told_to_stop(f, turn, d)) break;
  }
  // Drain: no new receives; sends go on while the peer still has receives posted (their isend
  // returns a request), until both ranks have nothing outstanding. Every message posted arrives
  // (over the standby once the rail is down).
  const std::string drained = "dead-rail drained";
  bool said = false, peer = false;
  Deadline drain(f.o.timeout_s);
  for (;;) {
    const std::size_t out = stream_turn(f, st, kEpochRail, false, true);
    if (out == 0 && !said) {
      f.mgmt.send(MsgType::barrier, drained);
      said = true;
    }
    if (!peer && f.mgmt.has_message()) {
      f.mgmt.check_abort();
      if (f.mgmt.recv(MsgType::barrier, drain, drained.c_str()) != drained)
        fail(Fail::peer, "management protocol: the peer is at another barrier than '" + drained + "'");
      peer = true;
    }
    if (said && peer && out == 0) break;
    drain.check(f.o.timeout_s, "completing the messages in flight after the rail went down");
    ::sched_yield();
  }
  log::info("fault dead-rail: %llu messages received over %zu links", static_cast<unsigned long long>(st.messages),
            st.links.size());
  f.rep.check("fault dead-rail: messages flowed on every link", st.messages >= st.links.size(),
              strf("%llu messages received over %zu links", static_cast<unsigned long long>(st.messages), st.links.size()));
  f.mgmt.barrier("dead-rail close", f.o.timeout_s);
  note_phase(f.o, f.rep, "close");
  const std::int64_t t0 = now_ns();
  for (std::size_t i = 0; i < st.links.size(); ++i) {
    check(f.net.deregMr(st.links[i].send, st.smh[i]), "deregMr(send comm)");
    check(f.net.deregMr(st.links[i].recv, st.rmh[i]), "deregMr(recv comm)");
    close_link(f.net, st.links[i]);
  }
  record(f, make_step(strf("close %zu comm pairs after the rail went down", st.links.size()), Entry::closeSend, false,
                      ncclSuccess, t0, static_cast<std::uint64_t>(2 * st.links.size())));
  ::munmap(st.mem, st.bytes);
}

// 9. --comms N pairs, each with two receives posted and one send in flight in each direction;
//    deregMr, then finalize without closing anything (NCCL's abort path at its worst). Rank 1 finalizes
//    300 ms after rank 0, so its control tasks are busy with rank 0's vanished QPs (failovers,
//    error completions) when its own finalize comes. Finalize must close what NCCL left open and
//    release everything (the usual resource checks after finalize apply), without a crash.
void finalize_open(Ctx& f) {
  static Stream open;  // never freed: the plugin may still use the comms' memory until finalize
  Stream* st = &open;
  open_stream(f, *st, kEpochOpen);
  f.mgmt.barrier("finalize-open posting", f.o.timeout_s);
  stream_turn(f, *st, kEpochOpen, true);   // one receive and (once the peer's is there) one send per comm
  for (std::size_t i = 0; i < st->links.size(); ++i) {  // a second receive each
    void* data = st->rbuf(i);
    std::size_t cap = st->msg;
    int tag = 1;
    void* req = nullptr;
    check(f.net.irecv(st->links[i].recv, 1, &data, &cap, &tag, &st->rmh[i], &req), "irecv");
  }
  f.mgmt.barrier("finalize-open posted", f.o.timeout_s);
  // NCCL's free path deregisters the buffers; it is the closes that are left out here. (A handle
  // never deregistered stays the caller's: finalize cannot free it, a later deregMr would use it.)
  for (std::size_t i = 0; i < st->links.size(); ++i) {
    check(f.net.deregMr(st->links[i].send, st->smh[i]), "deregMr(send comm)");
    check(f.net.deregMr(st->links[i].recv, st->rmh[i]), "deregMr(recv comm)");
  }
  log::info("fault finalize-open: finalize with %zu comm pairs open and requests outstanding%s", st->links.size(),
            f.o.rank == 1 ? ", 300 ms after the peer's" : "");
  if (f.o.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

// 10. NCCL's abort (ncclCommAbort, ncclCommRevoke) on dead ports: --comms N pairs stream messages
//     of the largest --sizes entry until --wait-file exists, while the guest script takes this host's rails down, so
//     that the comms fail (a link whose call returns an error is left alone from then on, as
//     NCCL's proxy stops driving a failed connection: no error ends this run). Then nothing is
//     drained: every comm is closed with its requests outstanding (deregMr first, as NCCL's free
//     path does), each close timed, and finalize follows (calls.finalize). Close and finalize
//     must each return within 1 s (issue #19): NCCL's abort must not hang on the plugin.
void abort_dead(Ctx& f) {
  Stream st;
  open_stream(f, st, kEpochAbort);
  note_phase(f.o, f.rep, "traffic");
  f.mgmt.barrier("abort traffic", f.o.timeout_s);
  std::vector<bool> failed(st.links.size(), false);
  std::size_t errors = 0;
  std::string first_error;
  Deadline d(f.o.timeout_s);
  for (unsigned turn = 1;; ++turn) {
    for (std::size_t i = 0; i < st.links.size(); ++i) {
      if (failed[i]) continue;
      try {
        link_turn(f, st, i, kEpochAbort, true, true);
      } catch (const DriverError& e) {
        if (e.kind != Fail::plugin) throw;
        failed[i] = true;
        if (errors++ == 0) first_error = e.what();
      }
    }
    if (told_to_stop(f, turn, d)) break;
  }
  std::size_t outstanding = 0;
  for (std::size_t i = 0; i < st.links.size(); ++i) outstanding += (st.sreq[i] != nullptr) + (st.rreq[i] != nullptr);
  log::info("fault abort: %llu messages received; %zu of %zu links failed (first: %s); closing with %zu request(s) "
            "outstanding", static_cast<unsigned long long>(st.messages), errors, st.links.size(),
            errors ? first_error.c_str() : "none", outstanding);
  note_phase(f.o, f.rep, "close");
  double slowest_ms = 0;
  ncclResult_t worst = ncclSuccess;
  const std::int64_t t0 = now_ns();
  auto note = [&](std::int64_t c0, ncclResult_t r) {  // one comm's deregMr + close
    slowest_ms = std::max(slowest_ms, ms_since(c0));
    if (r != ncclSuccess && worst == ncclSuccess) worst = r;
  };
  for (std::size_t i = 0; i < st.links.size(); ++i) {
    Link& l = st.links[i];
    std::int64_t c0 = now_ns();
    ncclResult_t r = f.net.deregMr(l.send, st.smh[i]);
    note(c0, r == ncclSuccess ? f.net.closeSend(l.send) : r);
    c0 = now_ns();
    r = f.net.deregMr(l.recv, st.rmh[i]);
    note(c0, r == ncclSuccess ? f.net.closeRecv(l.recv) : r);
    l = Link{};
  }
  record(f, make_step(strf("close %zu comm pairs with %zu request(s) outstanding, %zu failed", st.links.size(),
                           outstanding, errors),
                      Entry::closeSend, false, worst, t0, static_cast<std::uint64_t>(2 * st.links.size())),
         strf("slowest deregMr + close %.1f ms", slowest_ms));
  f.rep.check("fault abort: every deregMr + close returned within 1 s", slowest_ms <= 1000.0,
              strf("slowest %.1f ms", slowest_ms));
  // The requests' buffers: NCCL frees them after the close; the plugin must not touch them now.
  ::munmap(st.mem, st.bytes);
}

}  // namespace

std::span<const FaultScenario> fault_scenarios() {
  static constexpr FaultScenario kScenarios[] = {
      {.name = "bad-handle",
       .help = "connect() fails at once with a corrupted magic, version or length",
       .run = bad_handle},
      {.name = "bad-token",
       .help = "connect() with the handle's token flipped fails",
       .run = bad_token},
      {.name = "close-listen",
       .help = "listener closed before / during the handshake: connect() fails",
       .run = close_listen},
      {.name = "close-listen-ack",
       .help = "listener closed while holding an ack (HA_NCCL_TEST_ACK_DELAY_MS)",
       .run = close_listen_ack},
      {.name = "flood",
       .help = "bad raw connectors among good ones: one WARN each, no fd left",
       .run = flood},
      {.name = "abandon-connect",
       .help = "rank 1 calls connect() once, never again, and finalizes",
       .run = abandon_connect},
      {.name = "oversize",
       .help = "isend of 1 byte more than the posted receive fails",
       .run = oversize},
      {.name = "peer-death",
       .help = "rank 1 SIGKILLs itself mid-stream: rank 0's plugin reports it",
       .run = peer_death,
       .min_messages = 2, .messages_why = "rank 1 dies after half of them"},
      {.name = "bad-dev",
       .help = "out-of-range --dev: getProperties, listen and connect fail",
       .run = bad_dev,
       .bad_dev = true},
      {.name = "late-writes",
       .help = "recv comm closed with receives posted: no late send lands",
       .run = late_writes},
      {.name = "dead-rail",
       .help = "--comms N pairs stream until --wait-file exists, then close",
       .run = dead_rail,
       .needs_comms = true, .wait_file = true, .background = true},
      {.name = "finalize-open",
       .help = "--comms N pairs, requests outstanding: finalize without closing",
       .run = finalize_open,
       .needs_comms = true, .background = true},
      {.name = "abort",
       .help = "--comms N pairs stream until --wait-file exists (rails taken down meanwhile), close at once",
       .run = abort_dead,
       .needs_comms = true, .wait_file = true, .background = true},
  };
  return kScenarios;
}

const FaultScenario* find_fault(const std::string& name) {
  for (const FaultScenario& f : fault_scenarios())
    if (name == f.name) return &f;
  return nullptr;
}

bool is_fault_name(const std::string& name) { return find_fault(name) != nullptr; }

const char* fault_names() {
  static const std::string names = [] {
    std::string s;
    for (const FaultScenario& f : fault_scenarios()) s += (s.empty() ? "" : ", ") + std::string(f.name);
    return s;
  }();
  return names.c_str();
}

std::string fault_usage() {
  std::string s = "  --fault NAME         run an error-path scenario instead of the ring and data phases (both ranks; "
                  "see README):\n";
  for (const FaultScenario& f : fault_scenarios()) s += strf("                       %-17s %s\n", f.name, f.help);
  return s;
}

void check_fault_options(const Options& o) {
  if (!o.fault.empty() && !is_fault_name(o.fault))
    fail(Fail::usage, "--fault: expected one of " + std::string(fault_names()) + ", got '" + o.fault + "'");
  const FaultScenario* f = find_fault(o.fault);
  if (f && f->needs_comms && o.comms < 1)
    fail(Fail::usage, "--fault " + o.fault + " needs --comms N >= 1 (the comm pairs it opens)");
  if (!o.wait_file.empty() && !(f && f->wait_file) && o.comms_hold_s <= 0) {
    std::string with;
    for (const FaultScenario& w : fault_scenarios())
      if (w.wait_file) with += (with.empty() ? "--fault " : " or ") + std::string(w.name);
    fail(Fail::usage, "--wait-file is for --comms-hold or " + with);
  }
  if (f && o.messages < f->min_messages)
    fail(Fail::usage, strf("--fault %s needs --messages >= %llu (%s)", f->name,
                           static_cast<unsigned long long>(f->min_messages), f->messages_why));
}

void run_fault(const Options& o, Plugin& net, Mgmt& mgmt, Report& rep) {
  Ctx f{o, net, mgmt, rep};
  rep.fault.name = o.fault;
  mgmt.barrier("fault " + o.fault, o.timeout_s);
  const FaultScenario* scenario = find_fault(o.fault);
  if (!scenario) fail(Fail::usage, "unknown --fault " + o.fault);
  scenario->run(f);
}

}  // namespace hnd
