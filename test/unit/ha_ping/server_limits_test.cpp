// What an ha-ping server grants a client (tools/ha-ping/server_limits.hpp, item 6 of issue 31):
// the client's timeout capped at the server's, a size above --max-size refused with a clear reason.
#include <boost/test/unit_test.hpp>

#include "options.hpp"
#include "server_limits.hpp"

namespace {

ha_ping::Hello asking(std::vector<std::uint64_t> sizes, std::uint32_t timeout_ms) {
  ha_ping::Hello h;
  h.sizes = std::move(sizes);
  h.timeout_ms = timeout_ms;
  return h;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ha_ping_server_limits)

BOOST_AUTO_TEST_CASE(timeout_is_capped_at_the_servers) {
  const ha_ping::ServerLimits lim{64ull << 20, 30000};
  auto g = ha_ping::admit(asking({8}, 0xffffffffu), lim);  // the ~49 days of a u32 in ms
  BOOST_TEST_REQUIRE(g.ok());
  BOOST_TEST(g->timeout_ms == 30000u);
  BOOST_TEST(g->timeout_capped);
  g = ha_ping::admit(asking({8}, 5000), lim);
  BOOST_TEST_REQUIRE(g.ok());
  BOOST_TEST(g->timeout_ms == 5000u);  // a shorter one is the client's business
  BOOST_TEST(!g->timeout_capped);
  g = ha_ping::admit(asking({8}, 30000), lim);
  BOOST_TEST(!g->timeout_capped);
}

BOOST_AUTO_TEST_CASE(sizes_above_max_size_are_refused) {
  const ha_ping::ServerLimits lim{64ull << 20, 30000};
  BOOST_TEST(ha_ping::admit(asking({8, 64ull << 20}, 1000), lim).ok());  // the maximum itself is fine
  auto r = ha_ping::admit(asking({8, (64ull << 20) + 1, 8}, 1000), lim);
  BOOST_TEST_REQUIRE(!r.ok());
  BOOST_TEST(r.error().message == "size 67108865 bytes is above the server's --max-size 64 MiB");
  r = ha_ping::admit(asking({1ull << 30}, 1000), lim);
  BOOST_TEST(r.error().message == "size 1 GiB is above the server's --max-size 64 MiB");
  r = ha_ping::admit(asking({8192}, 1000), ha_ping::ServerLimits{4096, 1000});
  BOOST_TEST(r.error().message == "size 8 KiB is above the server's --max-size 4 KiB");
}

BOOST_AUTO_TEST_CASE(defaults_and_handshake_step) {
  BOOST_TEST(ha_ping::ServerLimits{}.max_size == ha_ping::kDefaultMaxSize);
  BOOST_TEST(ha_ping::Options{}.max_size == ha_ping::kDefaultMaxSize);  // --max-size's default, documented: 64M
  BOOST_TEST(ha_ping::kDefaultMaxSize == 64ull << 20);
  BOOST_TEST(ha_ping::handshake_step(30000).count() == 5000);
  BOOST_TEST(ha_ping::handshake_step(2000).count() == 2000);  // never longer than the server's --timeout
  BOOST_TEST(ha_ping::size_text(100) == "100 bytes");
  BOOST_TEST(ha_ping::size_text(1536) == "1536 bytes");
}

BOOST_AUTO_TEST_SUITE_END()
