#include "path_job.hpp"

#include "control_ops.hpp"
#include "reaper.hpp"
#include "state.hpp"

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

}  // namespace nccl_ha::plugin
