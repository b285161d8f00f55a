// Environment configuration. A malformed or out-of-range value is never fatal: it is reported
// with a WARN naming the variable, the value and the default used instead.
//
// Every reader takes its variables from an EnvLookup: the process environment by default
// (process_env()), or any function a test or a fuzzer passes (no setenv needed).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>

namespace nccl_ha::net {

// The value of variable `name`, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
// getenv().
const EnvLookup& process_env();

// The first of `names` that is set wins (e.g. {"HA_NCCL_IB_HCA", "NCCL_IB_HCA"}).
std::optional<std::string> env_string(const EnvLookup& env, std::initializer_list<const char*> names,
                                      const char** which = nullptr);
std::optional<std::string> env_string(std::initializer_list<const char*> names, const char** which = nullptr);

// Integer in [min, max]; unset -> fallback; malformed / out of range -> WARN + fallback.
std::int64_t env_int(const EnvLookup& env, std::initializer_list<const char*> names, std::int64_t fallback,
                     std::int64_t min, std::int64_t max);
std::int64_t env_int(std::initializer_list<const char*> names, std::int64_t fallback, std::int64_t min,
                     std::int64_t max);

// Same, but unset or invalid -> nullopt (for "override if given" variables).
std::optional<std::int64_t> env_int_opt(const EnvLookup& env, std::initializer_list<const char*> names,
                                        std::int64_t min, std::int64_t max);
std::optional<std::int64_t> env_int_opt(std::initializer_list<const char*> names, std::int64_t min,
                                        std::int64_t max);

// Strict decimal parse of the whole string; nullopt on anything else.
std::optional<std::int64_t> parse_int(const std::string& s);

}  // namespace nccl_ha::net
