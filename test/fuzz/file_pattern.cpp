// HA_NCCL_STATS_FILE / HA_NCCL_PROM_FILE patterns (src/plugin/runtime/monitor.cpp expand_path). Input:
// the pattern. Properties: %h, %p and %% expand, anything else (and a lone trailing %) stays as
// written and is reported; a pattern without '%' is its own expansion.
#include <algorithm>

#include "fuzz_common.hpp"
#include "runtime/monitor.hpp"

using namespace nccl_ha;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view pattern = fuzz::text(data, size);
  std::vector<std::string> unknown;
  const std::string out = plugin::expand_path(pattern, "node-7", 4242, &unknown);
  if (pattern.find('%') == std::string_view::npos) FUZZ_REQUIRE(out == pattern && unknown.empty());
  for (const auto& u : unknown) FUZZ_REQUIRE(!u.empty() && u[0] == '%' && u.size() <= 2);
  const auto percents = static_cast<std::size_t>(std::count(pattern.begin(), pattern.end(), '%'));
  FUZZ_REQUIRE(unknown.size() <= percents);
  FUZZ_REQUIRE(plugin::expand_path(pattern, "node-7", 4242) == out);
  return 0;
}
