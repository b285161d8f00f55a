// ha-ping's command line and its QoS variables (tools/ha-ping/options.cpp). Input: one argument
// per line; a line "ENV NAME=VALUE" sets a variable instead. Properties: what parses is within
// the documented ranges (tx depth 1..128, SL 0..15, at least one size, none above 1 GiB, a finite
// non-negative --min-bw, a percentage in (0, 100]); errors are messages, never a crash.
#include <cmath>
#include <map>

#include "fuzz_common.hpp"
#include "options.hpp"

using namespace nccl_ha;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto ls = fuzz::lines(fuzz::text(data, size));
  std::vector<std::string> args{"ha-ping"};
  std::map<std::string, std::string> env;
  for (const auto& l : ls) {
    if (l.rfind("ENV ", 0) == 0) {
      const auto eq = l.find('=', 4);
      env[l.substr(4, eq == std::string::npos ? eq : eq - 4)] = eq == std::string::npos ? "" : l.substr(eq + 1);
    } else if (args.size() < 64) {
      args.push_back(l);
    }
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const ha_ping::EnvLookup lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto o = ha_ping::parse_options(static_cast<int>(args.size()), argv.data(), lookup);
  for (std::size_t i = 1; i < args.size(); ++i) (void)ha_ping::parse_sizes(args[i]);
  if (!o) {
    FUZZ_REQUIRE(!o.error().message.empty());
    return 0;
  }
  FUZZ_REQUIRE(o->window >= 1 && o->window <= 128 && o->sl <= 15 && o->port >= 1);
  FUZZ_REQUIRE(!o->sizes.empty());
  for (auto s : o->sizes) FUZZ_REQUIRE(s <= (1ull << 30));
  FUZZ_REQUIRE(std::isfinite(o->min_bw) && o->min_bw >= 0);
  if (o->min_bw_percent) FUZZ_REQUIRE(o->min_bw > 0 && o->min_bw <= 100);
  if (auto bw = ha_ping::min_bw_mib_s(*o, 100000)) FUZZ_REQUIRE(std::isfinite(*bw));
  return 0;
}
