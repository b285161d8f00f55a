// The handshake's frame reader over a real socket (net/handshake.cpp): read_frame, read_frame_of
// and exchange_endpoints on the reactor's machinery (asio coroutines, deadlines), fed the input
// as a peer's byte stream, which then ends (EOF). Byte 0 picks the reader; the rest is the
// stream, read with the token kToken (the seeds carry it). Properties: every frame read has the
// right token and a payload within the limit, read_frame_of returns only the type asked for,
// exchange_endpoints only valid endpoints; each call ends (EOF, never the deadline), nothing throws.
#include "fuzz_common.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "stream_socket.hpp"

using namespace nccl_ha;
namespace asio = boost::asio;

namespace {

constexpr std::uint64_t kToken = 0x1122334455667788ull;
constexpr net::Millis kDeadline(20000);  // never reached: the stream always ends

asio::awaitable<void> read_all(net::tcp::socket& s, int mode) {
  net::Endpoint local;
  local.qpn = 0x42;
  local.port = 1;
  local.mtu = IBV_MTU_1024;
  for (int i = 0; i < 8; ++i) {  // a handshake is at most 4 frames each way
    if (mode == 0) {
      auto f = co_await net::read_frame(s, kToken, kDeadline);
      if (!f) {
        FUZZ_REQUIRE(f.error().code != Errc::timeout);
        co_return;
      }
      FUZZ_REQUIRE(f->token == kToken && f->type != 0 && f->payload.size() <= net::kMaxPayload);
    } else if (mode == 1) {
      const auto type = static_cast<std::uint16_t>(0x200 + i % 4);  // conn_request, reply, ready, ack
      auto f = co_await net::read_frame_of(s, type, kToken, kDeadline, 256);
      if (!f) {
        FUZZ_REQUIRE(f.error().code != Errc::timeout);
        co_return;
      }
      FUZZ_REQUIRE(f->type == type && f->payload.size() <= 256);
    } else {
      auto ep = co_await net::exchange_endpoints(s, kToken, local, kDeadline);
      if (!ep) {
        FUZZ_REQUIRE(ep.error().code != Errc::timeout);
        co_return;
      }
      FUZZ_REQUIRE(ep->qpn != 0 && ep->port != 0);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 65536) return 0;  // the whole stream fits the socket buffer (scripts/fuzz.sh: -max_len=1024)
  const int mode = data[0] % 3;
  (void)fuzz::serve_stream(std::span<const std::uint8_t>(data + 1, size - 1),
                           [mode](net::tcp::socket& s) { return read_all(s, mode); });  // replies (endpoints) may come back
  return 0;
}
