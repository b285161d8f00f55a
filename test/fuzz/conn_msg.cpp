// The plugin's handshake messages (src/plugin/core/conn_msg.cpp, wire format v4), decoded from any
// bytes: the three decoders on every input. Properties: decode never crashes; what decodes
// re-encodes to exactly the input (canonical) and decodes again to the same value; a request
// never carries a service level above 15, nor a zero address or rkey; a candidate list holds
// 1..kMaxCandidates ports, exactly one primary. On a decoded list, the standby ranking
// (topology.cpp rank_standby_pairs) against itself lists only legal pairs, each once, and does
// not depend on the order of the list; a reply's offer passes check_standby_offer against a
// request listing the same ports exactly when the ranking lists that pair.
#include <algorithm>

#include "core/conn_msg.hpp"
#include "fuzz_common.hpp"
#include "runtime/topology.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {

template <class T, class Encode, class Decode>
void canonical(const T& value, std::span<const std::uint8_t> in, Encode encode, Decode decode) {
  const auto again = encode(value);
  FUZZ_REQUIRE(again.size() == in.size() && std::equal(again.begin(), again.end(), in.begin()));
  auto twice = decode(again);
  FUZZ_REQUIRE(twice.ok() && *twice == value);
}

const Candidate* find(const std::vector<Candidate>& list, int dev) {
  const auto it = std::find_if(list.begin(), list.end(), [dev](const Candidate& c) { return c.dev == dev; });
  return it == list.end() ? nullptr : &*it;
}

void check_list(const std::vector<Candidate>& list) {
  FUZZ_REQUIRE(!list.empty() && list.size() <= kMaxCandidates);
  FUZZ_REQUIRE(std::count_if(list.begin(), list.end(), [](const Candidate& c) { return c.flags & kCandPrimary; }) == 1);
  const int primary = primary_dev(list);
  const PortPair active{primary, primary};
  const auto pairs = rank_standby_pairs(list, list, active);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const Candidate *x = find(list, pairs[i].a), *y = find(list, pairs[i].b);
    FUZZ_REQUIRE(x && y && (x->flags & kCandUp) && (y->flags & kCandUp) && reachable(*x, *y) && !(pairs[i] == active));
    for (std::size_t j = 0; j < i; ++j) FUZZ_REQUIRE(!(pairs[j] == pairs[i]));
  }
  if (!pairs.empty()) FUZZ_REQUIRE(!explain_pair(list, list, pairs.front(), active).empty());
  auto reversed = list;
  std::reverse(reversed.begin(), reversed.end());
  FUZZ_REQUIRE(rank_standby_pairs(reversed, reversed, active) == pairs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::bytes(data, size);
  if (auto r = decode_request(in)) {
    FUZZ_REQUIRE(size == kRequestHeadSize + r->candidates.size() * kCandidateSize + kRescueSize);
    FUZZ_REQUIRE(r->qos.service_level <= kMaxServiceLevel && r->fifo.addr != 0 && r->ctrl.addr != 0);
    FUZZ_REQUIRE(r->fifo.rkey[0] != 0 && r->ctrl.rkey[0] != 0 && r->fifo.rkey[1] == 0 && r->ctrl.rkey[1] == 0);
    FUZZ_REQUIRE(r->member < kMaxVDeviceMembers);
    canonical(*r, in, encode_request, decode_request);
    check_list(r->candidates);
  } else {
    FUZZ_REQUIRE(!r.error().message.empty());
  }
  if (auto r = decode_reply(in)) {
    FUZZ_REQUIRE(size == kReplyHeadSize + r->candidates.size() * kCandidateSize + kRescueSize && r->ctrl.addr != 0);
    if (r->standby) {
      const Candidate* b = find(r->candidates, r->standby->pair.b);
      FUZZ_REQUIRE(b && (b->flags & kCandUp) && r->standby->ctrl_rkey != 0);
    }
    canonical(*r, in, encode_reply, decode_reply);
    check_list(r->candidates);
    // The connector's check, with a request that lists the same ports (device numbers included).
    ConnRequest sent;
    sent.offer_standby = true;
    sent.candidates = r->candidates;
    // It accepts exactly the pairs the ranking lists.
    const Status s = check_standby_offer(sent, *r);
    if (r->standby) {
      const int primary = primary_dev(r->candidates);
      const auto pairs = rank_standby_pairs(sent.candidates, r->candidates, {primary, primary});
      FUZZ_REQUIRE(s.ok() == (std::find(pairs.begin(), pairs.end(), r->standby->pair) != pairs.end()));
    }
    if (!s) FUZZ_REQUIRE(r->standby && !s.error().message.empty());
  } else {
    FUZZ_REQUIRE(!r.error().message.empty());
  }
  if (auto r = decode_ready(in)) {
    FUZZ_REQUIRE(size == kReadySize && (!r->standby || (r->fifo_rkey != 0 && r->ctrl_rkey != 0)));
    canonical(*r, in, encode_ready, decode_ready);
  } else {
    FUZZ_REQUIRE(!r.error().message.empty());
  }
  return 0;
}
