#include "core/conn_msg.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace nccl_ha::plugin {
namespace {

constexpr std::uint8_t kRailKnown = 1, kIslandKnown = 2;

// ------------------------------------------------------------------ writing

void write_endpoint(net::ByteWriter& w, const net::Endpoint* ep) {
  if (ep)
    w.bytes(net::encode_endpoint(*ep));
  else
    w.bytes(std::vector<std::uint8_t>(net::kEndpointSize, 0));
}

void write_keys(net::ByteWriter& w, const RemoteKeys& k) {
  w.u64(k.addr);
  for (std::uint32_t key : k.rkey) w.u32(key);
}

// The list's count, `pad` bytes (the first one `first`: the request's member), the list.
void write_candidates(net::ByteWriter& w, const std::vector<Candidate>& list, std::size_t pad, std::uint8_t first = 0) {
  w.u8(static_cast<std::uint8_t>(list.size()));
  for (std::size_t i = 0; i < pad; ++i) w.u8(i == 0 ? first : 0);
  for (const Candidate& c : list) {
    const PortTopo& t = c.topo;
    w.u8(c.dev);
    w.u8(c.link_layer);
    w.u8(c.flags);
    w.u8(static_cast<std::uint8_t>((t.rail.known ? kRailKnown : 0) | (t.island.known ? kIslandKnown : 0)));
    w.u16(c.load);
    w.u8(t.rail.len);
    w.u8(t.island.len);
    w.bytes(t.rail.addr);
    w.bytes(t.island.addr);
    w.u32(t.nic);
    w.u32(t.pcie);
    w.u32(static_cast<std::uint32_t>(t.numa));
  }
}

void write_rescue(net::ByteWriter& w, const RescuePoint& r) {
  w.u16(r.port);
  w.u16(0);
  w.u64(r.token);
}

// ------------------------------------------------------------------ reading

// The fields of a payload whose size was checked first: no read runs past its end.
class Cursor {
 public:
  explicit Cursor(std::span<const std::uint8_t> in) : in_(in) {}
  std::span<const std::uint8_t> take(std::size_t n) {
    const auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  std::uint64_t le(std::size_t n) {
    std::uint64_t v = 0;
    const auto s = take(n);
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(s[i]) << (8 * i);
    return v;
  }
  std::uint8_t u8() { return static_cast<std::uint8_t>(le(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(le(4)); }
  std::uint64_t u64() { return le(8); }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

bool all_zero(std::span<const std::uint8_t> b) {
  return std::all_of(b.begin(), b.end(), [](std::uint8_t x) { return x == 0; });
}

Error malformed(const char* what, const std::string& why) {
  return make_error(Errc::invalid_argument, std::string("malformed ") + what + ": " + why);
}

std::string hex_flags(std::uint32_t bits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%08x", bits);
  return buf;
}

// Errc::truncated when short, Errc::bad_length when long.
Status check_size(std::size_t have, std::size_t want, const char* what, bool at_least = false) {
  if (have == want || (at_least && have > want)) return {};
  return make_error(have < want ? Errc::truncated : Errc::bad_length,
                    std::string(what) + " of " + std::to_string(have) + " bytes (expected " + (at_least ? "at least " : "") +
                        std::to_string(want) + ")");
}

// The message's flags word: only the bits of `allowed` may be set, kStartOnStandby only with
// kOfferStandby.
Expected<std::uint32_t> read_flags(Cursor& in, const char* what, std::uint32_t allowed = kOfferStandby) {
  const std::uint32_t flags = in.u32();
  if (flags & ~allowed) return malformed(what, "unknown flags " + hex_flags(flags & ~allowed));
  if ((flags & kStartOnStandby) && !(flags & kOfferStandby)) return malformed(what, "start on a standby without one");
  return flags;
}

Expected<net::Endpoint> read_endpoint(Cursor& in, const char* what, const char* field) {
  auto ep = net::decode_endpoint(in.take(net::kEndpointSize));
  if (!ep) return malformed(what, std::string(field) + " endpoint: " + ep.error().message);
  return *ep;
}

// `n` bytes that must be zero; `why` says what it means when they are not.
Status expect_zero(Cursor& in, std::size_t n, const char* what, const char* why) {
  if (!all_zero(in.take(n))) return malformed(what, why);
  return {};
}

// Keys of the primary's device: address and slot-0 rkey not 0, slot 1 zero (it travels with the standby).
Expected<RemoteKeys> read_keys(Cursor& in, const char* what, const char* buffer) {
  RemoteKeys k;
  k.addr = in.u64();
  for (auto& key : k.rkey) key = in.u32();
  if (k.addr == 0) return malformed(what, std::string(buffer) + " address 0");
  if (k.rkey[0] == 0) return malformed(what, std::string(buffer) + " rkey 0");
  for (int s = 1; s < kConnSlots; ++s)
    if (k.rkey[s] != 0) return malformed(what, std::string(buffer) + " rkey of slot " + std::to_string(s) + " not 0");
  return k;
}

Expected<NetPrefix> read_prefix(bool known, std::uint8_t len, std::span<const std::uint8_t> bytes, const std::string& name) {
  NetPrefix p;
  std::copy(bytes.begin(), bytes.end(), p.addr.begin());
  p.len = len;
  p.known = known;
  if (!known) {
    if (len != 0 || !all_zero(bytes))
      return make_error(Errc::invalid_argument, "unknown " + name + " prefix with bytes set");
    return p;
  }
  if (len > 128) return make_error(Errc::invalid_argument, name + " prefix length " + std::to_string(len) + " (0..128)");
  if (make_prefix(p.addr, len).addr != p.addr)
    return make_error(Errc::invalid_argument, name + " prefix " + make_prefix(p.addr, len).str() + " with host bits set");
  return p;
}

Expected<Candidate> read_candidate(Cursor& in) {
  Candidate c;
  c.dev = in.u8();
  c.link_layer = in.u8();
  c.flags = in.u8();
  const std::uint8_t known = in.u8();
  c.load = in.u16();
  const std::uint8_t rail_len = in.u8(), island_len = in.u8();
  const auto rail_addr = in.take(16), island_addr = in.take(16);
  c.topo.nic = in.u32();
  c.topo.pcie = in.u32();
  c.topo.numa = static_cast<std::int32_t>(in.u32());
  auto fail = [](const std::string& why) { return make_error(Errc::invalid_argument, why); };
  if (c.link_layer != IBV_LINK_LAYER_INFINIBAND && c.link_layer != IBV_LINK_LAYER_ETHERNET)
    return fail("link layer " + std::to_string(c.link_layer) + " (1 or 2)");
  if (c.flags & ~kCandFlags) return fail("unknown flags " + hex_flags(c.flags & ~kCandFlags));
  if (known & ~(kRailKnown | kIslandKnown)) return fail("unknown prefix bits " + hex_flags(known & ~(kRailKnown | kIslandKnown)));
  auto rail = read_prefix(known & kRailKnown, rail_len, rail_addr, "rail");
  if (!rail) return std::move(rail).error();
  auto island = read_prefix(known & kIslandKnown, island_len, island_addr, "island");
  if (!island) return std::move(island).error();
  if (island->known && !prefix_contains(*island, *rail))
    return fail("island " + island->str() + " does not contain the rail " + rail->str());
  if (c.topo.numa < -1 || c.topo.numa > kMaxNumaNode)
    return fail("NUMA node " + std::to_string(c.topo.numa) + " (-1.." + std::to_string(kMaxNumaNode) + ")");
  c.topo.rail = *rail;
  c.topo.island = *island;
  return c;
}

// `n` candidates, then the rules of a list: unique devices, exactly one primary, at most one
// preferred and never the primary, the primary endpoint of the primary's link layer.
Expected<std::vector<Candidate>> read_candidates(Cursor& in, std::size_t n, const net::Endpoint& primary, const char* what) {
  std::vector<Candidate> list;
  int primaries = 0, preferred = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto c = read_candidate(in);
    const std::string where = "candidate " + std::to_string(i);
    if (!c) return malformed(what, where + ": " + c.error().message);
    const std::string dev = where + " (device " + std::to_string(c->dev) + ")";
    if (std::any_of(list.begin(), list.end(), [&](const Candidate& o) { return o.dev == c->dev; }))
      return malformed(what, dev + " listed twice");
    if ((c->flags & kCandPrimary) && (c->flags & kCandPreferred)) return malformed(what, dev + " both primary and preferred");
    if (c->flags & kCandPrimary) {
      if (c->link_layer != primary.link_layer)
        return malformed(what, dev + " is the primary but of link layer " + std::to_string(c->link_layer) +
                                   ", the primary endpoint's is " + std::to_string(primary.link_layer));
      ++primaries;
    }
    preferred += (c->flags & kCandPreferred) ? 1 : 0;
    list.push_back(*c);
  }
  if (primaries != 1) return malformed(what, std::to_string(primaries) + " candidates flagged primary (exactly 1)");
  if (preferred > 1) return malformed(what, std::to_string(preferred) + " candidates flagged preferred (at most 1)");
  return list;
}

// The candidate count (at `offset`, 1..kMaxCandidates) of a message whose fixed part of
// `head_size` bytes is there, and the message's size checked against it.
Expected<std::size_t> candidate_count(std::span<const std::uint8_t> payload, std::size_t offset, std::size_t head_size,
                                      const char* what) {
  if (auto s = check_size(payload.size(), head_size, what, true); !s) return std::move(s).error();
  const std::size_t n = payload[offset];
  if (n == 0 || n > kMaxCandidates)
    return malformed(what, "candidate count " + std::to_string(n) + " (1.." + std::to_string(kMaxCandidates) + ")");
  if (auto s = check_size(payload.size(), head_size + n * kCandidateSize + kRescueSize, what); !s)
    return std::move(s).error();
  return n;
}

Expected<RescuePoint> read_rescue(Cursor& in, const char* what) {
  RescuePoint r;
  r.port = in.u16();
  if (auto s = expect_zero(in, 2, what, "bytes 2..3 of the rescue point not 0"); !s) return std::move(s).error();
  r.token = in.u64();
  if ((r.port == 0) != (r.token == 0))
    return malformed(what, r.port ? "rescue port without a token" : "rescue token without a port");
  return r;
}

bool same_optional_endpoint(const std::optional<net::Endpoint>& a, const std::optional<net::Endpoint>& b) {
  return a.has_value() == b.has_value() && (!a || same_endpoint(*a, *b));
}

}  // namespace

// ------------------------------------------------------------------ conn_request

std::vector<std::uint8_t> encode_request(const ConnRequest& r) {
  std::vector<std::uint8_t> out;
  out.reserve(kRequestHeadSize + r.candidates.size() * kCandidateSize + kRescueSize);
  net::ByteWriter w(out);
  write_endpoint(w, &r.primary);
  w.u32(r.offer_standby ? kOfferStandby : 0);
  write_keys(w, r.fifo);
  write_keys(w, r.ctrl);
  w.u8(r.qos.traffic_class);
  w.u8(r.qos.service_level);
  write_candidates(w, r.candidates, 1, r.member);
  write_rescue(w, r.rescue);
  return out;
}

Expected<ConnRequest> decode_request(std::span<const std::uint8_t> payload) {
  constexpr const char* kWhat = "connection request";
  auto n = candidate_count(payload, kRequestHeadSize - 2, kRequestHeadSize, kWhat);
  if (!n) return std::move(n).error();
  Cursor in(payload);
  ConnRequest r;
  auto primary = read_endpoint(in, kWhat, "primary");
  if (!primary) return std::move(primary).error();
  r.primary = *primary;
  auto offer = read_flags(in, kWhat);
  if (!offer) return std::move(offer).error();
  r.offer_standby = (*offer & kOfferStandby) != 0;
  auto fifo = read_keys(in, kWhat, "FIFO");
  if (!fifo) return std::move(fifo).error();
  r.fifo = *fifo;
  auto ctrl = read_keys(in, kWhat, "control block");
  if (!ctrl) return std::move(ctrl).error();
  r.ctrl = *ctrl;
  r.qos.traffic_class = in.u8();
  r.qos.service_level = in.u8();
  if (r.qos.service_level > kMaxServiceLevel)
    return malformed(kWhat, "service level " + std::to_string(r.qos.service_level) + " (0..15)");
  in.u8();  // the count
  r.member = in.u8();
  if (r.member >= kMaxVDeviceMembers)
    return malformed(kWhat, "member " + std::to_string(r.member) + " (0.." + std::to_string(kMaxVDeviceMembers - 1) + ")");
  auto list = read_candidates(in, *n, r.primary, kWhat);
  if (!list) return std::move(list).error();
  r.candidates = std::move(list).value();
  auto rescue = read_rescue(in, kWhat);
  if (!rescue) return std::move(rescue).error();
  r.rescue = *rescue;
  return r;
}

// ------------------------------------------------------------------ conn_reply

std::vector<std::uint8_t> encode_reply(const ConnReply& r) {
  std::vector<std::uint8_t> out;
  out.reserve(kReplyHeadSize + r.candidates.size() * kCandidateSize + kRescueSize);
  net::ByteWriter w(out);
  write_endpoint(w, &r.primary);
  w.u32(r.standby ? kOfferStandby | (r.start_on_standby ? kStartOnStandby : 0) : 0);
  write_keys(w, r.ctrl);
  const StandbyOffer none{};
  const StandbyOffer& o = r.standby ? *r.standby : none;
  w.u8(static_cast<std::uint8_t>(r.standby ? o.pair.a : 0));
  w.u8(static_cast<std::uint8_t>(r.standby ? o.pair.b : 0));
  w.u16(0);
  w.u32(o.ctrl_rkey);
  write_endpoint(w, r.standby ? &o.endpoint : nullptr);
  write_candidates(w, r.candidates, 3);
  write_rescue(w, r.rescue);
  return out;
}

Expected<ConnReply> decode_reply(std::span<const std::uint8_t> payload) {
  constexpr const char* kWhat = "connection reply";
  auto n = candidate_count(payload, kReplyHeadSize - 4, kReplyHeadSize, kWhat);
  if (!n) return std::move(n).error();
  Cursor in(payload);
  ConnReply r;
  auto primary = read_endpoint(in, kWhat, "primary");
  if (!primary) return std::move(primary).error();
  r.primary = *primary;
  auto flags = read_flags(in, kWhat, kOfferStandby | kStartOnStandby);
  if (!flags) return std::move(flags).error();
  r.start_on_standby = (*flags & kStartOnStandby) != 0;
  auto ctrl = read_keys(in, kWhat, "control block");
  if (!ctrl) return std::move(ctrl).error();
  r.ctrl = *ctrl;
  if (!(*flags & kOfferStandby)) {
    if (auto s = expect_zero(in, kStandbyOfferSize, kWhat, "standby offer bytes without the standby flag"); !s)
      return std::move(s).error();
  } else {
    StandbyOffer o;
    o.pair.a = in.u8();
    o.pair.b = in.u8();
    if (auto s = expect_zero(in, 2, kWhat, "bytes 54..55 of the standby offer not 0"); !s) return std::move(s).error();
    o.ctrl_rkey = in.u32();
    if (o.ctrl_rkey == 0) return malformed(kWhat, "standby control block rkey 0");
    auto ep = read_endpoint(in, kWhat, "standby");
    if (!ep) return std::move(ep).error();
    o.endpoint = *ep;
    r.standby = o;
  }
  in.u8();  // the count
  if (auto s = expect_zero(in, 3, kWhat, "bytes 93..95 not 0"); !s) return std::move(s).error();
  auto list = read_candidates(in, *n, r.primary, kWhat);
  if (!list) return std::move(list).error();
  r.candidates = std::move(list).value();
  auto rescue = read_rescue(in, kWhat);
  if (!rescue) return std::move(rescue).error();
  r.rescue = *rescue;
  if (r.standby) {
    const int b = r.standby->pair.b;
    const auto it = std::find_if(r.candidates.begin(), r.candidates.end(), [b](const Candidate& c) { return c.dev == b; });
    const std::string dev = "standby offer on device " + std::to_string(b);
    if (it == r.candidates.end()) return malformed(kWhat, dev + ": not among the listener's candidates");
    if (!(it->flags & kCandUp)) return malformed(kWhat, dev + ": the port is not up");
    if (it->link_layer != r.standby->endpoint.link_layer)
      return malformed(kWhat, dev + ": link layer " + std::to_string(it->link_layer) + ", the standby endpoint's is " +
                                  std::to_string(r.standby->endpoint.link_layer));
  }
  return r;
}

// ------------------------------------------------------------------ conn_ready

std::vector<std::uint8_t> encode_ready(const ConnReady& r) {
  std::vector<std::uint8_t> out;
  out.reserve(kReadySize);
  net::ByteWriter w(out);
  w.u32(r.standby ? kOfferStandby | (r.start_on_standby ? kStartOnStandby : 0) : 0);
  write_endpoint(w, r.standby ? &*r.standby : nullptr);
  w.u32(r.standby ? r.fifo_rkey : 0);
  w.u32(r.standby ? r.ctrl_rkey : 0);
  return out;
}

Expected<ConnReady> decode_ready(std::span<const std::uint8_t> payload) {
  constexpr const char* kWhat = "connection ready";
  if (auto s = check_size(payload.size(), kReadySize, kWhat); !s) return std::move(s).error();
  Cursor in(payload);
  ConnReady r;
  auto flags = read_flags(in, kWhat, kOfferStandby | kStartOnStandby);
  if (!flags) return std::move(flags).error();
  r.start_on_standby = (*flags & kStartOnStandby) != 0;
  if (!(*flags & kOfferStandby)) {
    if (auto s = expect_zero(in, kReadySize - 4, kWhat, "standby bytes without the standby flag"); !s)
      return std::move(s).error();
    return r;
  }
  auto ep = read_endpoint(in, kWhat, "standby");
  if (!ep) return std::move(ep).error();
  r.standby = *ep;
  r.fifo_rkey = in.u32();
  r.ctrl_rkey = in.u32();
  if (r.fifo_rkey == 0) return malformed(kWhat, "standby FIFO rkey 0");
  if (r.ctrl_rkey == 0) return malformed(kWhat, "standby control block rkey 0");
  return r;
}

// ------------------------------------------------------------------ checks and comparisons

Status check_standby_offer(const ConnRequest& sent, const ConnReply& reply) {
  if (!reply.standby) return {};
  auto bad = [](const std::string& why) { return make_error(Errc::invalid_argument, "standby offer: " + why); };
  if (!sent.offer_standby) return bad("the connector offered no standby");
  const PortPair pair = reply.standby->pair;
  auto find = [](const std::vector<Candidate>& list, int dev) {
    const auto it = std::find_if(list.begin(), list.end(), [dev](const Candidate& c) { return c.dev == dev; });
    return it == list.end() ? nullptr : &*it;
  };
  const Candidate* x = find(sent.candidates, pair.a);
  const Candidate* y = find(reply.candidates, pair.b);
  const std::string which = "(" + std::to_string(pair.a) + ", " + std::to_string(pair.b) + ")";
  if (!x) return bad(which + ": device " + std::to_string(pair.a) + " is not among the connector's candidates");
  if (!(x->flags & kCandUp)) return bad(which + ": the connector's port is not up");
  if (!y) return bad(which + ": device " + std::to_string(pair.b) + " is not among the listener's candidates");
  if (pair == PortPair{primary_dev(sent.candidates), primary_dev(reply.candidates)}) return bad(which + " is the primary pair");
  if (!reachable(*x, *y))
    return bad(which + ": the ports do not reach each other (" + x->topo.island.str() + " vs " + y->topo.island.str() + ")");
  return {};
}

bool same_endpoint(const net::Endpoint& a, const net::Endpoint& b) {
  return a.qpn == b.qpn && a.psn == b.psn && std::equal(std::begin(a.gid.raw), std::end(a.gid.raw), std::begin(b.gid.raw)) &&
         a.lid == b.lid && a.port == b.port && a.gid_index == b.gid_index && a.link_layer == b.link_layer &&
         a.mtu == b.mtu;
}

bool operator==(const ConnRequest& a, const ConnRequest& b) {
  return same_endpoint(a.primary, b.primary) && a.offer_standby == b.offer_standby && a.fifo == b.fifo &&
         a.ctrl == b.ctrl && a.qos == b.qos && a.candidates == b.candidates && a.rescue == b.rescue &&
         a.member == b.member;
}

bool operator==(const StandbyOffer& a, const StandbyOffer& b) {
  return a.pair == b.pair && same_endpoint(a.endpoint, b.endpoint) && a.ctrl_rkey == b.ctrl_rkey;
}

bool operator==(const ConnReply& a, const ConnReply& b) {
  return same_endpoint(a.primary, b.primary) && a.standby == b.standby && a.start_on_standby == b.start_on_standby &&
         a.ctrl == b.ctrl && a.candidates == b.candidates && a.rescue == b.rescue;
}

bool operator==(const ConnReady& a, const ConnReady& b) {
  return same_optional_endpoint(a.standby, b.standby) && a.start_on_standby == b.start_on_standby &&
         a.fifo_rkey == b.fifo_rkey && a.ctrl_rkey == b.ctrl_rkey;
}

}  // namespace nccl_ha::plugin
