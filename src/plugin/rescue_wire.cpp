// The rescue service's sealed frames (rescue_wire.hpp).
#include "rescue_wire.hpp"

#include <cstring>

namespace nccl_ha::plugin {

namespace {
constexpr std::string_view kRequestLabel = "nccl-ha/6 rescue request";
constexpr std::string_view kAnswerLabel = "nccl-ha/6 rescue answer";
}  // namespace

std::vector<std::uint8_t> seal_rescue_request(const net::Key& key, std::uint64_t id, const ReprotectMsg& m) {
  const net::Bytes body = net::bytes_of(m);
  const net::Mac tag = net::mac(key, kRequestLabel, {net::bytes_of(id), body});
  std::vector<std::uint8_t> out(body.begin(), body.end());
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

std::optional<RescueRequest> open_rescue_request(const net::Key& key, std::uint64_t id, std::span<const std::uint8_t> payload) {
  if (payload.size() != kRescueRequestSize || net::all_zero(key)) return std::nullopt;
  const auto body = payload.first(sizeof(ReprotectMsg));
  const net::Mac want = net::mac(key, kRequestLabel, {net::bytes_of(id), body});
  if (!net::mac_equal(payload.last(net::kMacSize), want)) return std::nullopt;
  RescueRequest r;
  ReprotectMsg raw;
  std::memcpy(&raw, body.data(), sizeof raw);
  if (!read_record(raw, r.msg)) return std::nullopt;
  r.tag = want;
  return r;
}

std::vector<std::uint8_t> seal_rescue_answer(const net::Key& key, std::uint64_t id, const net::Mac& request_tag,
                                             std::uint16_t type, std::span<const std::uint8_t> body) {
  const net::Mac tag = net::mac(key, kAnswerLabel, {net::bytes_of(id), request_tag, net::bytes_of(type), body});
  std::vector<std::uint8_t> out(body.begin(), body.end());
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

std::optional<std::vector<std::uint8_t>> open_rescue_answer(const net::Key& key, std::uint64_t id, const net::Mac& request_tag,
                                                            std::uint16_t type, std::span<const std::uint8_t> payload) {
  if (payload.size() < net::kMacSize || payload.size() > kRescueMaxAnswer) return std::nullopt;
  const auto body = payload.first(payload.size() - net::kMacSize);
  if (!net::mac_equal(payload.last(net::kMacSize),
                      net::mac(key, kAnswerLabel, {net::bytes_of(id), request_tag, net::bytes_of(type), body})))
    return std::nullopt;
  return std::vector<std::uint8_t>(body.begin(), body.end());
}

}  // namespace nccl_ha::plugin
