// A test's environment: a lookup over a map that records every name asked for (config_test,
// test_hooks_test).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::test {

// A lookup over a map, recording every name asked for.
struct MapEnv {
  std::map<std::string, std::string> vars;
  std::vector<std::string> asked;
  net::EnvLookup lookup() {
    return [this](const char* name) -> std::optional<std::string> {
      asked.emplace_back(name);
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

}  // namespace nccl_ha::test
