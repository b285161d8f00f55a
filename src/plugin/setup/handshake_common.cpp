// The helpers both sides of a handshake share, and phase two (handshake_common.hpp).
#include "setup/handshake_common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <cstdio>
#include <mutex>

#include "core/path_ops.hpp"
#include "core/state.hpp"
#include "ha/face.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "setup/handle.hpp"

namespace nccl_ha::plugin::hs {

namespace asio = boost::asio;

static_assert(kSlots == kConnSlots, "conn_msg.hpp carries one rkey per device slot");

// The peer's handshake address for the stats records (an IPv4-mapped address as IPv4).
std::string peer_name(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).to_string();
  return a.to_string();
}

// Connections on `dev` without a standby: said once per port, side and reason (a WARN when HA is
// on: protection expected and not given, the operator must see it).
void note_unprotected(const Device& dev, const char* side, const std::string& why) {
  static std::mutex once_mutex;
  static std::vector<std::string> logged;
  const std::string key = dev.port.id() + side + why;
  std::lock_guard<std::mutex> lock(once_mutex);
  if (std::find(logged.begin(), logged.end(), key) != logged.end()) return;
  logged.push_back(key);
  if (state()->config.enable_standby)
    HA_WARN("NET/HA: %s comms on %s: single path (%s): NOT protected", side, dev.port.id().c_str(), why.c_str());
  else
    HA_INFO("NET/HA: %s comms on %s: single path (%s)", side, dev.port.id().c_str(), why.c_str());
}

// Why connections from `dev` offer no standby at all ("": they do).
std::string no_standby_here(const Device& dev) {
  if (!state()->config.enable_standby) return "HA_NCCL_ENABLE_STANDBY=0";
  if (dev.standby_port < 0) return "no other port of its link layer";
  return {};
}

// The address of our memory `addr` and its rkey on the primary's device (the registration `mr` of
// SlotKeys); the standby's rkeys travel with its endpoint (reply, conn_ready).
RemoteKeys keys_of(const CommBase& c, const void* addr, net::MrPtr SlotKeys::*mr) {
  RemoteKeys k;
  k.addr = reinterpret_cast<std::uint64_t>(addr);
  k.rkey[0] = (c.keys[0].*mr)->rkey;
  return k;
}

// The peer's memory: its address, and its rkey on the primary's device into the SlotKeys member `rkey`.
void take_keys(CommBase& c, const RemoteKeys& k, std::uint64_t& addr, std::uint32_t SlotKeys::*rkey) {
  addr = k.addr;
  c.keys[0].*rkey = k.rkey[0];
}

// The peer's ports (its handshake message's candidates): kept for the standby choices of later
// re-protections; its primary is the other end of our primary path.
void take_peer(CommBase& c, std::vector<Candidate> candidates) {
  c.peer_cands = std::move(candidates);
  c.peer_home = primary_dev(c.peer_cands);
  c.paths[0]->peer_dev = c.peer_home;
}

void set_qos(CommBase& c, const Qos& q) {
  c.qos = q;
  for (auto& p : c.paths)
    if (p) p->qos = q;
}

void name_member(CommBase& c, const std::string& ports, int index, int count, const Device* sibling) {
  if (count <= 1) return;
  c.sibling = sibling;
  c.member = ports + " " + std::to_string(index + 1) + "/" + std::to_string(count);
  c.id += " (member " + std::to_string(index + 1) + "/" + std::to_string(count) + " of " + ports + ")";
}

// A comm NCCL never got (or will never get): its QPs go to ERROR and its paths to the reaper,
// as closeSend / closeRecv do; nothing is destroyed on the calling thread.
void discard(CommBase& c) {
  c.closing.store(true, std::memory_order_relaxed);
  comm_discarded(c);
  for (auto& p : c.paths) retire(std::move(p));  // each QP to ERROR at once (reaper.hpp)
}

namespace {

bool up_in(std::span<const Candidate> side, int dev) {
  for (const auto& c : side)
    if (c.dev == dev) return (c.flags & kCandUp) != 0;
  return false;
}

// "rxe0:1 down, rxe1:1 up" (ours: named by port) or "device 0 down, device 1 up" (the peer's).
std::string port_states(std::span<const Candidate> side, bool ours) {
  std::string s;
  for (const auto& c : side) {
    if (!s.empty()) s += ", ";
    const State* st = state();
    if (ours && st && c.dev < st->devices.size())
      s += st->devices[c.dev]->port.id();
    else
      s += "device " + std::to_string(c.dev);
    s += (c.flags & kCandUp) ? " up" : " down";
  }
  return s;
}

}  // namespace

std::string home_down_reason(const Device& dev, std::span<const Candidate> mine, std::span<const Candidate> theirs) {
  const int peer = primary_dev(theirs);
  const bool here = !up_in(mine, dev.index), there = !up_in(theirs, peer);
  if (!here && !there) {  // up at both ends: in different islands (topology.hpp home_pair_up)
    auto island = [](std::span<const Candidate> side, int d) {
      for (const auto& c : side)
        if (c.dev == d) return c.topo.island.str();
      return std::string("?");
    };
    return "its own pair " + dev.port.id() + " <-> the peer's device " + std::to_string(peer) +
           " crosses islands (" + island(mine, dev.index) + " here, " + island(theirs, peer) + " at the peer)";
  }
  return "its own pair " + dev.port.id() + " <-> the peer's device " + std::to_string(peer) + " is down (" +
         (here && there ? "at both ends" : here ? "here" : "at the peer") + ")";
}

std::string primary_failed_reason(const Device& dev, int peer_dev, const std::string& why) {
  return "its own pair " + dev.port.id() + " <-> the peer's device " + std::to_string(peer_dev) + " did not connect (" +
         why + ")";
}

Error no_live_pair(std::span<const Candidate> mine, std::span<const Candidate> theirs, const std::string& why) {
  return make_error(Errc::not_found, why + ", and no other pair of ports is up at both ends (ours: " +
                                         port_states(mine, true) + "; the peer's: " + port_states(theirs, false) + ")");
}

asio::awaitable<Status> start_on_standby(Channel& ch, CommBase& c, const net::Endpoint& remote, Millis timeout,
                                         const std::string& why, StandbySide side) {
  Path& p = *c.paths[1];
  co_await run_standby(ch, p, remote, timeout, side);
  if (p.link.load(std::memory_order_acquire) != Path::up)
    co_return make_error(Errc::closed, why + ", and the pair through " + p.dev->port.id() + " did not connect: " + p.why);
  started_on_standby(c, why);
  co_return Status{};
}

std::string path_note(const Path& p) {
  char s[64];
  int n = 0;
  if (p.nqps > 1) n = std::snprintf(s, sizeof s, " %d QPs%s", p.nqps, p.split ? " split" : "");
  if (p.local.ece.supported) std::snprintf(s + n, sizeof s - static_cast<std::size_t>(n), " ECE 0x%x", p.local.ece.options);
  else if (n == 0) return {};
  return s;
}

namespace {

// The peer's phase-two frame: "" when it says standby_up, else why not.
std::string peer_verdict(const Expected<net::Frame>& theirs) {
  if (!theirs && theirs.error().code == Errc::peer_error) return "the peer: " + theirs.error().message;
  if (!theirs) return "waiting for the peer: " + theirs.error().message;
  if (theirs->type != static_cast<std::uint16_t>(HandshakeMsg::standby_up))
    return "the peer: " + std::string(theirs->payload.begin(), theirs->payload.end());
  return {};
}

// The connector's standby_up when ECE is in play: its endpoint, whose ECE the listener sets. ""
// when it is that endpoint (the QP it offered in conn_ready), else why not.
std::string take_answer(const net::Frame& theirs, net::Endpoint& remote) {
  auto answered = net::decode_endpoint(theirs.payload);
  if (!answered) return "the peer's standby_up: " + answered.error().message;
  if (answered->qpn != remote.qpn) return "the peer's standby_up names another QP";
  remote.ece = answered->ece;
  return {};
}

}  // namespace

// Phase two: connects the standby QP and agrees with the peer that both ends are up, then
// publishes Path::link. The comm may already be in NCCL's hands (and even closed: `path` is
// shared); only the Path is touched here.
asio::awaitable<void> run_standby(Channel& ch, Path& path, const net::Endpoint& remote, Millis timeout,
                                  StandbySide side) {
  path.remote = remote;
  // ECE on both QPs: the listener waits for the connector's answer before it connects.
  const bool ece = path.local.ece.supported && remote.ece.supported;
  const bool answer_first = ece && side == StandbySide::listener;
  std::string why;
  net::Endpoint peer = remote;
  if (answer_first) {
    auto theirs = co_await ch.recv(timeout);
    why = peer_verdict(theirs);
    if (why.empty()) why = take_answer(*theirs, peer);
    if (why.empty()) path.remote.ece = peer.ece;
  }
  if (const int ms = state()->hooks.standby_delay_ms(); ms > 0) {  // test setting: a slow standby
    asio::steady_timer delay(ch.socket().get_executor(), Millis(ms));
    auto [ec] = co_await delay.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
  }
  auto connect_standby = [&path, &peer] {  // verbs work: on a reactor worker
    auto done = connect_path(path, peer);
    if (done)
      if (int rc = post_control_recvs(path, kCtlRecvs); rc != 0) done = errno_error(Errc::verbs, "posting control receives", rc);
    return done;
  };
  Status local = make_error(Errc::closed, why);  // the peer's end did not come up: ours is not tried
  if (why.empty()) local = co_await state()->reactor.offload(connect_standby, reactor::JobOrder::peer_waits);
  const std::string mine = local ? std::string() : local.error().message;
  std::vector<std::uint8_t> payload(mine.begin(), mine.end());
  if (local && ece && side == StandbySide::connector) payload = net::encode_endpoint(path.local);
  const auto type = static_cast<std::uint16_t>(local ? HandshakeMsg::standby_up : HandshakeMsg::standby_failed);
  auto sent = co_await ch.send(type, payload, timeout);
  if (why.empty() && !local) {
    why = "local: " + mine;
  } else if (why.empty() && !sent) {
    why = "telling the peer: " + sent.error().message;
  } else if (why.empty() && !answer_first) {
    why = peer_verdict(co_await ch.recv(timeout));
  }
  if (!why.empty()) path.why = why;
  path.link.store(why.empty() ? Path::up : Path::failed, std::memory_order_release);
}

}  // namespace nccl_ha::plugin::hs
