// The handshake interface (src/net/socket_if.cpp): NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY over a
// host's address list. Input: line 1 the interface spec (empty: automatic), line 2 the family
// variable's value, every further line one address record "NAME FLAGS ADDRESS" (FLAGS: 'u' up,
// 'l' loopback, 'r' the netdev of an RDMA port; ADDRESS an IPv4 or IPv6 text, anything else is
// an address of an unknown family). Properties: a malformed spec is invalid_argument, nothing
// usable is not_found with the reasons; a choice is an up interface from the list, of the asked
// family, matched by the spec, never loopback / docker / virbr in automatic or '^' mode, and its
// address text parses back.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>

#include "fuzz_common.hpp"
#include "nccl_ha/net/socket_if.hpp"

using namespace nccl_ha;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto ls = fuzz::lines(fuzz::text(data, size));
  net::SocketIfQuery q;
  if (ls.size() > 0) q.spec = ls[0];
  if (ls.size() > 1) {
    auto fam = net::parse_socket_family(ls[1]);
    if (fam) {
      FUZZ_REQUIRE(*fam == AF_INET || *fam == AF_INET6);
      q.family = *fam;
    }
  }
  std::vector<net::IfAddr> ifs;
  for (std::size_t i = 2; i < ls.size() && ifs.size() < 64; ++i) {
    const std::string& l = ls[i];
    const auto a = l.find(' ');
    const auto b = a == std::string::npos ? std::string::npos : l.find(' ', a + 1);
    net::IfAddr r;
    r.name = l.substr(0, a);
    const std::string flags = a == std::string::npos ? "" : l.substr(a + 1, b == std::string::npos ? b : b - a - 1);
    const std::string addr = b == std::string::npos ? "" : l.substr(b + 1);
    r.up = flags.find('u') != std::string::npos;
    r.loopback = flags.find('l') != std::string::npos;
    if (flags.find('r') != std::string::npos) q.rdma_netdevs.push_back(r.name);
    if (inet_pton(AF_INET, addr.c_str(), r.addr.data()) == 1) r.family = AF_INET;
    else if (inet_pton(AF_INET6, addr.c_str(), r.addr.data()) == 1) r.family = AF_INET6;
    else r.family = addr.empty() ? 0 : static_cast<unsigned char>(addr[0]);  // AF_PACKET and the like
    ifs.push_back(std::move(r));
  }
  const bool spec_ok = q.spec.empty() || net::parse_socket_ifname(q.spec).ok();
  auto c = net::choose_socket_if(ifs, q);
  if (!c) {
    FUZZ_REQUIRE(c.error().code == (spec_ok ? Errc::not_found : Errc::invalid_argument));
    return 0;
  }
  FUZZ_REQUIRE(spec_ok);
  FUZZ_REQUIRE(c->family == AF_INET || c->family == AF_INET6);
  if (q.family) FUZZ_REQUIRE(c->family == q.family);
  const bool guarded = q.spec.empty() || net::parse_socket_ifname(q.spec)->exclude;
  // The record it took (the list may hold the same name and address twice, with other flags).
  const bool from_list = std::any_of(ifs.begin(), ifs.end(), [&](const net::IfAddr& a) {
    return a.name == c->name && a.up && a.family == c->family && c->address.rfind(net::address_text(a), 0) == 0 &&
           (!guarded || !a.loopback);
  });
  FUZZ_REQUIRE(from_list);
  if (guarded) FUZZ_REQUIRE(c->name.rfind("docker", 0) != 0 && c->name.rfind("virbr", 0) != 0);
  if (!q.spec.empty()) FUZZ_REQUIRE(net::parse_socket_ifname(q.spec)->matches(c->name));
  std::array<std::uint8_t, 16> back{};
  const std::string text = c->address.substr(0, c->address.find('%'));
  FUZZ_REQUIRE(inet_pton(c->family, text.c_str(), back.data()) == 1);
  return 0;
}
