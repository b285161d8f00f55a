// ha-ping's control messages (tools/ha-ping/protocol.cpp), decoded from any bytes: every decoder on
// every input, then what a server does with a Hello (auth.cpp, server_limits.cpp). Properties:
// decoding never crashes and an error has a message; what decodes is within the protocol's bounds
// and re-encodes to exactly the input (a rail setup of an unusable rail: to the same value); a
// Hello's proof holds for the test token only if it is exactly the proof the client would make
// (never for bytes nobody signed); the server's grant never exceeds its own timeout nor the
// client's, and it refuses exactly the Hellos with a size above its --max-size.
#include <algorithm>

#include "auth.hpp"
#include "fuzz_common.hpp"
#include "protocol.hpp"
#include "server_limits.hpp"

using namespace nccl_ha;
using namespace ha_ping;

namespace {

const Nonce kServerNonce = [] {  // make_seeds.py signs its Hello seeds with these
  Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::uint8_t>(i);
  return n;
}();
const std::string kToken = "fuzz-token";

template <class T>
void same_bytes(const T& again, std::span<const std::uint8_t> in) {
  FUZZ_REQUIRE(again.size() == in.size() && std::equal(again.begin(), again.end(), in.begin()));
}

void hello(std::span<const std::uint8_t> in) {
  auto h = decode_hello(in);
  if (!h) {
    FUZZ_REQUIRE(!h.error().message.empty());
    return;
  }
  FUZZ_REQUIRE(h->rails.size() <= 64 && !h->sizes.empty() && h->sizes.size() <= 64);
  for (auto s : h->sizes) FUZZ_REQUIRE(s >= 1 && s <= kMaxMessageSize);
  FUZZ_REQUIRE(h->iters >= 1 && h->iters <= kMaxIters && h->bw_iters >= 1 && h->bw_iters <= kMaxIters);
  FUZZ_REQUIRE(h->window >= 1 && h->window <= 128 && h->timeout_ms >= 1 && h->sl <= 15);
  FUZZ_REQUIRE(h->duration_ms <= kMaxDurationMs);
  same_bytes(encode(*h), in);
  if (hello_proved(in, *h, kToken, kServerNonce)) same_bytes(signed_hello(*h, kToken, kServerNonce), in);
  FUZZ_REQUIRE(!hello_proved(in, *h, kToken + "x", kServerNonce));
  const ServerLimits limits{std::uint64_t{1} << (in.size() % 31), static_cast<std::uint32_t>(1 + in.size() * 997)};
  const auto grant = admit(*h, limits);
  const bool too_big = std::any_of(h->sizes.begin(), h->sizes.end(), [&](auto s) { return s > limits.max_size; });
  FUZZ_REQUIRE(grant.ok() != too_big);
  if (grant) {
    FUZZ_REQUIRE(grant->timeout_ms >= 1 && grant->timeout_ms <= limits.timeout_ms && grant->timeout_ms <= h->timeout_ms);
    FUZZ_REQUIRE(grant->timeout_capped == (h->timeout_ms > limits.timeout_ms));
  } else {
    FUZZ_REQUIRE(grant.error().message.find("above the server's --max-size") != std::string::npos);
  }
}

void rail_setup(std::span<const std::uint8_t> in) {
  auto r = decode_rail_setup(in);
  if (!r) {
    FUZZ_REQUIRE(!r.error().message.empty());
    return;
  }
  const auto again = encode(*r);
  if (r->status == RailStatus::ok) same_bytes(again, in);  // elsewhere the endpoint's bytes mean nothing
  auto twice = decode_rail_setup(again);
  FUZZ_REQUIRE(twice.ok() && twice->status == r->status && twice->reason == r->reason && twice->addr == r->addr &&
               twice->rkey == r->rkey && twice->length == r->length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::bytes(data, size);
  if (auto c = decode_challenge(in)) {
    FUZZ_REQUIRE(c->version == kProtocolVersion);
    same_bytes(encode(*c), in);
  } else {
    FUZZ_REQUIRE(!c.error().message.empty());
  }
  hello(in);
  if (auto a = decode_hello_ack(in)) {
    FUZZ_REQUIRE(a->rails.size() <= 64 && a->timeout_ms >= 1);
    same_bytes(encode(*a), in);
    FUZZ_REQUIRE(!ack_proved(in, *a, kToken, kServerNonce, kServerNonce) ||
                 signed_ack(*a, kToken, kServerNonce, kServerNonce) == std::vector<std::uint8_t>(in.begin(), in.end()));
  } else {
    FUZZ_REQUIRE(!a.error().message.empty());
  }
  rail_setup(in);
  if (auto d = decode_phase_done(in)) {
    same_bytes(encode(*d), in);
  } else {
    FUZZ_REQUIRE(!d.error().message.empty());
  }
  FUZZ_REQUIRE(before_proof(in).size() == (size < kProofSize ? 0 : size - kProofSize));
  return 0;
}
