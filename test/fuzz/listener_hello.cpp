// The listener's accept path before and after the proof (src/plugin/handshake_auth.hpp) over a real
// socket: the input is what a stranger sends a listener, then the stream ends. listener_hello reads
// it under the fixed secret kSecret for listener kId; then, if the hello proved the secret, the rest
// is read as sealed handshake frames (Channel). Properties: a stream that does not begin with a
// valid, first-seen hello gets not one byte back; a hello that is accepted is a valid one; no
// sealed frame opens (a stranger cannot seal without the session key); every call ends at EOF,
// never at its deadline; nothing throws.
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>

#include "fuzz_common.hpp"
#include "handle.hpp"
#include "handshake_auth.hpp"
#include "nccl_ha/net/handshake.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
namespace asio = boost::asio;

namespace {

constexpr std::uint64_t kId = 0x1122334455667788ull;  // make_seeds.py TOKEN
const net::Key kSecret = [] {  // make_seeds.py HELLO_SECRET: 0x5a x 32
  net::Key k;
  k.fill(0x5a);
  return k;
}();
constexpr net::Millis kDeadline(20000);  // never reached: the stream always ends

asio::awaitable<void> serve(net::tcp::socket& s, std::span<const std::uint8_t> input, bool& proven) {
  hs::NonceLog nonces;
  auto keys = co_await hs::listener_hello(s, kSecret, kId, nonces, kDeadline);
  if (!keys) {
    FUZZ_REQUIRE(keys.error().code != Errc::timeout);
    co_return;
  }
  // Accepted: the stream began with a hello frame whose proof verifies.
  FUZZ_REQUIRE(input.size() >= net::kHeaderSize + hs::kHelloSize);
  FUZZ_REQUIRE(hs::check_hello(kSecret, kId, input.subspan(net::kHeaderSize, hs::kHelloSize)).has_value());
  proven = true;
  hs::Channel ch(s, keys->session, kId, false);
  for (int i = 0; i < 8; ++i) {
    auto f = co_await ch.recv(kDeadline);
    FUZZ_REQUIRE(!f.ok());  // the session key depends on the listener's fresh nonce: nothing a stranger sealed opens
    FUZZ_REQUIRE(f.error().code != Errc::timeout);
    co_return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 65536) return 0;  // the whole stream fits the socket buffer (scripts/fuzz.sh: -max_len=1024)
  static asio::io_context io;
  int sv[2];
  FUZZ_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  std::size_t off = 0;
  while (off < size) {
    const ssize_t n = ::write(sv[1], data + off, size - off);
    FUZZ_REQUIRE(n > 0);
    off += static_cast<std::size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);
  bool proven = false;
  {
    net::tcp::socket s(io);
    boost::system::error_code ec;
    s.assign(net::tcp::v4(), sv[0], ec);
    FUZZ_REQUIRE(!ec);
    bool finished = false;
    asio::co_spawn(io, serve(s, std::span<const std::uint8_t>(data, size), proven), [&finished](std::exception_ptr e) {
      FUZZ_REQUIRE(!e);
      finished = true;
    });
    io.run();
    io.restart();
    FUZZ_REQUIRE(finished);
  }
  std::uint8_t buf[512];
  std::size_t back = 0;
  for (ssize_t n; (n = ::recv(sv[1], buf, sizeof buf, MSG_DONTWAIT)) > 0;) back += static_cast<std::size_t>(n);
  FUZZ_REQUIRE(proven || back == 0);  // a listener says nothing to a socket that has not proved the secret
  ::close(sv[1]);
  return 0;
}
