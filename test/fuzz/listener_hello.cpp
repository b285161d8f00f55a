// The listener's accept path before and after the proof (src/plugin/setup/handshake_auth.hpp) over a real
// socket: the input is what a stranger sends a listener, then the stream ends. listener_hello reads
// it under the fixed secret kSecret for listener kId; then, if the hello proved the secret, the rest
// is read as sealed handshake frames (Channel). Properties: a stream that does not begin with a
// valid, first-seen hello gets not one byte back; a hello that is accepted is a valid one; no
// sealed frame opens (a stranger cannot seal without the session key); every call ends at EOF,
// never at its deadline; nothing throws.
#include "fuzz_common.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "setup/handle.hpp"
#include "setup/handshake_auth.hpp"
#include "stream_socket.hpp"

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
  if (size > 65536) return 0;  // scripts/fuzz.sh: -max_len=1024
  const std::span<const std::uint8_t> input(data, size);
  bool proven = false;
  const std::size_t back = fuzz::serve_stream(input, [&](net::tcp::socket& s) { return serve(s, input, proven); });
  FUZZ_REQUIRE(proven || back == 0);  // a listener says nothing to a socket that has not proved the secret
  return 0;
}
