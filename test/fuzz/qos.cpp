// QoS values: HA_NCCL_IB_TC / NCCL_IB_TC / HA_NCCL_IB_SL / NCCL_IB_SL and the communicator's
// trafficClass, as the plugin resolves them (config.cpp resolve_qos) and puts them on the wire
// (conn_msg.cpp). Input: up to five lines, the values of those four variables and the
// communicator's traffic class (an integer; anything else is "not given", -1); a line "!" leaves
// its variable unset. Properties: the variable that is set and valid wins, in NCCL's order; the
// service level is never above 15; every resolved QoS survives the connection request's round
// trip (the listener never refuses what a connector resolved).
#include "core/conn_msg.hpp"
#include "fuzz_common.hpp"
#include "nccl_ha/net/env.hpp"
#include "runtime/config.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {
constexpr const char* kVars[] = {"HA_NCCL_IB_TC", "NCCL_IB_TC", "HA_NCCL_IB_SL", "NCCL_IB_SL"};

// The first set variable's value if it is an integer in [-1, max], else -1 (as the plugin: WARN, default).
int expected(const std::optional<std::string>& ha, const std::optional<std::string>& nccl, int max) {
  const auto& v = ha ? ha : nccl;
  if (!v) return -1;
  auto n = net::parse_int(*v);
  return n && *n >= -1 && *n <= max ? static_cast<int>(*n) : -1;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto ls = fuzz::lines(fuzz::text(data, size));
  std::optional<std::string> vals[4];
  for (std::size_t i = 0; i < 4 && i < ls.size(); ++i)
    if (ls[i] != "!") vals[i] = ls[i];
  const net::EnvLookup lookup = [&vals](const char* name) -> std::optional<std::string> {
    for (int i = 0; i < 4; ++i)
      if (std::string_view(name) == kVars[i]) return vals[i];
    return std::nullopt;
  };
  int comm_tc = -1;
  if (ls.size() > 4)
    if (auto n = net::parse_int(ls[4]); n && *n >= INT32_MIN && *n <= INT32_MAX) comm_tc = static_cast<int>(*n);
  const Config c = Config::from_lookup(lookup);
  FUZZ_REQUIRE(c.ib_tc == expected(vals[0], vals[1], 255));
  FUZZ_REQUIRE(c.ib_sl == expected(vals[2], vals[3], 15));
  const Qos q = resolve_qos(c, comm_tc);
  FUZZ_REQUIRE(q.service_level <= kMaxServiceLevel);
  if (c.ib_tc >= 0) FUZZ_REQUIRE(q.traffic_class == c.ib_tc);
  if (c.ib_sl >= 0) FUZZ_REQUIRE(q.service_level == c.ib_sl);
  if (c.ib_tc < 0 && (comm_tc < 0 || comm_tc > 255)) FUZZ_REQUIRE(q.traffic_class == 0);

  ConnRequest r;
  r.primary.qpn = 1;
  r.primary.port = 1;
  r.primary.link_layer = IBV_LINK_LAYER_ETHERNET;
  r.fifo = {0x1000, {1, 0}};
  r.ctrl = {0x2000, {2, 0}};
  r.qos = q;
  Candidate primary;
  primary.link_layer = IBV_LINK_LAYER_ETHERNET;
  primary.flags = kCandUp | kCandPrimary;
  r.candidates = {primary};
  auto d = decode_request(encode_request(r));
  FUZZ_REQUIRE(d.ok() && d->qos == q);
  return 0;
}
