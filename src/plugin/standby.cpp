// Standby ports: which pair of ports a comm's standby goes on when re-protection builds a new one,
// and how many connections each port carries.
#include <algorithm>

#include "datapath.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {

AttemptPorts choose_standby_ports(CommBase& c) {
  AttemptPorts out;
  Device* d = c.devs[c.standby_slot()];
  const Path* sb = c.paths[c.standby_slot()].get();
  const int peer = sb ? sb->peer_dev : -1;
  if (!d) {
    out.why = "single path";
  } else if (std::find(c.failed_pairs.begin(), c.failed_pairs.end(), std::pair{d->index, peer}) != c.failed_pairs.end()) {
    out.why = "every standby port failed";
  } else if (!d->port_up.load(std::memory_order_relaxed)) {
    out.why = d->port.id() + ": the port is not active";
  } else {
    out.dev = d;
    out.peer_dev = peer;
  }
  return out;
}

void standby_ports_failed(CommBase& c, int dev, int peer_dev) {
  if (std::find(c.failed_pairs.begin(), c.failed_pairs.end(), std::pair{dev, peer_dev}) == c.failed_pairs.end())
    c.failed_pairs.emplace_back(dev, peer_dev);
}

void standby_ports_reset(CommBase& c) { c.failed_pairs.clear(); }

bool standby_ports_recovered(CommBase& c) {
  const State* st = state();
  if (!st) return false;
  c.seen_recover.resize(st->devices.size(), 0);
  bool any = false;
  for (const auto& d : st->devices) {
    const std::uint32_t g = d->recover_gen.load(std::memory_order_relaxed);
    auto& seen = c.seen_recover[static_cast<std::size_t>(d->index)];
    if (g == seen) continue;
    seen = g;
    std::erase_if(c.failed_pairs, [&d](const std::pair<int, int>& p) { return p.first == d->index; });
    any = true;
  }
  return any;
}

void account_ports(CommBase& c) {
  const bool counted = !c.closing.load(std::memory_order_relaxed);
  Device* active = counted ? c.devs[c.active] : nullptr;
  Device* standby = counted ? c.devs[c.standby_slot()] : nullptr;
  if (active != c.counted_active) {
    if (c.counted_active) c.counted_active->active_comms.fetch_sub(1, std::memory_order_relaxed);
    if (active) active->active_comms.fetch_add(1, std::memory_order_relaxed);
    c.counted_active = active;
  }
  if (standby != c.counted_standby) {
    if (c.counted_standby) c.counted_standby->standby_comms.fetch_sub(1, std::memory_order_relaxed);
    if (standby) standby->standby_comms.fetch_add(1, std::memory_order_relaxed);
    c.counted_standby = standby;
  }
}

}  // namespace nccl_ha::plugin
