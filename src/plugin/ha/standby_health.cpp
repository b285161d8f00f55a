// Standby health: the state of a comm's standby path (StandbyHealth) and its one writer. Its
// transitions are said in one place (set_standby: INFO, or WARN when protection is lost or comes
// back); tend_standby watches the standby path itself (its device's events, its completions, its
// pair's heartbeats) at every control step.
#include "ha/control_ops.hpp"
#include "ha/liveness.hpp"
#include "ha/profiler.hpp"

namespace nccl_ha::plugin {

// The writer of StandbyHealth (ControlPlane): defined here only.
struct StandbyWriter {
  static StandbyHealth& health(CommBase& c) noexcept { return c.cp.standby_; }
};

namespace {

StandbyHealth& h_of(CommBase& c) noexcept { return StandbyWriter::health(c); }

// The standby path is dead (an error completion, a failed post, a fault of its device): down
// until re-protection replaces it (reprotect.cpp drives a path whose link failed).
void standby_failed(CommBase& c, Path& sb, const std::string& why) {
  ++h_of(c).failures;
  sb.fault_gen = sb.dev->fault_gen.load(std::memory_order_relaxed);
  sb.link.store(Path::failed, std::memory_order_relaxed);
  if (auto s = path_to_error(sb); !s) HA_DEBUG("NET/HA: %s: %s", c.id.c_str(), s.error().message.c_str());
  set_standby(c, StandbyHealth::down, why);
}

}  // namespace

void tend_standby(CommBase& c) {
  StandbyHealth& h = h_of(c);
  if (h.state == StandbyHealth::none) return;
  Path* sb = c.paths[c.standby_slot()].get();
  if (!sb) return;
  if (h.state == StandbyHealth::connecting) {
    if (c.cp.rp().job) return;  // being re-protected (reprotect.cpp): no heartbeats on the path it replaces
    const int link = sb->link.load(std::memory_order_acquire);  // the initial background connection
    if (link == Path::connecting) return;
    if (link == Path::failed) {
      set_standby(c, StandbyHealth::down, "setup failed: " + sb->why);
      return;
    }
    sb->fault_gen = sb->dev->fault_gen.load(std::memory_order_relaxed);
    set_standby(c, StandbyHealth::up, "connected on " + sb->dev->port.id());
  }
  if (sb->link.load(std::memory_order_relaxed) != Path::up) return;  // dead until re-protected
  if (sb->dev->fault_gen.load(std::memory_order_relaxed) != sb->fault_gen) {
    // A port error or device event on its device, whatever the QP says yet: the path is given up
    // (ERROR, so the peer's heartbeats fail too) and re-protection builds another.
    standby_failed(c, *sb, describe_fault(*sb->dev));
    return;
  }
  ibv_wc err{};
  err.status = IBV_WC_SUCCESS;
  poll_and_arm(c, *sb, 8, &err);
  if (err.status != IBV_WC_SUCCESS) {  // the QP is in ERROR now: down until re-protected
    standby_failed(c, *sb, "heartbeat failed: " + describe_error(*sb, err));
    return;
  }
  if (!sb->pair) return;
  if (sb->pair->silent() && h.state == StandbyHealth::up) {
    ++h.failures;
    set_standby(c, StandbyHealth::down, sb->pair->why());
    h.silent = true;
  } else if (!sb->pair->silent() && h.state == StandbyHealth::down && h.silent) {
    set_standby(c, StandbyHealth::up, "heartbeats answered again");
  }
}

void init_standby(CommBase& c, bool connecting) {
  h_of(c).state = connecting ? StandbyHealth::connecting : StandbyHealth::none;
}

void restart_failback_hold(CommBase& c, std::uint64_t now) { h_of(c).up_since_ns = now; }

void set_standby(CommBase& c, StandbyHealth::State state, const std::string& why, bool said) {
  StandbyHealth& h = h_of(c);
  if (h.state == state && h.why == why) return;
  h.silent = false;  // tend_standby sets it after a down for unanswered heartbeats
  if (state == StandbyHealth::up && h.state != StandbyHealth::up) h.up_since_ns = now_ns();
  bool loud = false;
  if (state == StandbyHealth::down && !h.lost) {
    h.lost = true;
    h.lost_ns = now_ns();
    loud = !said;
  } else if (state == StandbyHealth::up && h.lost) {
    h.lost = false;
    loud = true;
  }
  h.state = state;
  h.why = why;
  const Device* d = c.devs[c.standby_slot()];
  const std::string port_id = d ? d->port.id() : "-";  // named: id() returns a temporary
  const char* port = port_id.c_str();
  if (state == StandbyHealth::up && loud) profile_protected(c, d ? d->index : -1);
  if (loud && state == StandbyHealth::up)
    HA_WARN("NET/HA: standby %s of %s is %s (%s): protected again", port, c.id.c_str(), standby_name(state), why.c_str());
  else if (loud)
    HA_WARN("NET/HA: standby %s of %s is %s (%s): this connection is NOT protected until a standby is rebuilt", port,
            c.id.c_str(), standby_name(state), why.c_str());
  else
    HA_INFO("NET/HA: standby %s of %s is %s (%s)", port, c.id.c_str(), standby_name(state), why.c_str());
  write_stats(c, "standby", [&](net::JsonWriter& j) {
    j.kv("state", standby_name(state));
    j.kv("why", why);
  });
}

}  // namespace nccl_ha::plugin
