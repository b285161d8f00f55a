// ha-net-driver: connection setup and teardown between the two ranks, as NCCL's proxy does it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mgmt.hpp"
#include "options.hpp"
#include "plugin.hpp"
#include "report.hpp"

namespace hnd {

// One send comm to the peer and one recv comm from it (a two-rank ring).
struct Link {
  void* send = nullptr;
  void* recv = nullptr;
  void* listen = nullptr;  // closed as soon as accept() returned the recv comm, like NCCL
};

// One message each way over a send/recv comm pair, polled without blocking (the comms test, the
// churn): the pair's registrations, its requests and their completion.
struct PairMessage {
  void* smh = nullptr;
  void* rmh = nullptr;
  void* sreq = nullptr;
  void* rreq = nullptr;
  bool sdone = false, rdone = false;
  int rsize = -1;  // what test() reported for the receive
};

// Opens n links at once: n listen() calls, the 128-byte handles go to the peer in one message,
// then connect()/accept() are called round-robin (both are non-blocking and return NULL comms
// until ready) until every link has both comms or the timeout expires. The same handle buffer
// is passed to every connect() retry of a link (plugins may keep connection state in it).
std::vector<Link> open_links(Plugin& net, Mgmt& mgmt, int dev, int n, double timeout_s, ConnectStats* st);
void close_link(Plugin& net, Link& l);

// --phase-file: "<phase> <unix_ms>" whenever a phase starts (written atomically through F.tmp), so
// scripts can time faults against the phases. Also sets rep.phase.
void note_phase(const Options& o, Report& rep, const std::string& phase, std::int64_t unix_ms = 0);  // closeSend, closeRecv, closeListen (whichever are open)

// --comms N: open N links, move --comms-rounds verified 64-byte messages over each in both
// directions, snapshot RSS/fds, close them all, snapshot again.
// `phase`: called with "comms rounds" when the messages start (with R > 1), "comms hold" when the
// --comms-hold wait begins (after both ranks' messages) and "comms close" when this rank is done.
CommsResult run_comms_test(Plugin& net, Mgmt& mgmt, const Options& o, int rank,
                           const std::function<void(const char*)>& phase = {});

}  // namespace hnd
