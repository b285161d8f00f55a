// Shared helpers of the libFuzzer targets (test/fuzz/README.md).
//
//  * Log lines are formatted (hostile values go through the printf path like in production)
//    and dropped: the fuzzers run quietly. Installed before the first input.
//  * require(cond, what): a broken property is a crash with a message, so libFuzzer keeps the
//    input as a crash artifact.
//  * lines(): the text targets' inputs are lines ("NAME=VALUE", a spec, one record per line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::fuzz {

inline void quiet_sink(LogLevel, const char*, int, const char*) {}

struct QuietLog {
  QuietLog() {
    set_log_sink(&quiet_sink);
    set_log_level(LogLevel::trace);  // format every line, print none
  }
};
inline const QuietLog g_quiet_log;

[[noreturn]] inline void broken(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz property broken at %s:%d: %s\n", file, line, what);
  std::abort();
}
#define FUZZ_REQUIRE(cond)                                                 \
  do {                                                                     \
    if (!(cond)) ::nccl_ha::fuzz::broken(#cond, __FILE__, __LINE__);       \
  } while (0)

inline std::span<const std::uint8_t> bytes(const std::uint8_t* data, std::size_t size) { return {data, size}; }

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits at '\n' (every line, empty ones included; a trailing newline ends the last line).
inline std::vector<std::string> lines(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size();
    out.emplace_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace nccl_ha::fuzz
