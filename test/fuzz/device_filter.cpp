// NCCL_IB_HCA syntax (src/net/device_filter.cpp). Input: line 1 the filter, every further line
// "DEVICE PORT" to match. Properties: a filter that parses has named entries (no '^', '=' or
// blank in a name, ports 1..255, rails 0..kMaxRail, planes 0..kMaxPlane); each entry selects its
// own device and port (or, for '^', leaves them out); selecting_entry names an entry exactly when
// an including list matches; from_lookup (HA_NCCL_IB_HCA) gives the same filter, or match-all for
// a bad one.
#include "env_vars.hpp"
#include "nccl_ha/net/device_filter.hpp"

using namespace nccl_ha;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto ls = fuzz::lines(fuzz::text(data, size));
  const std::string spec = ls.empty() ? std::string() : ls[0];
  auto f = net::DeviceFilter::parse(spec);
  const std::string var = "HA_NCCL_IB_HCA";
  const net::EnvLookup lookup = [&](const char* name) -> std::optional<std::string> {
    if (var == name) return spec;
    return std::nullopt;
  };
  const auto from_env = net::DeviceFilter::from_lookup(lookup);
  if (!f) {
    FUZZ_REQUIRE(!f.error().message.empty());
    FUZZ_REQUIRE(from_env.entries().empty() && !from_env.exclude());  // match-all
    FUZZ_REQUIRE(from_env.matches("anything", 7));
  } else {
    FUZZ_REQUIRE(from_env.entries().size() == f->entries().size() && from_env.exclude() == f->exclude());
    for (const auto& e : f->entries()) {
      FUZZ_REQUIRE(!e.name.empty() && e.name.find_first_of("^= \t") == std::string::npos);
      FUZZ_REQUIRE(!e.port || (*e.port >= 1 && *e.port <= 255));
      FUZZ_REQUIRE(!e.rail || (*e.rail >= 0 && *e.rail <= net::DeviceFilter::kMaxRail));
      FUZZ_REQUIRE(!e.plane || (*e.plane >= 0 && *e.plane <= net::DeviceFilter::kMaxPlane));
      FUZZ_REQUIRE(f->matches(e.name, e.port.value_or(1)) == !f->exclude());
    }
    if (f->entries().empty()) FUZZ_REQUIRE(f->matches("anything", 1));
  }
  for (std::size_t i = 1; i < ls.size() && i < 64; ++i) {
    const auto sp = ls[i].rfind(' ');
    const std::string dev = ls[i].substr(0, sp);
    std::uint32_t port = 1;
    if (sp != std::string::npos)
      if (auto p = net::parse_int(ls[i].substr(sp + 1)); p && *p >= 0 && *p <= 0xffffffff) port = static_cast<std::uint32_t>(*p);
    if (f) {
      const bool hit = f->matches(dev, port);
      const auto* sel = f->selecting_entry(dev, port);
      FUZZ_REQUIRE(sel == nullptr || (hit && !f->exclude()));
      FUZZ_REQUIRE(f->exclude() || f->entries().empty() || hit == (sel != nullptr));
    }
    (void)from_env.matches(dev, port);
  }
  return 0;
}
