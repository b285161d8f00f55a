// The rescue service's sealed frames (rescue_wire.hpp).
#include "ha/rescue_wire.hpp"

#include <cstring>

#include "nccl_ha/net/handshake.hpp"

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

boost::asio::awaitable<Expected<ProvenRequest>> read_rescue_request(boost::asio::ip::tcp::socket& sock,
                                                                    const RescueKeyLookup& key_for,
                                                                    std::chrono::milliseconds deadline) {
  auto f = co_await net::read_first_frame(sock, net::kAnyToken, deadline, kRescueRequestSize);
  if (!f) co_return std::move(f).error();
  if (f->type != kRescueMsg) co_return make_error(Errc::bad_type, "a frame of type " + std::to_string(f->type));
  const std::optional<net::Key> key = key_for(f->token);
  if (!key) co_return make_error(Errc::not_found, "a request for no connection here");
  auto req = open_rescue_request(*key, f->token, f->payload);
  if (!req) co_return make_error(Errc::bad_token, "a request that does not carry the connection's seal");
  ProvenRequest out{f->token, *req, {}};
  out.raw.assign(f->payload.begin(), f->payload.begin() + sizeof(ReprotectMsg));
  co_return out;
}

}  // namespace nccl_ha::plugin
