// PathJob: verbs work for one comm (building or connecting a path: QP and CQ creation, the
// INIT->RTR->RTS transitions, a port query), run on the reactor's worker threads
// (Reactor::offload) so that it never sits in front of port events and failover conversations
// on the progress thread. Used by re-protection (reprotect.cpp) and the flush QPs (flush_paths.cpp);
// build_path / connect_path below are a re-protection job's work.
//
// The comm may be closed while a job runs: the job (and the paths it builds) lives as long as
// the comm or the worker holds it; a job the comm gave up (`cancelled`) that has not started yet
// does no verbs work. Whoever drops the last reference, the paths nobody installed go to the
// reaper (destroying a QP can block).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "core/comm.hpp"
#include "nccl_ha/reactor/worker_pool.hpp"

namespace nccl_ha::plugin {

struct PathJob {
  enum : int {
    running,  // queued or running on a worker
    done,     // the work succeeded (`path` / `flush` hold what it built)
    failed    // the work failed, threw, was given up (`cancelled`) or refused (`why` says)
  };
  std::atomic<int> state{running};        // set on the progress thread when the work has ended
  std::atomic<bool> cancelled{false};     // the comm no longer wants it (any thread)
  std::shared_ptr<Path> path;             // re-protection: the new standby path
  std::shared_ptr<Path> flush;            // receive comms with flush QPs: a new loopback path (flush_paths.cpp)
  std::string flush_why;                  // why `flush` is null although one was asked for
  std::uint32_t flush_gen = 0;            // the device's recover_gen when `flush` was built
  std::string why;                        // failed: what
  SlotKeys keys;                          // a move of the slot to another device: the registrations there (rebind.hpp)
  ~PathJob();
};

// Runs work(job) on a worker; when it has ended the job's state is set and the comm woken (on the
// progress thread). `job->path` may be preset (a path to connect).
// `order`: reactor::JobOrder::peer_waits when the peer waits for the outcome under a deadline (the
// receive side's answer to a re-protection request, the sender's connect of an answered one).
std::shared_ptr<PathJob> start_job(CommBase& c, std::shared_ptr<Path> path, std::function<Status(PathJob&)> work,
                                   reactor::JobOrder order = reactor::JobOrder::fifo);
// The job's outcome once finished: 1 done, -1 failed (job.why), 0 still running.
int job_outcome(const PathJob& job);

// A re-protection attempt's job on `d`: a new path for the standby slot (connected to
// `remote_to_connect` when given), on another device than the slot's (`rebind`: the move's
// generation, begin_rebind, else 0) the comm's memory registered there too, and on a receive comm
// with flush QPs the device's loopback QP. Runs build_path (the port's state and address queried
// afresh), prepare_rebind, connect_path and build_flush_path on a worker.
std::shared_ptr<PathJob> start_build(CommBase& c, Device& d, const net::Endpoint* remote_to_connect,
                                     std::uint64_t rebind);
// Connects the job's path to `remote` and posts its control receives (on a worker).
Status connect_path(PathJob& job, const net::Endpoint& remote);

}  // namespace nccl_ha::plugin
