// Every HA_NCCL_* / NCCL_* variable the plugin reads at init, from any text (src/plugin/runtime/config.cpp
// Config::from_lookup, net::QpTimeouts and net::DeviceFilter ::from_lookup), then everything init
// derives from them (describe, config_warnings with the timeouts as init adjusts them,
// resolve_qos, the islands of HA_NCCL_ISLAND_PREFIX_LEN). Input: "NAME=VALUE" lines (env_vars.hpp).
// Properties: every setting ends within its documented range (a bad value is WARNed about and the
// default used), nothing crashes.
#include <sys/socket.h>

#include <array>

#include "env_vars.hpp"
#include "nccl_ha/net/device_filter.hpp"
#include "nccl_ha/net/qp.hpp"
#include "runtime/config.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/topology.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {
bool in(int v, int lo, int hi) { return v >= lo && v <= hi; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::FuzzEnv env(fuzz::text(data, size));
  const auto lookup = env.lookup();
  const Config c = Config::from_lookup(lookup);
  FUZZ_REQUIRE(in(c.max_poll, 1, 64) && in(c.handshake_timeout_ms, 100, 3600000) && in(c.debug, 0, 3));
  FUZZ_REQUIRE(in(c.heartbeat_ms, 10, 60000) && in(c.rto_ms, 10, 600000) && in(c.max_retries, 0, 1000000));
  FUZZ_REQUIRE(in(c.retry_window_ms, 1000, 86400000) && in(c.failback_hold_ms, 0, 3600000));
  FUZZ_REQUIRE(in(c.failover_timeout_ms, 50, 60000) && in(c.prom_interval_ms, 100, 3600000));
  FUZZ_REQUIRE(in(c.ib_tc, -1, 255) && in(c.ib_sl, -1, 15));
  FUZZ_REQUIRE(in(TestHooks::from_lookup(lookup).ack_delay_ms(), 0, 60000));
  FUZZ_REQUIRE(in(c.dmabuf_enable, 0, 1) && in(c.relaxed_ordering, 0, 2));
  FUZZ_REQUIRE(c.socket_family == 0 || c.socket_family == AF_INET || c.socket_family == AF_INET6);
  FUZZ_REQUIRE(!describe(c).empty());
  // Adaptive routing: auto, off or on; a threshold NCCL's message sizes can exceed.
  FUZZ_REQUIRE(c.adaptive_routing == -2 || c.adaptive_routing == 0 || c.adaptive_routing == 1);
  FUZZ_REQUIRE(c.ar_threshold <= (1ull << 31));
  for (std::uint8_t ll : {0, 1, 2}) {
    const std::uint64_t at = ar_threshold_for(c, ll);
    FUZZ_REQUIRE(at == kNoAdaptiveRouting || at == c.ar_threshold);
  }
  // HA_NCCL_ISLAND_PREFIX_LEN: unset (-1) or 0..128; an island always contains its rail.
  FUZZ_REQUIRE(in(c.island_prefix_len, -1, 128));
  std::array<std::uint8_t, 16> v4{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 21, 0, 0}, v6{0xfd, 0, 0, 1};
  for (const NetPrefix& rail : {make_prefix(v4, 120), make_prefix(v6, 64)}) {
    const NetPrefix island = island_of(rail, c.island_prefix_len);
    FUZZ_REQUIRE(prefix_contains(island, rail) && (c.island_prefix_len >= 0 || island == rail));
  }

  const auto t = net::QpTimeouts::from_lookup(lookup);
  FUZZ_REQUIRE(t.timeout >= 1 && t.timeout <= 31 && t.retry_cnt <= 7);
  // As init.cpp uses them: as given, and with the Soft-RoCE adjustment; and timeout 0.
  for (auto [to, rc] : {std::pair<unsigned, unsigned>{t.timeout, t.retry_cnt}, {17u, 6u}, {0u, t.retry_cnt}}) {
    for (const auto& w : config_warnings(c, to, rc)) FUZZ_REQUIRE(!w.empty());
    const double window = hw_retry_window_ms(to, rc);
    FUZZ_REQUIRE(window >= 0 && window < 1e8);
  }
  for (int tc : {-1, 0, 15, 16, 255, 256, -2}) {
    const Qos q = resolve_qos(c, tc);
    FUZZ_REQUIRE(q.service_level <= 15);
  }
  const auto filter = net::DeviceFilter::from_lookup(lookup);
  (void)filter.matches("mlx5_0", 1);
  (void)filter.matches("rxe0", 2);
  return 0;
}
