// ha-net-driver: the data pattern. Byte b of a message is a function of (sender rank, phase
// epoch, message key, b): byte b % 8 of splitmix64(seed + b / 8). Random access, so a receiver
// can check any window, and messages, offsets and senders never share a pattern.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hnd::pattern {

inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::uint64_t seed(int rank, std::uint32_t epoch, std::uint64_t key) {
  return mix64((static_cast<std::uint64_t>(rank + 1) << 56) ^ (static_cast<std::uint64_t>(epoch) << 40) ^ key);
}

inline std::uint8_t byte_at(std::uint64_t s, std::size_t b) {
  std::uint64_t w = mix64(s + b / 8);
  std::uint8_t out[8];
  std::memcpy(out, &w, 8);
  return out[b % 8];
}

// Writes bytes [from, to) of the pattern (xor `invert`, to poison with a guaranteed difference).
inline void fill(std::uint8_t* p, std::size_t from, std::size_t to, std::uint64_t s, std::uint8_t invert = 0) {
  std::size_t b = from;
  for (; b < to && b % 8; ++b) p[b] = byte_at(s, b) ^ invert;
  std::uint64_t inv = invert ? ~std::uint64_t{0} : 0;
  for (; b + 8 <= to; b += 8) {
    std::uint64_t w = mix64(s + b / 8) ^ inv;
    std::memcpy(p + b, &w, 8);
  }
  for (; b < to; ++b) p[b] = byte_at(s, b) ^ invert;
}

struct Mismatch {
  std::uint64_t bytes = 0;
  std::size_t first = 0;  // offset of the first wrong byte (valid if bytes > 0)
};

// Compares bytes [from, to) with the pattern.
inline void verify(const std::uint8_t* p, std::size_t from, std::size_t to, std::uint64_t s, Mismatch* m) {
  auto bad = [&](std::size_t off) {
    if (m->bytes++ == 0) m->first = off;
  };
  std::size_t b = from;
  for (; b < to && b % 8; ++b)
    if (p[b] != byte_at(s, b)) bad(b);
  for (; b + 8 <= to; b += 8) {
    std::uint64_t w = mix64(s + b / 8), got;
    std::memcpy(&got, p + b, 8);
    if (got == w) continue;
    for (std::size_t i = 0; i < 8; ++i)
      if (p[b + i] != byte_at(s, b + i)) bad(b + i);
  }
  for (; b < to; ++b)
    if (p[b] != byte_at(s, b)) bad(b);
}

// The sampled windows (start, middle, end; 64 bytes each) used when not every byte is checked.
template <class F>
void for_each_window(std::size_t n, F&& f) {
  constexpr std::size_t w = 64;
  if (n <= 3 * w) {
    f(std::size_t{0}, n);
    return;
  }
  f(std::size_t{0}, w);
  f(n / 2 - w / 2, n / 2 + w / 2);
  f(n - w, n);
}

}  // namespace hnd::pattern
