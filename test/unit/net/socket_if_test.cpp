// choose_socket_if: NCCL_SOCKET_IFNAME's syntax (prefix lists, '^' exclude, '=' exact, "^="),
// automatic mode (no loopback / docker / virbr, RDMA netdevs last, never 127.0.0.1), the family
// rules (IPv4 preferred, NCCL_SOCKET_FAMILY), link-local IPv6 last and scoped, and the errors.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "nccl_ha/net/socket_if.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;

namespace {

IfAddr addr(const std::string& name, const std::string& text, bool up = true) {
  IfAddr a;
  a.name = name;
  a.family = text.find(':') == std::string::npos ? AF_INET : AF_INET6;
  BOOST_REQUIRE(::inet_pton(a.family, text.c_str(), a.addr.data()) == 1);
  a.up = up;
  a.loopback = name == "lo";
  return a;
}

// A typical host: loopback, a container bridge, a VM bridge, the management NIC (IPv4, ULA
// and link-local IPv6), two RDMA netdevs.
std::vector<IfAddr> host() {
  return {addr("lo", "127.0.0.1"),        addr("docker0", "172.17.0.1"), addr("virbr0", "192.168.122.1"),
          addr("eth0", "10.0.0.5"),       addr("rdma0", "10.1.0.5"),     addr("rdma1", "10.2.0.5"),
          addr("lo", "::1"),              addr("eth0", "fd00:aa::5"),    addr("eth0", "fe80::5"),
          addr("rdma0", "fe80::10")};
}

SocketIfQuery query(const std::string& spec, int family = 0) {
  SocketIfQuery q;
  q.spec = spec;
  q.family = family;
  q.rdma_netdevs = {"rdma0", "rdma1"};
  return q;
}

SocketIfChoice chosen(const std::vector<IfAddr>& ifs, const SocketIfQuery& q) {
  auto c = choose_socket_if(ifs, q);
  BOOST_REQUIRE_MESSAGE(c.ok(), "'" << q.spec << "' failed: " << (c.ok() ? "" : c.error().message));
  return std::move(c).value();
}

std::string failure(const std::vector<IfAddr>& ifs, const SocketIfQuery& q, Errc code = Errc::not_found) {
  auto c = choose_socket_if(ifs, q);
  BOOST_REQUIRE_MESSAGE(!c.ok(), "'" << q.spec << "' chose " << (c.ok() ? c->name + " " + c->address : ""));
  BOOST_TEST(static_cast<int>(c.error().code) == static_cast<int>(code));
  return c.error().message;
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(socket_if)

BOOST_AUTO_TEST_CASE(parse_follows_nccl_syntax) {
  auto s = parse_socket_ifname("eth,ens");
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(s->names == (std::vector<std::string>{"eth", "ens"}));
  BOOST_TEST(!s->exclude);
  BOOST_TEST(!s->exact);
  BOOST_TEST(s->matches("eth0"));
  BOOST_TEST(s->matches("ens3"));
  BOOST_TEST(!s->matches("lo"));
  s = parse_socket_ifname("^=eth0,lo");
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(s->exclude);
  BOOST_TEST(s->exact);
  BOOST_TEST(!s->matches("eth0"));
  BOOST_TEST(s->matches("eth00"));
  BOOST_TEST(s->matches("eth1"));
  BOOST_TEST(!s->matches("lo"));
  // Empty items are skipped, ":port" suffixes ignored (NCCL's parseStringList).
  s = parse_socket_ifname(",eth0,,ib0:1,");
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(s->names == (std::vector<std::string>{"eth0", "ib0"}));
}

BOOST_AUTO_TEST_CASE(specs_that_name_nothing_are_rejected) {
  for (const char* spec : {"^", "=", "^=", ",", "^,,", "=:1"}) {
    BOOST_TEST_CONTEXT(spec) {
      BOOST_TEST(!parse_socket_ifname(spec).ok());
      auto q = query(spec);
      q.spec_var = "HA_NCCL_SOCKET_IFNAME";
      const auto msg = failure(host(), q, Errc::invalid_argument);
      BOOST_TEST(contains(msg, "HA_NCCL_SOCKET_IFNAME='" + std::string(spec) + "' names no interface"), msg);
    }
  }
}

BOOST_AUTO_TEST_CASE(socket_family_values) {
  BOOST_TEST(*parse_socket_family("AF_INET") == AF_INET);
  BOOST_TEST(*parse_socket_family("AF_INET6") == AF_INET6);
  for (const char* bad : {"", "af_inet", "ipv6", "AF_INET4", "10"}) BOOST_TEST(!parse_socket_family(bad).ok(), bad);
}

BOOST_AUTO_TEST_CASE(automatic_mode_takes_the_management_nic_over_ipv4) {
  const auto c = chosen(host(), query(""));
  BOOST_TEST(c.name == "eth0");
  BOOST_TEST(c.address == "10.0.0.5");
  BOOST_TEST(c.family == AF_INET);
  BOOST_TEST(!c.link_local);
  BOOST_TEST(!c.rdma_netdev);
}

BOOST_AUTO_TEST_CASE(automatic_mode_skips_loopback_docker_and_virbr) {
  // Only these and the rails: a rail's netdev, never loopback or a bridge.
  const std::vector<IfAddr> ifs = {addr("lo", "127.0.0.1"), addr("docker0", "172.17.0.1"),
                                   addr("virbr0", "192.168.122.1"), addr("rdma1", "10.2.0.5")};
  const auto c = chosen(ifs, query(""));
  BOOST_TEST(c.name == "rdma1");
  BOOST_TEST(c.rdma_netdev);
}

BOOST_AUTO_TEST_CASE(automatic_mode_never_falls_back_to_loopback) {
  const std::vector<IfAddr> ifs = {addr("lo", "127.0.0.1"), addr("lo", "::1"), addr("docker0", "172.17.0.1"),
                                   addr("eth0", "10.0.0.5", false)};
  const auto msg = failure(ifs, query(""));
  for (const char* part : {"NCCL_SOCKET_IFNAME is unset", "lo 127.0.0.1 (loopback)", "lo ::1 (loopback)",
                           "docker0 172.17.0.1 (container/VM bridge)", "eth0 10.0.0.5 (down)", "=lo"})
    BOOST_TEST(contains(msg, part), msg << " lacks " << part);
  BOOST_TEST(contains(failure({}, query("")), "no IPv4 or IPv6 address at all"));
}

BOOST_AUTO_TEST_CASE(prefer_ipv4_then_global_ipv6_then_link_local) {
  // eth1 (later, IPv4) beats eth0's IPv6: IPv4 is preferred over interface order.
  std::vector<IfAddr> ifs = {addr("eth0", "fd00:aa::5"), addr("eth0", "fe80::5"), addr("eth1", "10.0.0.6")};
  BOOST_TEST(chosen(ifs, query("")).name == "eth1");
  ifs.pop_back();
  auto c = chosen(ifs, query(""));
  BOOST_TEST(c.address == "fd00:aa::5");
  BOOST_TEST(c.family == AF_INET6);
  ifs.erase(ifs.begin());
  c = chosen(ifs, query(""));
  BOOST_TEST(c.address == "fe80::5%eth0");
  BOOST_TEST(c.link_local);
}

BOOST_AUTO_TEST_CASE(a_global_ipv6_management_address_beats_an_ipv4_rail) {
  const std::vector<IfAddr> ifs = {addr("rdma0", "10.1.0.5"), addr("eth0", "fd00:aa::5")};
  BOOST_TEST(chosen(ifs, query("")).name == "eth0");
  // ... but a link-local one does not: it is the last resort.
  const std::vector<IfAddr> ll = {addr("rdma0", "10.1.0.5"), addr("eth0", "fe80::5")};
  BOOST_TEST(chosen(ll, query("")).name == "rdma0");
}

BOOST_AUTO_TEST_CASE(socket_family_af_inet6_picks_ipv6) {
  auto c = chosen(host(), query("", AF_INET6));
  BOOST_TEST(c.name == "eth0");
  BOOST_TEST(c.address == "fd00:aa::5");
  c = chosen(host(), query("=eth0", AF_INET6));
  BOOST_TEST(c.address == "fd00:aa::5");
  c = chosen(host(), query("rdma", AF_INET6));  // only link-local there: scoped
  BOOST_TEST(c.address == "fe80::10%rdma0");
  c = chosen(host(), query("", AF_INET));
  BOOST_TEST(c.address == "10.0.0.5");
}

BOOST_AUTO_TEST_CASE(socket_family_with_no_such_address_fails) {
  const std::vector<IfAddr> ifs = {addr("eth0", "10.0.0.5"), addr("lo", "::1")};
  auto q = query("eth", AF_INET6);
  q.family_var = "HA_NCCL_SOCKET_FAMILY";
  const auto msg = failure(ifs, q);
  for (const char* part : {"NCCL_SOCKET_IFNAME='eth' matches no usable interface", "HA_NCCL_SOCKET_FAMILY=AF_INET6",
                           "eth0 10.0.0.5 (not AF_INET6)", "lo ::1 (not listed)"})
    BOOST_TEST(contains(msg, part), msg << " lacks " << part);
}

BOOST_AUTO_TEST_CASE(comma_lists_and_prefixes_that_match_several) {
  // The first matching interface in the host's order, whatever the list's order.
  BOOST_TEST(chosen(host(), query("rdma")).name == "rdma0");
  BOOST_TEST(chosen(host(), query("rdma1,eth")).name == "eth0");
  BOOST_TEST(chosen(host(), query("nosuch,rdma1")).name == "rdma1");
  // A positive list may name RDMA netdevs and bridges: the user asked for them.
  BOOST_TEST(chosen(host(), query("docker")).address == "172.17.0.1");
  BOOST_TEST(!chosen(host(), query("rdma")).rdma_netdev);
}

BOOST_AUTO_TEST_CASE(exact_names) {
  const std::vector<IfAddr> ifs = {addr("eth0", "10.0.0.5"), addr("eth01", "10.0.1.5"), addr("eth1", "10.0.2.5")};
  BOOST_TEST(chosen(ifs, query("=eth1")).name == "eth1");
  BOOST_TEST(chosen(ifs, query("=eth01,eth1")).name == "eth01");
  BOOST_TEST(contains(failure(ifs, query("=eth")), "'=eth' matches no usable interface"));
}

BOOST_AUTO_TEST_CASE(exclude_lists_keep_the_automatic_guards) {
  // "^eth" leaves docker0, virbr0, lo and the rails: the rails, not loopback nor a bridge.
  BOOST_TEST(chosen(host(), query("^eth")).name == "rdma0");
  BOOST_TEST(chosen(host(), query("^eth,rdma0")).name == "rdma1");
  BOOST_TEST(chosen(host(), query("^docker,lo")).name == "eth0");
  const auto msg = failure(host(), query("^eth,rdma"));
  for (const char* part : {"'^eth,rdma' matches no usable interface", "eth0 10.0.0.5 (excluded)", "lo 127.0.0.1 (loopback)"})
    BOOST_TEST(contains(msg, part), msg << " lacks " << part);
}

BOOST_AUTO_TEST_CASE(exact_exclusion) {
  const std::vector<IfAddr> ifs = {addr("eth0", "10.0.0.5"), addr("eth01", "10.0.1.5")};
  BOOST_TEST(chosen(ifs, query("^=eth0")).name == "eth01");
  BOOST_TEST(!choose_socket_if(ifs, query("^eth0")).ok());  // prefix: eth01 is excluded too
}

BOOST_AUTO_TEST_CASE(loopback_only_when_named) {
  auto c = chosen(host(), query("lo"));
  BOOST_TEST(c.name == "lo");
  BOOST_TEST(c.address == "127.0.0.1");
  c = chosen(host(), query("=lo", AF_INET6));
  BOOST_TEST(c.address == "::1");
}

BOOST_AUTO_TEST_CASE(nothing_found_names_the_variable_and_what_was_seen) {
  auto q = query("nosuchif");
  q.spec_var = "HA_NCCL_SOCKET_IFNAME";
  const auto msg = failure(host(), q);
  for (const char* part : {"HA_NCCL_SOCKET_IFNAME='nosuchif' matches no usable interface", "seen: lo 127.0.0.1 (not listed)",
                           "eth0 10.0.0.5 (not listed)", "eth0 fd00:aa::5 (not listed)"})
    BOOST_TEST(contains(msg, part), msg << " lacks " << part);
  // A down interface is never taken, even when named.
  const std::vector<IfAddr> down = {addr("eth0", "10.0.0.5", false)};
  BOOST_TEST(contains(failure(down, query("eth0")), "eth0 10.0.0.5 (down)"));
}

BOOST_AUTO_TEST_CASE(other_families_are_ignored) {
  IfAddr packet;
  packet.name = "eth0";
  packet.family = AF_PACKET;
  packet.up = true;
  BOOST_TEST(contains(failure({packet}, query("")), "no IPv4 or IPv6 address at all"));
}

BOOST_AUTO_TEST_SUITE_END()
