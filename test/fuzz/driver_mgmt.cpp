// ha-net-driver's management connection (tools/ha-net-driver/mgmt_wire.cpp): a byte stream from
// the peer cut into messages as Mgmt::recv reads it, and every message through the parser of its
// type (any type through every parser, a quarter of the time). Properties: nothing crashes or
// allocates more than the limit; split consumes whole messages only, which re-encode to exactly the
// bytes consumed, and stops early only at an incomplete message or at a header above kMaxPayload;
// a parsed churn message, stream limit or count prints back as its canonical text and parses to
// the same value; a field is one line's rest; the authentication payloads have their exact sizes.
#include <cmath>
#include <cstdio>

#include "fuzz_common.hpp"
#include "mgmt_wire.hpp"

using namespace hnd;
namespace fuzz = nccl_ha::fuzz;

namespace {

void parse(std::uint32_t type, const std::string& p, bool every) {
  auto is = [&](MsgType t) { return every || type == static_cast<std::uint32_t>(t); };
  if (is(MsgType::hello) || is(MsgType::result))
    for (const char* key : {"rank", "api", "name", "commid", "params", "ok", "result", "error"}) {
      const std::string v = wire::field(p, key);
      FUZZ_REQUIRE(v.find('\n') == std::string::npos && v.size() < p.size() + 1);
      if (!v.empty()) FUZZ_REQUIRE(p.find(std::string(key) + "=" + v) != std::string::npos);
    }
  if (is(MsgType::churn))
    if (auto c = wire::parse_churn(p)) {
      char head[64];
      std::snprintf(head, sizeof head, "%c %llu %u\n", c->kind, static_cast<unsigned long long>(c->pair), c->attempt);
      const std::string canonical = head + c->body;
      auto again = wire::parse_churn(canonical);
      FUZZ_REQUIRE(again && again->kind == c->kind && again->pair == c->pair && again->attempt == c->attempt &&
                   again->body == c->body);
      FUZZ_REQUIRE(c->kind == 'h' || c->kind == 'x');
    }
  if (is(MsgType::extend))
    if (auto l = wire::parse_limit(p)) {
      auto again = wire::parse_limit(std::to_string(l->messages) + (l->final ? " final" : ""));
      FUZZ_REQUIRE(again && again->messages == l->messages && again->final == l->final);
    }
  if (is(MsgType::clock)) {
    if (auto t = wire::parse_clock_reply(p)) FUZZ_REQUIRE(*t >= 0 && wire::parse_clock_reply(std::to_string(*t)) == t);
    if (auto r = wire::parse_clock_result(p)) FUZZ_REQUIRE(std::isfinite(r->offset_ms) && r->rtt_ms >= 0);
  }
  if (is(MsgType::data))
    if (auto n = wire::parse_count(p)) FUZZ_REQUIRE(wire::parse_count(std::to_string(*n)) == n);
  if (is(MsgType::auth_challenge))
    if (auto n = wire::decode_challenge(p)) FUZZ_REQUIRE(wire::encode_challenge(*n) == p);
  if (is(MsgType::auth_proof))
    if (auto pr = wire::decode_proof(p)) FUZZ_REQUIRE(wire::encode_proof(pr->nonce, pr->proof) == p);
  if (is(MsgType::auth_ok))
    if (auto o = wire::decode_ok(p)) FUZZ_REQUIRE(wire::encode_ok(*o) == p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::bytes(data, size);
  const wire::Split s = wire::split(in);
  FUZZ_REQUIRE(s.consumed <= size);
  std::string again;
  for (const auto& m : s.messages) {
    FUZZ_REQUIRE(m.payload.size() <= wire::kMaxPayload);
    again += wire::encode(static_cast<MsgType>(m.type), m.payload);
  }
  FUZZ_REQUIRE(again.size() == s.consumed && again == std::string(fuzz::text(data, s.consumed)));
  const std::size_t left = size - s.consumed;
  if (!s.error.empty()) {
    FUZZ_REQUIRE(left >= wire::kHeaderSize && !wire::fits(wire::decode_header(in.subspan(s.consumed).first<wire::kHeaderSize>())));
  } else if (left >= wire::kHeaderSize) {  // stopped at an incomplete message
    const auto h = wire::decode_header(in.subspan(s.consumed).first<wire::kHeaderSize>());
    FUZZ_REQUIRE(wire::fits(h) && left - wire::kHeaderSize < h.len);
  }
  const bool every = size % 4 == 0;
  for (const auto& m : s.messages) parse(m.type, m.payload, every);
  return 0;
}
