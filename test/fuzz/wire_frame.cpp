// The wire format's frames (net/wire.cpp): decode_header / decode_frame on any bytes, with the
// token of the first 8 bytes of the input (so both the right and a wrong token are reached) or
// the one of the frame itself. Properties: a frame that decodes re-encodes to exactly its bytes;
// a header that decodes promises no more than the limit; errors are Errors, never a crash.
#include "fuzz_common.hpp"
#include "nccl_ha/net/wire.hpp"

using namespace nccl_ha;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::bytes(data, size);
  // The expected token: the frame's own (offset 16) when the input is long enough, so that the
  // checks behind the token are reached; flipped when the first byte is odd.
  std::uint64_t token = 0;
  if (size >= net::kHeaderSize)
    for (int i = 0; i < 8; ++i) token |= static_cast<std::uint64_t>(data[16 + i]) << (8 * i);
  if (size > 0 && (data[0] & 1)) token = ~token;
  for (std::size_t limit : {net::kMaxPayload, std::size_t{0}, std::size_t{64}}) {
    auto h = net::decode_header(in, token, limit);
    if (h) {
      FUZZ_REQUIRE(h->length <= limit);
      FUZZ_REQUIRE(h->type != 0);
      FUZZ_REQUIRE(h->token == token);
    }
    auto f = net::decode_frame(in, token, limit);
    if (f) {
      FUZZ_REQUIRE(h.ok());
      FUZZ_REQUIRE(f->payload.size() == h->length);
      FUZZ_REQUIRE(size == net::kHeaderSize + f->payload.size());
      const auto again = net::encode_frame(f->type, f->token, f->payload);
      FUZZ_REQUIRE(again.size() == size && std::equal(again.begin(), again.end(), data));
    } else {
      FUZZ_REQUIRE(!f.error().message.empty());
    }
  }
  return 0;
}
