#include "flood.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common.hpp"
#include "handle_layout.hpp"

namespace hnd {
namespace {

using handle_layout::kAddrOff, handle_layout::kFamilyOff, handle_layout::kPortOff, handle_layout::kScopeOff,
    handle_layout::kTokenOff;
constexpr std::uint16_t kConnRequest = 0x200, kConnReady = 0x202, kHello = 0x206;
constexpr std::size_t kHelloSize = 48;  // handshake_auth.hpp: a 16-byte nonce, a 32-byte proof
constexpr std::size_t kRequestSize = 72 + 52 + 12;  // conn_msg v5: the fixed part, one candidate, the rescue point

template <class T>
T field(const std::string& h, std::size_t off) {
  T v;
  std::memcpy(&v, h.data() + off, sizeof v);
  return v;
}

void put(std::vector<std::uint8_t>& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::vector<std::uint8_t> frame(std::uint16_t type, std::uint64_t token, const std::vector<std::uint8_t>& payload,
                                std::uint32_t length) {
  std::vector<std::uint8_t> b;
  put(b, 0x4148434Eu, 4);  // "NCHA"
  put(b, 1, 2);            // wire version
  put(b, type, 2);
  put(b, length, 4);
  put(b, 0, 4);  // flags
  put(b, token, 8);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// A well-formed endpoint (qpn, psn, gid, lid, port 1, gid index, Ethernet, MTU 1024, reserved 0).
void endpoint(std::vector<std::uint8_t>& b, std::uint32_t qpn) {
  put(b, qpn, 4);
  put(b, 0x1234, 4);
  for (int i = 0; i < 16; ++i) b.push_back(static_cast<std::uint8_t>(i == 10 || i == 11 ? 0xff : 0));
  put(b, 0, 2);
  b.push_back(1);
  b.push_back(1);
  b.push_back(2);
  b.push_back(3);
  put(b, 0, 2);
}

// A connection request (src/plugin/core/conn_msg.hpp, v5) every field of which is fine, but the service level.
std::vector<std::uint8_t> request_with_sl(std::uint8_t sl) {
  std::vector<std::uint8_t> b;
  endpoint(b, 0x101);
  put(b, 0, 4);  // no standby offered
  put(b, 0x7f0000001000ull, 8);
  put(b, 0x1111, 4);
  put(b, 0, 4);
  put(b, 0x7f0000002000ull, 8);
  put(b, 0x2222, 4);
  put(b, 0, 4);
  b.push_back(0);   // traffic class
  b.push_back(sl);  // service level
  put(b, 1, 2);     // one candidate:
  put(b, 0, 1);     // device 0,
  put(b, 2, 1);     // Ethernet,
  put(b, 3, 1);     // up and primary,
  b.resize(b.size() + 37, 0);  // no rail, no island, no load
  put(b, 1, 4);                // NIC hash
  put(b, 0, 4);                // PCIe switch unknown
  put(b, 0xffffffffu, 4);      // NUMA node unknown
  put(b, 0, 4);                // no rescue service (wire v5): port 0, 0,
  put(b, 0, 8);                // token 0
  return b;
}

void send_all(int fd, const std::vector<std::uint8_t>& b) {
  std::size_t off = 0;
  while (off < b.size()) {
    const ssize_t n = ::send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the listener may already have dropped us: that is its right
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

HandshakeTarget handshake_target(const std::string& h) {
  if (h.size() < 128 || field<std::uint32_t>(h, 0) != 0x31484148u)
    fail(Fail::plugin, "--fault flood needs an nccl-ha handle (magic HAH1)");
  HandshakeTarget t;
  const auto family = field<std::uint16_t>(h, kFamilyOff);
  const auto port = field<std::uint16_t>(h, kPortOff);
  char text[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&t.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    std::memcpy(&a->sin_addr, h.data() + kAddrOff, 4);
    t.len = sizeof *a;
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    t.text = strf("%s:%u", text, port);
  } else if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&t.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    std::memcpy(&a->sin6_addr, h.data() + kAddrOff, 16);
    a->sin6_scope_id = field<std::uint32_t>(h, kScopeOff);
    t.len = sizeof *a;
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    t.text = strf("[%s]:%u", text, port);
  } else {
    fail(Fail::plugin, strf("handle address family %u", family));
  }
  t.token = field<std::uint64_t>(h, kTokenOff);
  return t;
}

const char* bad_kind_name(BadKind k) {
  switch (k) {
    case BadKind::garbage: return "garbage";
    case BadKind::wrong_token: return "wrong-token";
    case BadKind::silent_close: return "silent-close";
    case BadKind::half_frame: return "half-frame";
    case BadKind::wrong_type: return "wrong-type";
    case BadKind::oversize: return "oversize";
    case BadKind::short_request: return "short-request";
    case BadKind::bad_sl: return "bad-sl";
    case BadKind::bad_proof: return "bad-proof";
    case BadKind::silent_hold: return "silent-hold";
  }
  return "?";
}

namespace {

// Reads until EOF, a reset or timeout_s: the bytes the listener sent.
std::size_t drain(int fd, double timeout_s) {
  std::size_t got = 0;
  Deadline d(timeout_s);
  while (!d.expired()) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, std::min(d.remaining_ms(), 50));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) got += static_cast<std::size_t>(n);
    else if (n == 0 || (errno != EINTR && errno != EAGAIN)) break;
  }
  return got;
}

}  // namespace

BadOutcome bad_connect(const HandshakeTarget& t, BadKind kind, double timeout_s) {
  const int fd = ::socket(t.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(Fail::usage, strf("socket: %s", std::strerror(errno)));
  timeval tv{};
  tv.tv_sec = static_cast<long>(timeout_s);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0) {
    const int e = errno;
    ::close(fd);
    fail(Fail::peer, strf("flood: %s connector cannot reach the listener at %s: %s", bad_kind_name(kind),
                          t.text.c_str(), std::strerror(e)));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::vector<std::uint8_t> none;
  switch (kind) {
    case BadKind::garbage: {
      const std::string http = "GET / HTTP/1.1\r\nHost: nccl-ha\r\n\r\n";
      send_all(fd, std::vector<std::uint8_t>(http.begin(), http.end()));
      break;
    }
    case BadKind::wrong_token: {
      const auto req = request_with_sl(0);
      send_all(fd, frame(kConnRequest, ~t.token, req, static_cast<std::uint32_t>(req.size())));
      break;
    }
    case BadKind::silent_close:
      break;
    case BadKind::half_frame: {
      auto f = frame(kConnRequest, t.token, none, kRequestSize);
      f.resize(12);
      send_all(fd, f);
      break;
    }
    case BadKind::wrong_type:
      send_all(fd, frame(kConnReady, t.token, none, 0));
      break;
    case BadKind::oversize:
      send_all(fd, frame(kConnRequest, t.token, none, 1u << 20));
      break;
    case BadKind::short_request: {
      const std::vector<std::uint8_t> half(50, 0x5a);
      send_all(fd, frame(kConnRequest, t.token, half, 50));
      break;
    }
    case BadKind::bad_sl: {
      const auto req = request_with_sl(16);
      send_all(fd, frame(kConnRequest, t.token, req, static_cast<std::uint32_t>(req.size())));
      break;
    }
    case BadKind::bad_proof: {
      std::vector<std::uint8_t> hello(kHelloSize);
      for (std::size_t i = 0; i < hello.size(); ++i) hello[i] = static_cast<std::uint8_t>(i * 37 + 11);
      send_all(fd, frame(kHello, t.token, hello, static_cast<std::uint32_t>(hello.size())));
      break;
    }
    case BadKind::silent_hold:
      return {fd, 0};
  }
  ::shutdown(fd, SHUT_WR);
  BadOutcome out;
  out.bytes_back = drain(fd, timeout_s);
  ::close(fd);
  return out;
}

std::vector<double> wait_closed_by_peer(const std::vector<int>& fds, const std::vector<std::int64_t>& since_ns,
                                        double timeout_s, std::size_t& bytes_back) {
  std::vector<double> ms(fds.size(), -1);
  std::vector<bool> open(fds.size(), true);
  std::size_t left = fds.size();
  Deadline d(timeout_s);
  while (left > 0 && !d.expired()) {
    std::vector<pollfd> p;
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (open[i]) {
        p.push_back({fds[i], POLLIN, 0});
        idx.push_back(i);
      }
    const int r = ::poll(p.data(), p.size(), std::min(d.remaining_ms(), 50));
    if (r < 0 && errno != EINTR) break;
    const std::int64_t now = now_ns();
    for (std::size_t k = 0; r > 0 && k < p.size(); ++k) {
      if (!p[k].revents) continue;
      char buf[64];
      const ssize_t n = ::recv(p[k].fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) bytes_back += static_cast<std::size_t>(n);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {  // EOF or reset: the listener let go
        const std::size_t i = idx[k];
        ms[i] = static_cast<double>(now - since_ns[i]) / 1e6;
        open[i] = false;
        --left;
      }
    }
  }
  for (int fd : fds) ::close(fd);
  return ms;
}

}  // namespace hnd
