#include "session.hpp"

#include <algorithm>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "logger.hpp"
#include "pattern.hpp"

namespace hnd {

std::vector<Link> open_links(Plugin& net, Mgmt& mgmt, int dev, int n, double timeout_s, ConnectStats* st) {
  std::vector<Link> links(static_cast<std::size_t>(n));
  std::string mine(static_cast<std::size_t>(n) * NCCL_NET_HANDLE_MAXSIZE, '\0');
  for (int i = 0; i < n; ++i) {
    check(net.listen(dev, &mine[static_cast<std::size_t>(i) * NCCL_NET_HANDLE_MAXSIZE], &links[static_cast<std::size_t>(i)].listen), "listen");
    if (!links[static_cast<std::size_t>(i)].listen) fail(Fail::plugin, "listen returned ncclSuccess with a NULL listenComm");
  }
  std::int64_t t0 = now_ns();
  mgmt.send(MsgType::handles, mine);
  Deadline d(timeout_s);
  std::string theirs = mgmt.recv(MsgType::handles, d, "the peer's listen handles");
  if (theirs.size() != mine.size())
    fail(Fail::peer, strf("peer sent %zu bytes of handles, expected %zu", theirs.size(), mine.size()));
  int pending = 2 * n;
  unsigned turn = 0;
  while (pending > 0) {
    bool progress = false;
    for (int i = 0; i < n; ++i) {
      Link& l = links[static_cast<std::size_t>(i)];
      if (!l.send) {
        ++st->connect_calls;
        check(net.connect(dev, &theirs[static_cast<std::size_t>(i) * NCCL_NET_HANDLE_MAXSIZE], &l.send), "connect");
        if (l.send) {
          --pending;
          progress = true;
        }
      }
      if (!l.recv) {
        ++st->accept_calls;
        check(net.accept(l.listen, &l.recv), "accept");
        if (l.recv) {
          --pending;
          progress = true;
          check(net.closeListen(l.listen), "closeListen");
          l.listen = nullptr;
        }
      }
    }
    if (pending == 0) break;
    if ((++turn & 63) == 0) mgmt.check_abort();
    if (d.expired())
      fail(Fail::timeout, strf("timeout after %g s in connect/accept (%d of %d comms still NULL; %llu connect and "
                               "%llu accept calls)", timeout_s, pending, 2 * n,
                               static_cast<unsigned long long>(st->connect_calls),
                               static_cast<unsigned long long>(st->accept_calls)));
    if (!progress) std::this_thread::yield();
  }
  st->ms += static_cast<double>(now_ns() - t0) / 1e6;
  return links;
}

void note_phase(const Options& o, Report& rep, const std::string& phase, std::int64_t unix_ms) {
  rep.phase = phase;
  if (o.phase_file.empty()) return;
  std::string tmp = o.phase_file + ".tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%s %lld\n", phase.c_str(), static_cast<long long>(unix_ms ? unix_ms : wall_ms()));
    if (std::fclose(f) == 0) std::rename(tmp.c_str(), o.phase_file.c_str());
  }
}

void close_link(Plugin& net, Link& l) {
  if (l.send) check(net.closeSend(l.send), "closeSend");
  if (l.recv) check(net.closeRecv(l.recv), "closeRecv");
  if (l.listen) check(net.closeListen(l.listen), "closeListen");
  l = Link{};
}

namespace {

// The comms test: --comms-rounds 64-byte messages per link and direction, one at a time; each comm
// registers its own page. Round k's bytes are seeded by (sender, epoch + k, link): a copy of an
// earlier round delivered again, or one of another link, fails the check.
constexpr std::size_t kCommsMsg = 64, kCommsPage = 4096;
constexpr std::uint32_t kEpochComms = 300;

std::uint8_t* comms_sbuf(std::uint8_t* base, std::size_t i) { return base + i * 2 * kCommsPage; }
std::uint8_t* comms_rbuf(std::uint8_t* base, std::size_t i) { return base + i * 2 * kCommsPage + kCommsPage; }

// One turn on link i: posts what is not posted, tests what is outstanding, verifies a completed
// receive. Returns how many of its two requests completed in this turn.
std::size_t comms_turn(Plugin& net, int rank, Link& link, std::uint8_t* base, std::size_t i, PairMessage& q,
                       int round, CommsResult& r) {
  std::size_t completed = 0;
  if (!q.rreq) {
    void* data = comms_rbuf(base, i);
    std::size_t cap = kCommsPage;
    int tag = 0;
    void* mh = q.rmh;
    check(net.irecv(link.recv, 1, &data, &cap, &tag, &mh, &q.rreq), "irecv");
  }
  if (!q.sreq) check(net.isend(link.send, comms_sbuf(base, i), kCommsMsg, 0, q.smh, &q.sreq), "isend");
  if (q.rreq && !q.rdone) {
    int done = 0;
    check(net.test(q.rreq, &done, &q.rsize), "test(irecv)");
    if (done) {
      q.rdone = true;
      ++completed;
      pattern::Mismatch m;
      pattern::verify(comms_rbuf(base, i), 0, kCommsMsg, pattern::seed(1 - rank, kEpochComms + round, i), &m);
      if (m.bytes == 0 && q.rsize == static_cast<int>(kCommsMsg)) ++r.messages_ok;
      else log::warn("comms test: link %zu round %d: %d bytes reported, %llu wrong bytes", i, round, q.rsize,
                     static_cast<unsigned long long>(m.bytes));
      if (net.has_irecvConsumed()) check(net.irecvConsumed(link.recv, 1, q.rreq), "irecvConsumed");
    }
  }
  if (q.sreq && !q.sdone) {
    int done = 0;
    check(net.test(q.sreq, &done, nullptr), "test(isend)");
    if (done) {
      q.sdone = true;
      ++completed;
    }
  }
  return completed;
}

// Registers each link's pages, then moves the messages until every request of every round
// completed; a link starts its next round as soon as both requests of its last one completed.
void comms_messages(Plugin& net, Mgmt& mgmt, const Options& o, int rank, std::vector<Link>& links, std::uint8_t* base,
                    std::vector<PairMessage>& p, CommsResult& r) {
  for (std::size_t i = 0; i < links.size(); ++i) {
    check(net.regMr(links[i].send, comms_sbuf(base, i), kCommsPage, NCCL_PTR_HOST, &p[i].smh), "regMr(send comm)");
    check(net.regMr(links[i].recv, comms_rbuf(base, i), kCommsPage, NCCL_PTR_HOST, &p[i].rmh), "regMr(recv comm)");
    pattern::fill(comms_sbuf(base, i), 0, kCommsMsg, pattern::seed(rank, kEpochComms, i));
  }
  std::vector<int> round(links.size(), 0);
  Deadline d(o.timeout_s);
  std::size_t left = 2 * links.size() * static_cast<std::size_t>(o.comms_rounds);
  unsigned turn = 0;
  while (left > 0) {
    for (std::size_t i = 0; i < links.size(); ++i) {
      left -= comms_turn(net, rank, links[i], base, i, p[i], round[i], r);
      if (p[i].sdone && p[i].rdone && round[i] + 1 < o.comms_rounds) {  // the link's next round
        p[i].sreq = p[i].rreq = nullptr;
        p[i].sdone = p[i].rdone = false;
        p[i].rsize = -1;
        pattern::fill(comms_sbuf(base, i), 0, kCommsMsg, pattern::seed(rank, kEpochComms + ++round[i], i));
      }
    }
    if ((++turn & 63) == 0) mgmt.check_abort();
    d.check(o.timeout_s, o.comms_rounds > 1 ? "moving the comms test's rounds" : "moving one message over each comm of the comms test");
  }
}

// --comms-hold: the pairs stay open, untouched: the plugin's control plane alone tends them.
void comms_hold(Mgmt& mgmt, const Options& o, const std::function<void(const char*)>& phase, CommsResult& r) {
  mgmt.barrier("comms hold", o.timeout_s);
  if (phase) phase("comms hold");
  const std::int64_t start = now_ns();
  const std::int64_t until = start + static_cast<std::int64_t>(o.comms_hold_s * 1e9);
  while (now_ns() < until) {
    mgmt.check_abort();
    if (!o.wait_file.empty() && ::access(o.wait_file.c_str(), F_OK) == 0) {  // --wait-file: ended early
      r.held_s = static_cast<double>(now_ns() - start) / 1e9;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.held_s = o.comms_hold_s;
}

// Closing hands a comm's QPs, CQs and completion channels to the plugin's reaper: their fds
// close in the background, seconds later for many comms on a slow (emulated) host. The plugin
// also opens fds for a moment (the stats writer appends the close records), so the count that
// counts is the snapshot's, retaken until it is back or the bound passes.
void comms_fds_after_close(CommsResult& r) {
  constexpr std::int64_t kFdBoundNs = 10'000'000'000;
  const std::int64_t closed_ns = now_ns();
  for (;;) {
    const auto left_ms = static_cast<int>(std::max<std::int64_t>(0, closed_ns + kFdBoundNs - now_ns()) / 1'000'000);
    wait_fds_at_most(r.before.fds, left_ms);
    r.after_close = snapshot(false);
    if (r.after_close.fds <= r.before.fds || left_ms == 0) break;
  }
  r.fds_wait_ms = static_cast<double>(now_ns() - closed_ns) / 1e6;
  // Fewer than before is no leak: an fd of the earlier phases can close meanwhile (the plugin
  // closes a listener asynchronously, on its progress thread).
  r.fds_returned = r.after_close.fds <= r.before.fds;
}

}  // namespace

CommsResult run_comms_test(Plugin& net, Mgmt& mgmt, const Options& o, int rank,
                           const std::function<void(const char*)>& phase) {
  CommsResult r;
  r.ran = true;
  r.n = o.comms;
  mgmt.barrier("comms open", o.timeout_s);
  r.before = snapshot(false);
  ConnectStats cs;
  std::vector<Link> links = open_links(net, mgmt, o.dev, o.comms, o.timeout_s, &cs);
  r.connect_ms = cs.ms;

  std::size_t bytes = static_cast<std::size_t>(o.comms) * 2 * kCommsPage;
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fail(Fail::usage, "cannot allocate comms-test buffers");
  std::vector<PairMessage> p(links.size());
  if (o.comms_rounds > 1 && phase) phase("comms rounds");
  comms_messages(net, mgmt, o, rank, links, static_cast<std::uint8_t*>(mem), p, r);
  r.after_open = snapshot(false);
  if (o.comms_hold_s > 0) comms_hold(mgmt, o, phase, r);
  if (phase) phase("comms close");
  mgmt.barrier("comms close", o.timeout_s);
  for (std::size_t i = 0; i < links.size(); ++i) {
    check(net.deregMr(links[i].send, p[i].smh), "deregMr(send comm)");
    check(net.deregMr(links[i].recv, p[i].rmh), "deregMr(recv comm)");
    close_link(net, links[i]);
  }
  ::munmap(mem, bytes);
  comms_fds_after_close(r);
  if (r.n > 0) r.rss_per_comm_kib = static_cast<double>(r.after_open.rss_kib - r.before.rss_kib) / r.n;
  return r;
}

}  // namespace hnd
