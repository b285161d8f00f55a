// The connection handle (handle.hpp): validation and the listener's address. Pure: no I/O.
#include "setup/handle.hpp"

#include <sys/socket.h>

#include <cstring>

namespace nccl_ha::plugin {

namespace asio = boost::asio;

namespace {

// What a connector must never dial: unspecified (this host), multicast, the IPv4 broadcast.
const char* unusable(const asio::ip::address& a) {
  if (a.is_unspecified()) return "unspecified";
  if (a.is_multicast()) return "multicast";
  if (a.is_v4() && a.to_v4() == asio::ip::address_v4::broadcast()) return "broadcast";
  return nullptr;
}

}  // namespace

Handle make_handle(const asio::ip::tcp::endpoint& listener, std::uint64_t token, const net::Key& secret,
                   std::uint32_t flags, int members) {
  Handle h{};
  h.magic = kHandleMagic;
  h.version = kHandleVersion;
  h.length = sizeof(Handle);
  h.flags = flags;
  h.port = listener.port();
  const asio::ip::address addr = listener.address();
  if (addr.is_v4()) {
    h.family = AF_INET;
    const auto b = addr.to_v4().to_bytes();
    std::memcpy(h.addr, b.data(), b.size());
  } else {
    h.family = AF_INET6;
    const auto b = addr.to_v6().to_bytes();
    std::memcpy(h.addr, b.data(), b.size());
    h.scope_id = addr.to_v6().scope_id();
  }
  h.token = token;
  std::memcpy(h.secret, secret.data(), sizeof h.secret);
  h.members = static_cast<std::uint8_t>(members);
  return h;
}

net::Key handle_secret(const Handle& h) {
  net::Key k;
  std::memcpy(k.data(), h.secret, k.size());
  return k;
}

asio::ip::tcp::endpoint handle_endpoint(const Handle& h) {
  if (h.family == AF_INET) return {asio::ip::address_v4({h.addr[0], h.addr[1], h.addr[2], h.addr[3]}), h.port};
  asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), h.addr, b.size());
  return {asio::ip::address_v6(b, h.scope_id), h.port};
}

Status validate_handle(const Handle& h) {
  if (h.magic != kHandleMagic) return make_error(Errc::bad_magic, "not an nccl-ha handle (bad magic)");
  if (h.version != kHandleVersion)
    return make_error(Errc::bad_version, "handle version " + std::to_string(h.version) + " (this plugin speaks " +
                                             std::to_string(kHandleVersion) + ")");
  if (h.length != sizeof(Handle)) return make_error(Errc::truncated, "handle length " + std::to_string(h.length));
  if (h.family != AF_INET && h.family != AF_INET6) return make_error(Errc::invalid_argument, "handle address family");
  if (h.port == 0) return make_error(Errc::invalid_argument, "handle port 0");
  if (h.token == 0) return make_error(Errc::bad_token, "handle without id");
  if (net::all_zero(net::Bytes(h.secret, sizeof h.secret))) return make_error(Errc::bad_token, "handle without secret");
  if (h.members < 1 || h.members > kMaxVDeviceMembers)
    return make_error(Errc::invalid_argument, "handle names " + std::to_string(h.members) + " ports (1.." +
                                                  std::to_string(kMaxVDeviceMembers) + ")");
  if (!net::all_zero(net::Bytes(h.zero, sizeof h.zero))) return make_error(Errc::invalid_argument, "handle: reserved bytes set");
  const auto addr = handle_endpoint(h).address();
  if (const char* why = unusable(addr))
    return make_error(Errc::invalid_argument, std::string("handle address ") + addr.to_string() + " is " + why);
  if (addr.is_v6() && addr.to_v6().is_link_local() && h.scope_id == 0)
    return make_error(Errc::invalid_argument, "link-local handle address " + addr.to_string() + " without a scope id");
  return {};
}

Expected<Handle> decode_handle(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < sizeof(Handle))
    return make_error(Errc::truncated, "handle of " + std::to_string(bytes.size()) + " bytes");
  Handle h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (auto s = validate_handle(h); !s) return std::move(s).error();
  return h;
}

std::string handle_address(const Handle& h) {
  const auto ep = handle_endpoint(h);
  const std::string host = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(ep.port());
}

}  // namespace nccl_ha::plugin
