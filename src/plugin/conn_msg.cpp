#include "conn_msg.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace nccl_ha::plugin {
namespace {

void write_endpoint(std::vector<std::uint8_t>& out, const std::optional<net::Endpoint>& ep) {
  const auto bytes = ep ? net::encode_endpoint(*ep) : std::vector<std::uint8_t>(net::kEndpointSize, 0);
  out.insert(out.end(), bytes.begin(), bytes.end());
}

void write_keys(net::ByteWriter& w, const RemoteKeys& k) {
  w.u64(k.addr);
  for (std::uint32_t key : k.rkey) w.u32(key);
}

// The fields both messages start with: primary endpoint, flags, standby endpoint.
struct Head {
  net::Endpoint primary{};
  std::optional<net::Endpoint> standby;
};

Error malformed(const char* what, const std::string& why) {
  return make_error(Errc::invalid_argument, std::string("malformed ") + what + ": " + why);
}

Expected<Head> read_head(std::span<const std::uint8_t> body, const char* what) {
  Head h;
  auto primary = net::decode_endpoint(body.first(net::kEndpointSize));
  if (!primary) return malformed(what, "primary endpoint: " + primary.error().message);
  h.primary = *primary;
  net::ByteReader r(body.subspan(net::kEndpointSize, 4));
  std::uint32_t flags = 0;
  r.u32(flags);
  if (flags & ~kOfferStandby) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "unknown flags 0x%08x", flags & ~kOfferStandby);
    return malformed(what, buf);
  }
  const auto standby = body.subspan(net::kEndpointSize + 4, net::kEndpointSize);
  if (flags & kOfferStandby) {
    auto ep = net::decode_endpoint(standby);
    if (!ep) return malformed(what, "standby endpoint: " + ep.error().message);
    h.standby = *ep;
  } else if (std::any_of(standby.begin(), standby.end(), [](std::uint8_t b) { return b != 0; })) {
    return malformed(what, "standby endpoint bytes without the standby flag");
  }
  return h;
}

Expected<RemoteKeys> read_keys(net::ByteReader& r, const char* what, const char* buffer) {
  RemoteKeys k;
  bool ok = r.u64(k.addr);
  for (auto& key : k.rkey) ok = r.u32(key) && ok;
  if (!ok) return malformed(what, std::string(buffer) + " keys truncated");  // sizes are checked first
  if (k.addr == 0) return malformed(what, std::string(buffer) + " address 0");
  return k;
}

Status check_size(std::span<const std::uint8_t> payload, std::size_t want, const char* what) {
  if (payload.size() == want) return {};
  return make_error(payload.size() < want ? Errc::truncated : Errc::bad_length,
                    std::string(what) + " of " + std::to_string(payload.size()) + " bytes (expected " +
                        std::to_string(want) + ")");
}

}  // namespace

std::vector<std::uint8_t> encode_request(const ConnRequest& r) {
  std::vector<std::uint8_t> out;
  out.reserve(kRequestSize);
  write_endpoint(out, r.primary);
  net::ByteWriter w(out);
  w.u32(r.standby ? kOfferStandby : 0);
  write_endpoint(out, r.standby);
  write_keys(w, r.fifo);
  write_keys(w, r.ctrl);
  w.u8(r.qos.traffic_class);
  w.u8(r.qos.service_level);
  return out;
}

Expected<ConnRequest> decode_request(std::span<const std::uint8_t> payload) {
  constexpr const char* kWhat = "connection request";
  if (auto s = check_size(payload, kRequestSize, kWhat); !s) return std::move(s).error();
  auto head = read_head(payload, kWhat);
  if (!head) return std::move(head).error();
  ConnRequest r;
  r.primary = head->primary;
  r.standby = head->standby;
  net::ByteReader keys(payload.subspan(2 * net::kEndpointSize + 4));
  auto fifo = read_keys(keys, kWhat, "FIFO");
  if (!fifo) return std::move(fifo).error();
  r.fifo = *fifo;
  auto ctrl = read_keys(keys, kWhat, "control block");
  if (!ctrl) return std::move(ctrl).error();
  r.ctrl = *ctrl;
  keys.u8(r.qos.traffic_class);
  keys.u8(r.qos.service_level);
  if (r.qos.service_level > kMaxServiceLevel)
    return malformed(kWhat, "service level " + std::to_string(r.qos.service_level) + " (0..15)");
  return r;
}

std::vector<std::uint8_t> encode_reply(const ConnReply& r) {
  std::vector<std::uint8_t> out;
  out.reserve(kReplySize);
  write_endpoint(out, r.primary);
  net::ByteWriter w(out);
  w.u32(r.standby ? kOfferStandby : 0);
  write_endpoint(out, r.standby);
  write_keys(w, r.ctrl);
  return out;
}

Expected<ConnReply> decode_reply(std::span<const std::uint8_t> payload) {
  constexpr const char* kWhat = "connection reply";
  if (auto s = check_size(payload, kReplySize, kWhat); !s) return std::move(s).error();
  auto head = read_head(payload, kWhat);
  if (!head) return std::move(head).error();
  ConnReply r;
  r.primary = head->primary;
  r.standby = head->standby;
  net::ByteReader keys(payload.subspan(2 * net::kEndpointSize + 4));
  auto ctrl = read_keys(keys, kWhat, "control block");
  if (!ctrl) return std::move(ctrl).error();
  r.ctrl = *ctrl;
  return r;
}

bool same_endpoint(const net::Endpoint& a, const net::Endpoint& b) {
  return a.qpn == b.qpn && a.psn == b.psn && std::equal(std::begin(a.gid.raw), std::end(a.gid.raw), std::begin(b.gid.raw)) &&
         a.lid == b.lid && a.port == b.port && a.gid_index == b.gid_index && a.link_layer == b.link_layer &&
         a.mtu == b.mtu;
}

namespace {
bool same_standby(const std::optional<net::Endpoint>& a, const std::optional<net::Endpoint>& b) {
  return a.has_value() == b.has_value() && (!a || same_endpoint(*a, *b));
}
}  // namespace

bool operator==(const ConnRequest& a, const ConnRequest& b) {
  return same_endpoint(a.primary, b.primary) && same_standby(a.standby, b.standby) && a.fifo == b.fifo &&
         a.ctrl == b.ctrl && a.qos == b.qos;
}

bool operator==(const ConnReply& a, const ConnReply& b) {
  return same_endpoint(a.primary, b.primary) && same_standby(a.standby, b.standby) && a.ctrl == b.ctrl;
}

}  // namespace nccl_ha::plugin
