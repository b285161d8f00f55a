// ByteReader (net/wire.hpp): a program of reads over a buffer. Input: byte 0 = number of
// operations n (mod 64), bytes 1..n the operations, the rest the buffer. Properties: a read
// succeeds exactly when enough bytes remain, consumes exactly its size (nothing when it fails),
// and yields the little-endian value of those bytes.
#include <cstring>

#include "fuzz_common.hpp"
#include "nccl_ha/net/wire.hpp"

using namespace nccl_ha;

namespace {
std::uint64_t le(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t nops = std::min<std::size_t>(data[0] % 64, size - 1);
  const std::uint8_t* ops = data + 1;
  const std::uint8_t* buf = data + 1 + nops;
  const std::size_t len = size - 1 - nops;
  net::ByteReader r(std::span<const std::uint8_t>(buf, len));
  std::size_t pos = 0;
  for (std::size_t i = 0; i < nops; ++i) {
    const std::size_t before = r.remaining();
    FUZZ_REQUIRE(before == len - pos);
    const std::uint8_t op = ops[i];
    std::size_t want = 0;
    bool ok = false;
    std::uint64_t got = 0;
    switch (op % 7) {
      case 0: { std::uint8_t v; want = 1; ok = r.u8(v); got = v; break; }
      case 1: { std::uint16_t v; want = 2; ok = r.u16(v); got = v; break; }
      case 2: { std::uint32_t v; want = 4; ok = r.u32(v); got = v; break; }
      case 3: { std::uint64_t v; want = 8; ok = r.u64(v); got = v; break; }
      case 4: { double v; want = 8; ok = r.f64(v); if (ok) std::memcpy(&got, &v, 8); break; }
      case 5: {
        std::uint8_t out[32];
        want = op / 7 % 33;
        ok = r.bytes(std::span<std::uint8_t>(out, want));
        if (ok) FUZZ_REQUIRE(std::memcmp(out, buf + pos, want) == 0);
        FUZZ_REQUIRE(ok == (before >= want));
        if (ok) pos += want;
        FUZZ_REQUIRE(r.remaining() == len - pos);
        continue;
      }
      default: {
        std::string s;
        const std::size_t max_len = op / 7;  // 0..36
        ok = r.str(s, max_len);
        const std::size_t n = before >= 2 ? le(buf + pos, 2) : 0;
        FUZZ_REQUIRE(ok == (before >= 2 && n <= max_len && before - 2 >= n));
        if (ok) {
          FUZZ_REQUIRE(s.size() == n && std::memcmp(s.data(), buf + pos + 2, n) == 0);
          pos += 2 + n;
        }
        FUZZ_REQUIRE(r.remaining() == len - pos);
        continue;
      }
    }
    FUZZ_REQUIRE(ok == (before >= want));
    if (ok) {
      if (op % 7 != 4) FUZZ_REQUIRE(got == le(buf + pos, want));
      else FUZZ_REQUIRE(got == le(buf + pos, 8));
      pos += want;
    }
    FUZZ_REQUIRE(r.remaining() == len - pos);
  }
  return 0;
}
