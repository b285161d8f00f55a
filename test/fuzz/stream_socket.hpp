// A fuzz input as a peer's byte stream over a real stream socket (a socketpair assigned to an Asio
// tcp::socket: the readers under test take any stream socket), for the targets that fuzz what a
// reader does with a connection: the input is written whole, the peer's side is shut down for
// writing (the reader sees EOF after the input), the coroutine runs on an io_context until it ends.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <exception>
#include <span>

#include "fuzz_common.hpp"

namespace nccl_ha::fuzz {

// Runs make(socket) (an asio::awaitable<void>) with `input` as the stream it reads; returns how
// many bytes it wrote back. The input must fit the socket buffer (the targets' -max_len is far below).
template <class Make>
std::size_t serve_stream(std::span<const std::uint8_t> input, Make make) {
  namespace asio = boost::asio;
  static asio::io_context io;
  int sv[2];
  FUZZ_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  for (std::size_t off = 0; off < input.size();) {
    const ssize_t n = ::write(sv[1], input.data() + off, input.size() - off);
    FUZZ_REQUIRE(n > 0);
    off += static_cast<std::size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);
  {
    asio::ip::tcp::socket s(io);
    boost::system::error_code ec;
    s.assign(asio::ip::tcp::v4(), sv[0], ec);
    FUZZ_REQUIRE(!ec);
    bool finished = false;
    asio::co_spawn(io, make(s), [&finished](std::exception_ptr e) {
      FUZZ_REQUIRE(!e);
      finished = true;
    });
    io.run();
    io.restart();
    FUZZ_REQUIRE(finished);
  }
  std::size_t back = 0;
  std::uint8_t buf[512];
  for (ssize_t n; (n = ::recv(sv[1], buf, sizeof buf, MSG_DONTWAIT)) > 0;) back += static_cast<std::size_t>(n);
  ::close(sv[1]);
  return back;
}

}  // namespace nccl_ha::fuzz
