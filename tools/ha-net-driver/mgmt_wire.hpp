// ha-net-driver: the management connection's wire format, pure (no sockets; fuzzed by
// test/fuzz/driver_mgmt.cpp). A message is an 8-byte header (type and payload length, both u32
// big-endian) and at most kMaxPayload payload bytes. The payloads are text, except the listen
// handles (binary) and the authentication messages:
//
//   rank 0                                   rank 1
//   auth_challenge: "HNDAUTH1" + nonce0  ->
//                                        <-  auth_proof: nonce1 + proof1
//   auth_ok: proof0                      ->  (or an abort "authentication failed", and the close)
//
// proof1 = HMAC-SHA256 keyed by the token over ("ha-net-driver rank 1", nonce0, nonce1), proof0 over
// ("ha-net-driver rank 0", nonce1, nonce0) (tools/common/token_auth.hpp). Rank 0 answers nothing
// else before a proof holds; rank 1 goes on only once rank 0 proved the token too.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hnd {

// extend: the sender's new message count of a --min-seconds stream; clock: the clock-offset probe;
// data: a fault scenario's own message (flood: the number of bad connectors).
// churn: the listen handle of one --churn pair (churn.hpp).
enum class MsgType : std::uint32_t {
  hello = 1, handles = 2, barrier = 3, result = 4, abort = 5, extend = 6, clock = 7, data = 8, churn = 9,
  auth_challenge = 10, auth_proof = 11, auth_ok = 12
};

namespace wire {

constexpr std::size_t kHeaderSize = 8;
constexpr std::uint32_t kMaxPayload = 1u << 20;
constexpr std::size_t kNonceSize = 32, kProofSize = 32;
using Nonce = std::array<std::uint8_t, kNonceSize>;
using Proof = std::array<std::uint8_t, kProofSize>;
constexpr std::string_view kChallengeMagic = "HNDAUTH1";
// What each rank's proof of the shared token is bound to (ha_tools::prove's label).
constexpr const char* kRank1Label = "ha-net-driver rank 1";
constexpr const char* kRank0Label = "ha-net-driver rank 0";
constexpr std::size_t kChallengeSize = 8 + kNonceSize;
constexpr std::size_t kProofMsgSize = kNonceSize + kProofSize;

struct Header {
  std::uint32_t type = 0;
  std::uint32_t len = 0;
};

// Header + payload, ready to send.
std::string encode(MsgType type, std::string_view payload);
// The header's fields (any 8 bytes are a header; its length is checked by fits()).
Header decode_header(std::span<const std::uint8_t, kHeaderSize> bytes) noexcept;
inline bool fits(const Header& h) noexcept { return h.len <= kMaxPayload; }

struct Message {
  std::uint32_t type = 0;
  std::string payload;
};
// A byte stream cut into whole messages as Mgmt::recv reads it. Stops at the first incomplete
// message (`consumed` bytes were used), or at a header announcing more than kMaxPayload (`error`).
struct Split {
  std::vector<Message> messages;
  std::size_t consumed = 0;
  std::string error;
};
Split split(std::span<const std::uint8_t> stream);

// The hello's and the result's "key=value" lines: the value of the first line that starts with
// "key=", "" when there is none.
std::string field(std::string_view text, std::string_view key);

// churn: "h I A\n<handle>" (pair I's listen handle, attempt A) or "x I A\n<reason>" (attempt A of
// pair I abandoned). Syntax only: the caller checks I and A against its own state.
struct ChurnMsg {
  char kind = 0;
  std::uint64_t pair = 0;
  unsigned attempt = 0;
  std::string body;
};
std::optional<ChurnMsg> parse_churn(const std::string& m);

// extend: "N" or "N final" (the sender's message count so far, or its last).
struct StreamLimit {
  std::uint64_t messages = 0;
  bool final = false;
};
std::optional<StreamLimit> parse_limit(const std::string& m);

// clock: rank 1's reply to a probe (its wall clock, microseconds) and rank 0's result
// ("result OFFSET_MS RTT_MS", finite numbers, rtt >= 0).
std::optional<std::int64_t> parse_clock_reply(const std::string& m);
struct ClockResult {
  double offset_ms = 0, rtt_ms = 0;
};
std::optional<ClockResult> parse_clock_result(const std::string& m);

// A decimal count (data: flood's number of bad connectors): digits only, fits in 64 bits.
std::optional<std::uint64_t> parse_count(const std::string& m);

// The authentication messages' payloads.
std::string encode_challenge(const Nonce& rank0_nonce);
std::optional<Nonce> decode_challenge(std::string_view payload);
std::string encode_proof(const Nonce& rank1_nonce, const Proof& proof);
struct ProofMsg {
  Nonce nonce{};
  Proof proof{};
};
std::optional<ProofMsg> decode_proof(std::string_view payload);
std::string encode_ok(const Proof& proof);
std::optional<Proof> decode_ok(std::string_view payload);

}  // namespace wire
}  // namespace hnd
