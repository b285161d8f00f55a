#include "mgmt_wire.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace hnd::wire {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint32_t get_u32(const std::uint8_t* p) noexcept {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | std::uint32_t{p[3]};
}

bool digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A whole decimal in [0, max] (digits only: no sign, no blanks).
std::optional<std::uint64_t> decimal(std::string_view s, std::uint64_t max) {
  if (!digits(s) || s.size() > 20) return std::nullopt;
  errno = 0;
  const std::string text(s);
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || v > max) return std::nullopt;
  return v;
}

// A finite number (strtod's syntax), the whole of s.
std::optional<double> number(std::string_view s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  const std::string text(s);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

template <std::size_t N>
std::array<std::uint8_t, N> take(std::string_view s) {
  std::array<std::uint8_t, N> a{};
  std::memcpy(a.data(), s.data(), N);
  return a;
}

std::string_view as_text(std::span<const std::uint8_t> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

}  // namespace

std::string encode(MsgType type, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  put_u32(out, static_cast<std::uint32_t>(type));
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

Header decode_header(std::span<const std::uint8_t, kHeaderSize> b) noexcept {
  return Header{get_u32(b.data()), get_u32(b.data() + 4)};
}

Split split(std::span<const std::uint8_t> stream) {
  Split s;
  while (stream.size() - s.consumed >= kHeaderSize) {
    const Header h = decode_header(stream.subspan(s.consumed).first<kHeaderSize>());
    if (!fits(h)) {
      s.error = "oversized message (" + std::to_string(h.len) + " bytes)";
      break;
    }
    if (stream.size() - s.consumed - kHeaderSize < h.len) break;
    s.messages.push_back({h.type, std::string(as_text(stream.subspan(s.consumed + kHeaderSize, h.len)))});
    s.consumed += kHeaderSize + h.len;
  }
  return s;
}

std::string field(std::string_view text, std::string_view key) {
  std::size_t line = 0;
  while (line <= text.size()) {
    std::size_t end = text.find('\n', line);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view l = text.substr(line, end - line);
    if (l.size() > key.size() && l.substr(0, key.size()) == key && l[key.size()] == '=')
      return std::string(l.substr(key.size() + 1));
    line = end + 1;
  }
  return "";
}

std::optional<ChurnMsg> parse_churn(const std::string& m) {
  const std::size_t nl = m.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  const std::string_view head(m.data(), nl);
  if (head.size() < 5 || (head[0] != 'h' && head[0] != 'x') || head[1] != ' ') return std::nullopt;
  const std::size_t sp = head.find(' ', 2);
  if (sp == std::string_view::npos) return std::nullopt;
  const auto pair = decimal(head.substr(2, sp - 2), UINT64_MAX);
  const auto attempt = decimal(head.substr(sp + 1), UINT32_MAX);
  if (!pair || !attempt) return std::nullopt;
  return ChurnMsg{head[0], *pair, static_cast<unsigned>(*attempt), m.substr(nl + 1)};
}

std::optional<StreamLimit> parse_limit(const std::string& m) {
  constexpr std::string_view kFinal = " final";
  std::string_view s(m);
  StreamLimit l;
  if (s.size() > kFinal.size() && s.substr(s.size() - kFinal.size()) == kFinal) {
    l.final = true;
    s.remove_suffix(kFinal.size());
  }
  const auto v = decimal(s, UINT64_MAX);
  if (!v) return std::nullopt;
  l.messages = *v;
  return l;
}

std::optional<std::int64_t> parse_clock_reply(const std::string& m) {
  const auto v = decimal(m, INT64_MAX);
  if (!v) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

std::optional<ClockResult> parse_clock_result(const std::string& m) {
  constexpr std::string_view kPrefix = "result ";
  const std::string_view s(m);
  if (s.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view rest = s.substr(kPrefix.size());
  const std::size_t sp = rest.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  const auto offset = number(rest.substr(0, sp));
  const auto rtt = number(rest.substr(sp + 1));
  if (!offset || !rtt || *rtt < 0) return std::nullopt;
  return ClockResult{*offset, *rtt};
}

std::optional<std::uint64_t> parse_count(const std::string& m) { return decimal(m, UINT64_MAX); }

std::string encode_challenge(const Nonce& rank0_nonce) {
  std::string p(kChallengeMagic);
  p.append(reinterpret_cast<const char*>(rank0_nonce.data()), rank0_nonce.size());
  return p;
}

std::optional<Nonce> decode_challenge(std::string_view p) {
  if (p.size() != kChallengeSize || p.substr(0, kChallengeMagic.size()) != kChallengeMagic) return std::nullopt;
  return take<kNonceSize>(p.substr(kChallengeMagic.size()));
}

std::string encode_proof(const Nonce& rank1_nonce, const Proof& proof) {
  std::string p(reinterpret_cast<const char*>(rank1_nonce.data()), rank1_nonce.size());
  p.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  return p;
}

std::optional<ProofMsg> decode_proof(std::string_view p) {
  if (p.size() != kProofMsgSize) return std::nullopt;
  return ProofMsg{take<kNonceSize>(p), take<kProofSize>(p.substr(kNonceSize))};
}

std::string encode_ok(const Proof& proof) { return std::string(reinterpret_cast<const char*>(proof.data()), proof.size()); }

std::optional<Proof> decode_ok(std::string_view p) {
  if (p.size() != kProofSize) return std::nullopt;
  return take<kProofSize>(p);
}

}  // namespace hnd::wire
