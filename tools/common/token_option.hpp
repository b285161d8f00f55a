// Where a tool's shared token comes from (token_auth.hpp): --token, else an environment variable.
// Header only: the tools' option parsers (and their fuzz targets) need no libcrypto.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace ha_tools {

inline constexpr std::size_t kMaxTokenSize = 1024;

struct Token {
  std::string value;   // empty: no token (anyone who speaks the protocol is served)
  std::string source;  // "--token", the variable's name, or "" when there is none
};

// `option`: --token's value (nullopt: not given); `env_value`: the variable's (nullptr: unset).
// An empty value, or one longer than kMaxTokenSize, is an error, so that an unset shell variable
// expanded into either never switches authentication off silently: the message, or nullopt.
inline std::optional<std::string> resolve_token(const std::optional<std::string>& option, const char* env_name,
                                                const char* env_value, Token& out) {
  out = Token{};
  Token t;
  if (option) {
    t = Token{*option, "--token"};
  } else if (env_value) {
    t = Token{env_value, env_name};
  } else {
    return std::nullopt;
  }
  if (t.value.empty())
    return t.source + " is empty (unset it to run without a token; an empty token would switch authentication off)";
  if (t.value.size() > kMaxTokenSize) return t.source + " is longer than " + std::to_string(kMaxTokenSize) + " bytes";
  out = std::move(t);
  return std::nullopt;
}

}  // namespace ha_tools
