#include "nccl_ha/net/env.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::net {

const EnvLookup& process_env() {
  static const EnvLookup lookup = [](const char* name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name)) return std::string(v);
    return std::nullopt;
  };
  return lookup;
}

std::optional<std::string> env_string(const EnvLookup& env, std::initializer_list<const char*> names,
                                      const char** which) {
  for (const char* n : names) {
    if (auto v = env(n)) {
      if (which) *which = n;
      return v;
    }
  }
  return std::nullopt;
}

std::optional<std::string> env_string(std::initializer_list<const char*> names, const char** which) {
  return env_string(process_env(), names, which);
}

std::optional<std::int64_t> parse_int(const std::string& s) {
  // strtoll skips leading whitespace; a strict parse does not.
  if (s.empty() || s.size() > 20 || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

std::optional<std::int64_t> env_int_opt(const EnvLookup& env, std::initializer_list<const char*> names,
                                        std::int64_t min, std::int64_t max) {
  const char* which = nullptr;
  auto s = env_string(env, names, &which);
  if (!s) return std::nullopt;
  auto v = parse_int(*s);
  if (!v || *v < min || *v > max) {
    HA_WARN("NET/HA: ignoring %s='%s': expected an integer in [%lld, %lld]", which, s->c_str(),
            static_cast<long long>(min), static_cast<long long>(max));
    return std::nullopt;
  }
  return v;
}

std::optional<std::int64_t> env_int_opt(std::initializer_list<const char*> names, std::int64_t min, std::int64_t max) {
  return env_int_opt(process_env(), names, min, max);
}

std::int64_t env_int(const EnvLookup& env, std::initializer_list<const char*> names, std::int64_t fallback,
                     std::int64_t min, std::int64_t max) {
  const char* which = nullptr;
  auto s = env_string(env, names, &which);
  if (!s) return fallback;
  auto v = parse_int(*s);
  if (!v || *v < min || *v > max) {
    HA_WARN("NET/HA: %s='%s' is invalid (expected an integer in [%lld, %lld]); using the default %lld", which,
            s->c_str(), static_cast<long long>(min), static_cast<long long>(max), static_cast<long long>(fallback));
    return fallback;
  }
  return *v;
}

std::int64_t env_int(std::initializer_list<const char*> names, std::int64_t fallback, std::int64_t min,
                     std::int64_t max) {
  return env_int(process_env(), names, fallback, min, max);
}

}  // namespace nccl_ha::net
