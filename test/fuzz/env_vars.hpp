// Text inputs as environments: one "NAME=VALUE" per line (a line without '=' sets NAME to "").
#pragma once

#include <map>
#include <optional>
#include <string>

#include "fuzz_common.hpp"
#include "nccl_ha/net/env.hpp"

namespace nccl_ha::fuzz {

struct FuzzEnv {
  std::map<std::string, std::string> vars;
  explicit FuzzEnv(std::string_view input) {
    for (const auto& l : lines(input)) {
      const auto eq = l.find('=');
      vars.insert_or_assign(l.substr(0, eq), eq == std::string::npos ? std::string() : l.substr(eq + 1));
    }
  }
  net::EnvLookup lookup() const {
    return [this](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

}  // namespace nccl_ha::fuzz
