// The rescue service's read of a connection (src/plugin/ha/rescue_wire.hpp) over a real socket, and
// the requester's check of an answer. Byte 0 picks: even, the input is the stream a stranger sends
// the service, read with read_rescue_request, which knows one connection (kId, key kKey); odd, the
// rest is an answer frame's payload checked with open_rescue_answer against a fixed request.
// Properties: a request is accepted only if it names kId, carries kKey's seal over its bytes and
// its record is whole; the read ends at EOF, never at its deadline; no answer opens without the
// seal; nothing throws.
#include <cstring>

#include "fuzz_common.hpp"
#include "ha/rescue_wire.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "stream_socket.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
namespace asio = boost::asio;

namespace {

constexpr std::uint64_t kId = 0x0123456789abcdefull;  // make_seeds.py RESCUE_ID
const net::Key kKey = [] {                            // make_seeds.py RESCUE_KEY: 0x3c x 32
  net::Key k;
  k.fill(0x3c);
  return k;
}();
constexpr std::chrono::milliseconds kDeadline(20000);

asio::awaitable<void> serve(net::tcp::socket& s) {
  const RescueKeyLookup key_for = [](std::uint64_t id) -> std::optional<net::Key> {
    if (id == kId) return kKey;
    return std::nullopt;
  };
  auto r = co_await read_rescue_request(s, key_for, kDeadline);
  if (!r) {
    FUZZ_REQUIRE(r.error().code != Errc::timeout);
    co_return;
  }
  FUZZ_REQUIRE(r->id == kId && r->raw.size() == sizeof(ReprotectMsg));
  FUZZ_REQUIRE(open_rescue_request(kKey, kId, [&] {
                 std::vector<std::uint8_t> p = r->raw;
                 p.insert(p.end(), r->request.tag.begin(), r->request.tag.end());
                 return p;
               }()).has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 65536) return 0;
  if (data[0] % 2 == 1) {
    ReprotectMsg m;
    m.ok = kRescueSlot;
    m.gen = 3;
    seal(m);
    const auto req = open_rescue_request(kKey, kId, seal_rescue_request(kKey, kId, m));
    FUZZ_REQUIRE(req.has_value());
    const std::span<const std::uint8_t> payload(data + 1, size - 1);
    for (std::uint16_t type : {kRescueMsg, std::uint16_t(2)}) {
      auto body = open_rescue_answer(kKey, kId, req->tag, type, payload);
      if (body) FUZZ_REQUIRE(body->size() + net::kMacSize == payload.size());
    }
    return 0;
  }
  (void)fuzz::serve_stream(std::span<const std::uint8_t>(data + 1, size - 1), serve);
  return 0;
}
