#include "ha/path_job.hpp"

#include "core/reaper.hpp"
#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "ha/rebind.hpp"
#include "nccl_ha/net/discovery.hpp"

namespace nccl_ha::plugin {

// A plain drop, never retire(): the comm may have installed the job's paths (then they carry its
// traffic). A path nobody installed goes with its last reference, to the reaper, which moves its
// QP to ERROR first (reaper.hpp).
PathJob::~PathJob() = default;

std::shared_ptr<PathJob> start_job(CommBase& c, std::shared_ptr<Path> path, std::function<Status(PathJob&)> work,
                                   reactor::JobOrder order) {
  auto job = std::make_shared<PathJob>();
  job->path = std::move(path);
  State* st = state();
  if (!st) {
    job->why = "the plugin is finalized";
    job->state.store(PathJob::failed, std::memory_order_release);
    return job;
  }
  st->reactor.offload(
      [job, work = std::move(work)]() -> Status {
        if (job->cancelled.load(std::memory_order_relaxed)) return make_error(Errc::closed, "given up before it ran");
        return work(*job);
      },
      [job, owner = c.weak_from_this()](std::exception_ptr ep, std::optional<Status> s) {
        if (ep) {
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            job->why = e.what();
          } catch (...) {
            job->why = "unknown exception";
          }
        } else if (!*s) {
          job->why = s->error().message;
        }
        job->state.store(!ep && *s ? PathJob::done : PathJob::failed, std::memory_order_release);
        if (auto comm = owner.lock()) wake_here(*comm);
      },
      order);
  return job;
}

int job_outcome(const PathJob& job) {
  const int s = job.state.load(std::memory_order_acquire);
  return s == PathJob::done ? 1 : s == PathJob::failed ? -1 : 0;
}

namespace {

// A fresh path on `dev`, its port's state and address (GID) queried again: the state and address
// only (refresh_address), not the whole of discovery's query (the device's attributes, sysfs),
// which was most of a worker's time in a re-protection storm (scale bench profile).
Status build_path(PathJob& job, Reaper* reaper, Device& d, int slot, int send_depth, int recv_depth,
                  std::weak_ptr<CommBase> owner) {
  if (!d.port_up.load(std::memory_order_relaxed)) return make_error(Errc::unsupported, d.port.id() + " is not active");
  net::PortInfo port = d.port;
  if (auto s = net::refresh_address(d.ctx.get(), port); !s) return s;
  if (!port.active()) return make_error(Errc::unsupported, d.port.id() + " is " + net::port_state_name(port.state));
  auto p = make_path(reaper, d, slot, send_depth, recv_depth, std::move(owner), d.qp_plan);
  if (!p) return std::move(p).error();
  job.path = std::move(p).value();
  return {};
}

}  // namespace

// Connects the job's path and posts its control receives.
Status connect_path(PathJob& job, const net::Endpoint& remote) {
  Path& p = *job.path;
  p.remote = remote;
  if (auto s = connect_path(p, remote); !s) return s;
  if (int rc = post_control_recvs(p, kCtlRecvs); rc != 0) return errno_error(Errc::verbs, "posting control receives", rc);
  return {};
}

std::shared_ptr<PathJob> start_build(CommBase& c, Device& d, const net::Endpoint* remote_to_connect,
                                     std::uint64_t rebind) {
  const int slot = c.standby_slot();
  Device* dp = &d;
  const QueueDepths depths = queue_depths(c.kind, d);
  const bool connect = remote_to_connect != nullptr;
  const net::Endpoint remote = connect ? *remote_to_connect : net::Endpoint{};
  // A flush QP needs the slot's flush sink: registered with the move, or there already.
  const bool flush = c.kind == CommKind::recv && static_cast<RecvComm&>(c).flush_on &&
                     (rebind || c.keys[slot].flush_sink);
  const std::uint32_t gen = dp->recover_gen.load(std::memory_order_relaxed);  // before the port is queried
  return start_job(c, nullptr, [reaper = c.reaper, dp, slot, depths, connect, remote, flush, gen, rebind,
                                qos = c.qos, owner = c.weak_from_this()](PathJob& job) {
    Status s = build_path(job, reaper, *dp, slot, depths.send, depths.recv, owner);
    if (s) job.path->qos = qos;  // a rebuilt standby keeps the connection's QoS
    if (s && rebind) {
      if (auto comm = owner.lock())
        s = prepare_rebind(*comm, *dp, slot, rebind, job.keys);
      else
        s = make_error(Errc::closed, "the comm is closed");
    }
    if (s && connect) s = connect_path(job, remote);
    if (s && flush) {  // the device's flush QP too; its failure does not fail the standby
      auto f = build_flush_path(reaper, *dp, slot);
      if (f) {
        job.flush = std::move(f).value();
        job.flush_gen = gen;
      } else {
        job.flush_why = f.error().message;
      }
    }
    return s;
  }, connect ? reactor::JobOrder::peer_waits : reactor::JobOrder::fifo);  // receive side: the sender waits
}

}  // namespace nccl_ha::plugin
