// The handshake's frame reader over a real socket (net/handshake.cpp): read_frame, read_frame_of
// and exchange_endpoints on the reactor's machinery (asio coroutines, deadlines), fed the input
// as a peer's byte stream, which then ends (EOF). Byte 0 picks the reader; the rest is the
// stream, read with the token kToken (the seeds carry it). Properties: every frame read has the
// right token and a payload within the limit, read_frame_of returns only the type asked for,
// exchange_endpoints only valid endpoints; each call ends (EOF, never the deadline), nothing throws.
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>

#include "fuzz_common.hpp"
#include "nccl_ha/net/handshake.hpp"

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
  static asio::io_context io;
  int sv[2];
  FUZZ_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  std::size_t off = 1;
  while (off < size) {
    const ssize_t n = ::write(sv[1], data + off, size - off);
    FUZZ_REQUIRE(n > 0);
    off += static_cast<std::size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);  // EOF after the input; our replies (exchange_endpoints) still fit
  {
    net::tcp::socket s(io);
    boost::system::error_code ec;
    s.assign(net::tcp::v4(), sv[0], ec);  // any stream socket will do for the reader
    FUZZ_REQUIRE(!ec);
    bool finished = false;
    asio::co_spawn(io, read_all(s, data[0] % 3), [&finished](std::exception_ptr e) {
      FUZZ_REQUIRE(!e);
      finished = true;
    });
    io.run();
    io.restart();
    FUZZ_REQUIRE(finished);
  }
  ::close(sv[1]);
  return 0;
}
