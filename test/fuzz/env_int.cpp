// Integer variables (src/net/env.cpp): parse_int and env_int / env_int_opt with a lookup.
// Input: line 1 and 2 the bounds (integers; else 0 and 100), line 3 the value, a fourth line the
// value of a second, lower-priority name. Properties: parse_int accepts exactly an optional sign
// and decimal digits that fit in 64 bits (no space, no '0x', nothing after), with the value
// std::from_chars gives; env_int returns a value in [min, max] or the fallback; env_int_opt a value
// in [min, max] or nothing; the first name that is set wins.
#include <charconv>

#include "env_vars.hpp"

using namespace nccl_ha;

namespace {
// The reference: [+-]?digits, the value by from_chars (which takes no '+').
std::optional<std::int64_t> reference(const std::string& s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  std::string_view v = s;
  const bool plus = v[0] == '+';
  if (plus) v.remove_prefix(1);
  if (v.empty() || (plus && v[0] == '-')) return std::nullopt;
  std::int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x, 10);
  if (ec != std::errc{} || end != v.data() + v.size()) return std::nullopt;
  return x;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto ls = fuzz::lines(fuzz::text(data, size));
  for (const auto& l : ls) {
    const auto got = net::parse_int(l);
    const auto want = reference(l);
    FUZZ_REQUIRE(got.has_value() == want.has_value());
    if (got) FUZZ_REQUIRE(*got == *want);
  }
  std::int64_t lo = 0, hi = 100;
  if (ls.size() > 0)
    if (auto v = net::parse_int(ls[0])) lo = *v;
  if (ls.size() > 1)
    if (auto v = net::parse_int(ls[1])) hi = *v;
  std::optional<std::string> first, second;
  if (ls.size() > 2) first = ls[2];
  if (ls.size() > 3) second = ls[3];
  const net::EnvLookup lookup = [&](const char* name) -> std::optional<std::string> {
    return std::string_view(name) == "A" ? first : second;
  };
  const std::int64_t fallback = -4242;
  const std::int64_t v = net::env_int(lookup, {"A", "B"}, fallback, lo, hi);
  const auto& chosen = first ? first : second;
  const auto p = chosen ? net::parse_int(*chosen) : std::nullopt;
  const bool valid = p && *p >= lo && *p <= hi;
  FUZZ_REQUIRE(v == (valid ? *p : fallback));
  const auto o = net::env_int_opt(lookup, {"A", "B"}, lo, hi);
  FUZZ_REQUIRE(o.has_value() == valid);
  if (o) FUZZ_REQUIRE(*o == *p);
  const char* which = nullptr;
  const auto s = net::env_string(lookup, {"A", "B"}, &which);
  FUZZ_REQUIRE(s.has_value() == chosen.has_value());
  if (s) FUZZ_REQUIRE(which && std::string_view(which) == (first ? "A" : "B"));
  return 0;
}
