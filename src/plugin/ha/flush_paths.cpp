// The flush paths: the loopback QPs of a receive comm's RDMA READ flushes (datapath/flush.cpp),
// built and tended by the control plane.
//
// The loopback QPs follow the comm. A READ posted while its port's link is down (its GID gone)
// fails and leaves that QP in ERROR for good, and a port that came back may have a new GID: so
// the control plane (tend_flush, on the progress thread) replaces them. With re-protection: the
// verbs job that builds a standby on a device builds that device's loopback QP too (path_job.hpp,
// reprotect.cpp). On its own: a QP that failed (an error completion, a failed post), and one whose
// port came back or changed its GID since it was built (Device::recover_gen), are rebuilt on a
// worker thread when the port is up (backoff 100 ms .. 5 s after a failed attempt). A new QP
// waits in flush_next until no READ is outstanding on the one it replaces, then the control plane
// swaps it in while it holds the comm (CommBase::owned): iflush / test just use flush_paths, with
// no lock and no allocation of their own. A slot a flush waits for is rebuilt at once, even the
// standby's (whose QP re-protection would otherwise bring with the standby).
#include <algorithm>
#include <cstring>

#include "core/path_ops.hpp"
#include "core/reaper.hpp"
#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "ha/path_job.hpp"
#include "nccl_ha/net/discovery.hpp"

namespace nccl_ha::plugin {

// The writer of a receive comm's flush-QP rebuilds (ControlPlane): defined here only.
struct FlushWriter {
  static FlushRebuild& of(CommBase& c) noexcept { return c.cp.flush_; }
};
namespace {
FlushRebuild& rebuild_of(CommBase& c) noexcept { return FlushWriter::of(c); }
}  // namespace
namespace {

constexpr int kFlushDepth = 2 * kMaxRequests;  // a READ of each flush outstanding, and abandoned ones
constexpr std::uint64_t kFirstRebuildBackoffNs = 100'000'000;
constexpr std::uint64_t kMaxRebuildBackoffNs = 5'000'000'000;
constexpr std::uint64_t kDrainPollNs = 2'000'000;  // a new QP waits for the old one's reads

// Replaces the slot's QP by the waiting one once no READ is outstanding on it (reaping what it can).
// Returns false while it has to wait.
bool install_next(RecvComm& c, int s) {
  Path* cur = c.flush_paths[s].get();
  if (cur && cur->sends_out > 0 && poll_flush(c, s) != ncclSuccess) return true;  // the comm failed
  if (cur && cur->sends_out > 0) return false;
  const bool replaced = cur != nullptr;
  retire(std::move(c.flush_paths[s]));
  c.flush_paths[s] = std::move(rebuild_of(c).next[s]);
  if (replaced) ++c.stats.flush_rebuilds[s];
  c.flush_waiting = static_cast<std::uint8_t>(c.flush_waiting & ~slot_bit(s));
  HA_INFO("NET/HA: %s: flush QP %u on %s %s", c.id.c_str(), c.flush_paths[s]->local.qpn,
          c.devs[s]->port.id().c_str(), replaced ? "replaces the old one" : "installed");
  return true;
}

// A rebuild of the slot's loopback QP on its own (no re-protection brings one).
void start_rebuild(RecvComm& c, int s) {
  Device* d = c.devs[s];
  const std::uint32_t gen = d->recover_gen.load(std::memory_order_relaxed);
  rebuild_of(c).want[s] = false;
  HA_INFO("NET/HA: %s: rebuilding the flush QP on %s (%s)", c.id.c_str(), d->port.id().c_str(),
          flush_qp_usable(c, s) ? "its port came back or changed its GID" : "it failed");
  rebuild_of(c).job[s] = start_job(c, nullptr, [reaper = c.reaper, d, s, gen](PathJob& job) -> Status {
    auto p = build_flush_path(reaper, *d, s);
    if (!p) return std::move(p).error();
    job.flush = std::move(p).value();
    job.flush_gen = gen;
    return {};
  });
}

// HA_NCCL_TEST_FLUSH_QP_ERROR_MS: the active slot's loopback QP moved to ERROR, as a fault would
// leave it (the next READ on it fails), at each of the given times. Returns the next one (0: none).
std::uint64_t inject_flush_errors(RecvComm& c, std::uint64_t now) {
  if (!kTestHooks) return 0;  // a build without test hooks (test_hooks.hpp)
  CommHooks& h = c.hooks;
  const auto& at = h.flush_error_ns;
  for (; h.flush_errors_done < at.size() && now >= at[h.flush_errors_done]; ++h.flush_errors_done) {
    Path* p = c.flush_paths[c.active()].get();
    if (!p) continue;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    const int rc = ibv_modify_qp(p->qp(), &attr, IBV_QP_STATE);
    HA_INFO("NET/HA: %s: test: flush QP %u on %s moved to ERROR (HA_NCCL_TEST_FLUSH_QP_ERROR_MS)%s", c.id.c_str(),
            p->local.qpn, p->dev->port.id().c_str(), rc ? (std::string(": ") + std::strerror(rc)).c_str() : "");
  }
  return h.flush_errors_done < at.size() ? at[h.flush_errors_done] : 0;
}

}  // namespace

Expected<std::shared_ptr<Path>> build_flush_path(Reaper* reaper, Device& d, int slot) {
  net::PortInfo port = d.port;  // the state and GID as they are now
  if (auto s = net::refresh_address(d.ctx.get(), port); !s) return std::move(s).error();
  if (!port.active()) return make_error(Errc::unsupported, d.port.id() + " is " + net::port_state_name(port.state));
  auto p = make_path(reaper, d, slot, kFlushDepth, 1);
  if (!p) return std::move(p).error();
  Path& path = **p;
  path.local = net::local_endpoint(path.qp(), port, path.local.psn);
  if (auto s = net::connect_rc_qp(path.qp(), path.local, path.local, d.timeouts); !s) return std::move(s).error();
  path.link.store(Path::up, std::memory_order_relaxed);
  return std::move(p).value();
}

Status setup_flush(RecvComm& c) {
  const State* st = state();
  if (!st || std::none_of(std::begin(c.devs), std::end(c.devs), [st](const Device* d) { return d && st->flush_qps(*d); }))
    return {};  // no memory that needs reading back can be registered on the comm's devices
  c.force_flush = st->config.force_flush;
  c.flush_on = true;
  for (int s = 0; s < kSlots; ++s) {
    Device* dev = c.devs[s];
    if (!dev) continue;
    rebuild_of(c).gen[s] = dev->recover_gen.load(std::memory_order_relaxed);
    Status ok;
    if (auto mr = net::register_mr(dev->pd.get(), &c.flush_sink[s], sizeof c.flush_sink[s], IBV_ACCESS_LOCAL_WRITE))
      c.keys[s].flush_sink = std::move(mr).value();
    else
      ok = std::move(mr).error();
    if (ok) {
      if (auto p = build_flush_path(c.reaper, *dev, s))
        c.flush_paths[s] = std::move(p).value();
      else
        ok = std::move(p).error();
    }
    if (!ok) {
      if (s == c.active()) return ok;  // the flush QP of the path the comm starts on is required
      HA_WARN("NET/HA: %s: no flush QP on %s (%s); flushes read through %s until one is built", c.id.c_str(),
              dev->port.id().c_str(), ok.error().message.c_str(), c.devs[c.active()]->port.id().c_str());
      rebuild_of(c).want[s] = c.keys[s].flush_sink != nullptr;  // the control plane builds it when it can
    }
  }
  const std::uint64_t start = now_ns();
  for (const int ms : st->hooks.flush_qp_error_ms())
    c.hooks.flush_error_ns.push_back(start + static_cast<std::uint64_t>(ms) * 1000000ull);
  return {};
}

void close_flush(RecvComm& c) {
  FlushRebuild& fr = rebuild_of(c);
  for (int s = 0; s < kSlots; ++s) {
    retire(std::move(c.flush_paths[s]));
    retire(std::move(fr.next[s]));
    if (fr.job[s]) fr.job[s]->cancelled.store(true, std::memory_order_relaxed);
    fr.job[s].reset();
  }
}

void drop_flush_path(RecvComm& c, int slot) {
  retire(std::move(c.flush_paths[slot]));
  rebuild_of(c).want[slot] = false;
}

void offer_flush_path(RecvComm& c, int slot, PathJob& job) {
  FlushRebuild& fr = rebuild_of(c);
  if (!c.flush_on) return;
  if (!job.flush) {
    if (!job.flush_why.empty()) {
      HA_INFO("NET/HA: %s: the flush QP on %s was not rebuilt with the standby: %s", c.id.c_str(),
              c.devs[slot]->port.id().c_str(), job.flush_why.c_str());
      fr.want[slot] = true;
    }
    return;
  }
  retire(std::move(fr.next[slot]));
  fr.next[slot] = std::move(job.flush);
  fr.gen[slot] = job.flush_gen;
  fr.want[slot] = false;
  if (fr.job[slot]) fr.job[slot]->cancelled.store(true, std::memory_order_relaxed);  // not needed now
  fr.job[slot].reset();
  install_next(c, slot);
}

std::uint64_t tend_flush(RecvComm& c, std::uint64_t now) {
  FlushRebuild& fr = rebuild_of(c);
  if (!c.flush_on || c.error != ncclSuccess) return 0;
  std::uint64_t next = 0;
  const auto soonest = [&next](std::uint64_t t) { next = next == 0 ? t : std::min(next, t); };
  if (const std::uint64_t at = inject_flush_errors(c, now)) soonest(at);
  for (int s = 0; s < kSlots; ++s) {
    Device* d = c.devs[s];
    if (!d || !c.keys[s].flush_sink) continue;
    if (const auto& job = fr.job[s]) {  // a rebuild of its own
      const int o = job_outcome(*job);
      if (o == 0) continue;  // it wakes us
      if (o > 0) {
        auto done = job;
        offer_flush_path(c, s, *done);
        if (c.error != ncclSuccess) return 0;
      } else {
        fr.want[s] = true;
        fr.backoff_ns[s] =
            fr.backoff_ns[s] ? std::min(fr.backoff_ns[s] * 2, kMaxRebuildBackoffNs) : kFirstRebuildBackoffNs;
        fr.retry_ns[s] = now + fr.backoff_ns[s];
        HA_INFO("NET/HA: %s: rebuilding the flush QP on %s failed (%s); next attempt in %llu ms", c.id.c_str(),
                d->port.id().c_str(), job->why.c_str(),
                static_cast<unsigned long long>(fr.backoff_ns[s] / 1000000));
        fr.job[s].reset();
      }
    }
    if (fr.next[s]) {
      if (!install_next(c, s)) soonest(now + kDrainPollNs);
      if (c.error != ncclSuccess) return 0;
      continue;
    }
    if (fr.job[s]) continue;
    if (const auto gen = d->recover_gen.load(std::memory_order_relaxed); gen != fr.gen[s]) {
      fr.gen[s] = gen;  // the port came back, or its GID changed, since the QP was built
      fr.want[s] = true;
    }
    if (!flush_qp_usable(c, s)) fr.want[s] = true;
    if (!fr.want[s]) {
      fr.backoff_ns[s] = 0;
      continue;
    }
    // The standby's device without a standby up: re-protection builds it, with the flush QP;
    // unless a flush waits for it (its device wrote the data): then now.
    if (s == c.standby_slot() && (c.cp.rp().job || c.cp.standby().state != StandbyHealth::up) && !(c.flush_waiting & slot_bit(s)))
      continue;
    if (!d->port_up.load(std::memory_order_relaxed)) continue;  // PORT_ACTIVE brings us back
    if (now < fr.retry_ns[s]) {
      soonest(fr.retry_ns[s]);
      continue;
    }
    start_rebuild(c, s);
  }
  return next;
}

}  // namespace nccl_ha::plugin
