// Standby ports: which pair of ports a comm's standby goes on, and how many connections each port
// carries.
//
// At the handshake the listener chooses the first standby pair (listen.cpp); after that the send
// side chooses for every re-protection: the pairs both ends can reach, ranked against the pair
// that carries the traffic now (topology.hpp rank_standby_pairs: another NIC, another rail, the
// least loaded ports, NUMA and PCIe locality), from this node's ports as they are now and the
// peer's as its handshake listed them. A pair that fails (a port down at either end, a QP that
// does not connect, a peer that refuses) is skipped until every pair has failed; then
// re-protection backs off and starts again from the best. A port of ours that comes back
// (PORT_ACTIVE, GID change) makes its pairs eligible again at once. With HA_NCCL_ENABLE_FAILBACK the
// connection's own pair (the ports NCCL chose) comes first whenever it is usable: the failback
// returns only to it.
#include <algorithm>

#include "core/state.hpp"
#include "ha/control_ops.hpp"

namespace nccl_ha::plugin {

// The writer of where a comm's standbys go (ControlPlane): defined here only.
struct PortsWriter {
  static StandbyPorts& of(CommBase& c) noexcept { return c.cp.ports_; }
};
// The writer of the slot carrying a comm's traffic (ControlPlane): defined here only, written
// through set_active_slot.
struct ActiveWriter {
  static int& of(CommBase& c) noexcept { return c.cp.active_; }
};
namespace {
StandbyPorts& ports_of(CommBase& c) noexcept { return PortsWriter::of(c); }
}  // namespace
Candidate candidate_for(const Device& d, const Device& primary, const Device* sibling) {
  Candidate c;
  c.dev = static_cast<std::uint8_t>(d.index);
  c.link_layer = static_cast<std::uint8_t>(d.port.link_layer);
  if (d.port_up.load(std::memory_order_relaxed)) c.flags |= kCandUp;
  if (&d == &primary)
    c.flags |= kCandPrimary;
  else if (primary.standby_mapped ? primary.standby_port == d.index : &d == sibling)
    c.flags |= kCandPreferred;
  c.load = candidate_load(static_cast<std::size_t>(std::max(0, d.standby_comms.load(std::memory_order_relaxed))));
  c.topo = d.topo;
  return c;
}

namespace {

bool failed(const CommBase& c, const PortPair& p) {
  const auto& failed = c.cp.ports().failed_pairs;
  return std::find(failed.begin(), failed.end(), std::pair{p.a, p.b}) != failed.end();
}

}  // namespace

std::vector<Candidate> local_candidates(const Device& primary, const Device* sibling) {
  std::vector<Candidate> out;
  out.push_back(candidate_for(primary, primary, sibling));
  for (const auto& d : state()->devices) {
    if (out.size() == kMaxCandidates) break;  // the wire's bound: the ports NCCL lists first
    if (d.get() != &primary && d->index <= 255) out.push_back(candidate_for(*d, primary, sibling));
  }
  std::sort(out.begin(), out.end(), [](const Candidate& x, const Candidate& y) { return x.dev < y.dev; });
  return out;
}

AttemptPorts choose_standby_ports(CommBase& c) {
  AttemptPorts out;
  if (!c.devs[c.standby_slot()]) {
    out.why = "single path";
    return out;
  }
  std::vector<Candidate> mine = local_candidates(*c.home, c.sibling);
  // This comm's own standby does not count against the port it is on: staying there is no move.
  for (Candidate& m : mine)
    if (ports_of(c).counted_standby && m.dev == ports_of(c).counted_standby->index && m.load > 0) --m.load;
  const PortPair active{c.devs[c.active()]->index, c.path().peer_dev};
  // The sender is side A (it connected), the receiver side B.
  const bool send = c.kind == CommKind::send;
  auto pairs = send ? rank_standby_pairs(mine, c.peer_cands, active)
                    : rank_standby_pairs(c.peer_cands, mine, PortPair{active.b, active.a});
  // With failback on, the connection's own pair first: the standby must be there to return to it.
  const PortPair home = send ? PortPair{c.home->index, c.peer_home} : PortPair{c.peer_home, c.home->index};
  if (const auto it = std::find(pairs.begin(), pairs.end(), home); c.failback && it != pairs.end())
    std::rotate(pairs.begin(), it, it + 1);
  bool any = false;
  for (const PortPair& p : pairs) {
    const PortPair ours = send ? p : PortPair{p.b, p.a};  // (our device, the peer's)
    any = true;
    if (failed(c, ours)) continue;
    out.dev = state()->devices[static_cast<std::size_t>(ours.a)].get();
    out.peer_dev = ours.b;
    return out;
  }
  out.why = any ? "every standby pair failed" : "no standby pair both ends can reach (ports down, other islands)";
  return out;
}

void standby_ports_failed(CommBase& c, int dev, int peer_dev) {
  if (std::find(ports_of(c).failed_pairs.begin(), ports_of(c).failed_pairs.end(), std::pair{dev, peer_dev}) == ports_of(c).failed_pairs.end())
    ports_of(c).failed_pairs.emplace_back(dev, peer_dev);
}

void standby_ports_reset(CommBase& c) { ports_of(c).failed_pairs.clear(); }

std::string standby_ports_recovered(CommBase& c) {
  const State* st = state();
  if (!st) return {};
  if (ports_of(c).seen_recover.empty()) {  // the first look: what happened before the comm is history
    for (const auto& d : st->devices) ports_of(c).seen_recover.push_back(d->recover_gen.load(std::memory_order_relaxed));
    return {};
  }
  std::string ports;
  for (const auto& d : st->devices) {
    const std::uint32_t g = d->recover_gen.load(std::memory_order_relaxed);
    auto& seen = ports_of(c).seen_recover[static_cast<std::size_t>(d->index)];
    if (g == seen) continue;
    seen = g;
    std::erase_if(ports_of(c).failed_pairs, [&d](const std::pair<int, int>& p) { return p.first == d->index; });
    ports += (ports.empty() ? "" : ",") + d->port.id();
  }
  return ports;
}

void account_ports(CommBase& c) {
  const bool counted = !c.closing.load(std::memory_order_relaxed);
  Device* active = counted ? c.devs[c.active()] : nullptr;
  Device* standby = counted ? c.devs[c.standby_slot()] : nullptr;
  if (active != ports_of(c).counted_active) {
    if (ports_of(c).counted_active) ports_of(c).counted_active->active_comms.fetch_sub(1, std::memory_order_relaxed);
    if (active) active->active_comms.fetch_add(1, std::memory_order_relaxed);
    ports_of(c).counted_active = active;
  }
  if (standby != ports_of(c).counted_standby) {
    if (ports_of(c).counted_standby) ports_of(c).counted_standby->standby_comms.fetch_sub(1, std::memory_order_relaxed);
    if (standby) standby->standby_comms.fetch_add(1, std::memory_order_relaxed);
    ports_of(c).counted_standby = standby;
  }
}

void set_active_slot(CommBase& c, int slot) {
  ActiveWriter::of(c) = slot;
  account_ports(c);
}

}  // namespace nccl_ha::plugin
