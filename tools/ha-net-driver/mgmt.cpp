#include "mgmt.hpp"

#include "mgmt_auth.hpp"
#include "mgmt_wire.hpp"
#include "token_auth.hpp"
#include "unique_fd.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace hnd {
namespace {

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void write_port_file(const std::string& file, std::uint16_t port) {
  std::string tmp = file + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) fail(Fail::usage, strf("cannot write --port-file %s: %s", tmp.c_str(), std::strerror(errno)));
  std::fprintf(f, "%u\n", static_cast<unsigned>(port));
  std::fclose(f);
  if (std::rename(tmp.c_str(), file.c_str()) != 0)
    fail(Fail::usage, strf("cannot rename %s: %s", tmp.c_str(), std::strerror(errno)));
}


// Rank 1, on a fresh connection to rank 0: answers the challenge with its proof and checks rank 0's.
// A failed authentication throws DriverError(usage) (the ranks' tokens differ); no challenge in
// time DriverError(timeout), anything else DriverError(peer).
void prove_to_rank0(Mgmt& m, const std::string& token, const Deadline& d) {
  const wire::Message c = m.recv_any(d, "rank 0's challenge");
  if (c.type == static_cast<std::uint32_t>(MsgType::abort)) fail(Fail::peer, "peer aborted: " + c.payload);
  const auto rank0_nonce = c.type == static_cast<std::uint32_t>(MsgType::auth_challenge)
                               ? wire::decode_challenge(c.payload)
                               : std::nullopt;
  if (!rank0_nonce)
    fail(Fail::peer, strf("management connection: %s sent no challenge (message type %u; not an ha-net-driver "
                          "rank 0 of this version?)", m.peer_address().c_str(), c.type));
  const wire::Nonce mine = ha_tools::random_nonce();
  m.send(MsgType::auth_proof, wire::encode_proof(mine, ha_tools::prove(token, wire::kRank1Label, *rank0_nonce, mine)));
  const wire::Message ok = m.recv_any(d, "rank 0's proof");
  if (ok.type == static_cast<std::uint32_t>(MsgType::abort))
    fail(Fail::usage, "authentication failed: rank 0 refused this rank's proof (the ranks' --token / "
                      "HA_NET_DRIVER_TOKEN differ)");
  const auto theirs = ok.type == static_cast<std::uint32_t>(MsgType::auth_ok) ? wire::decode_ok(ok.payload) : std::nullopt;
  if (!theirs || !ha_tools::same_mac(*theirs, ha_tools::prove(token, wire::kRank0Label, mine, *rank0_nonce)))
    fail(Fail::usage, "authentication failed: " + m.peer_address() + " does not prove this rank's token");
}

}  // namespace

Mgmt Mgmt::accept_peer(const std::string& bind, std::uint16_t port, const std::string& port_file, double timeout_s,
                       const std::string& token) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string svc = std::to_string(port);
  int rc = ::getaddrinfo(bind.empty() ? nullptr : bind.c_str(), svc.c_str(), &hints, &res);
  if (rc != 0) fail(Fail::usage, strf("--bind %s: %s", bind.c_str(), ::gai_strerror(rc)));
  UniqueFd lfd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!lfd) {
    ::freeaddrinfo(res);
    fail(Fail::peer, strf("socket: %s", std::strerror(errno)));
  }
  int one = 1;
  ::setsockopt(lfd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(lfd.get(), res->ai_addr, res->ai_addrlen) != 0 ||
      ::listen(lfd.get(), static_cast<int>(kMaxPendingPeers)) != 0) {
    int e = errno;
    ::freeaddrinfo(res);
    fail(Fail::usage, strf("cannot listen on %s:%u: %s", bind.c_str(), static_cast<unsigned>(port), std::strerror(e)));
  }
  ::freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  ::getsockname(lfd.get(), reinterpret_cast<sockaddr*>(&ss), &sl);
  std::uint16_t bound = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                       : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (!port_file.empty()) write_port_file(port_file, bound);
  Deadline d(timeout_s);
  const int fd = admit_peer(lfd.get(), token, d, timeout_s, bound);
  set_nodelay(fd);
  return Mgmt(fd, timeout_s);
}

Mgmt Mgmt::connect_peer(const std::string& host, std::uint16_t port, double timeout_s, const std::string& token) {
  Deadline d(timeout_s);
  std::string last = "no attempt";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string svc = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), svc.c_str(), &hints, &res);
    if (rc != 0) {
      last = ::gai_strerror(rc);
    } else {
      for (addrinfo* a = res; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          set_nodelay(fd);
          Mgmt m(fd, timeout_s);
          try {
            prove_to_rank0(m, token, d);
            ::freeaddrinfo(res);
            return m;
          } catch (const DriverError& e) {
            // Closed before the exchange ended (rank 0 dropped us among strangers, or is no
            // driver): try again. A failed authentication or the deadline ends it.
            if (e.kind != Fail::peer) {
              ::freeaddrinfo(res);
              throw;
            }
            last = e.what();
          }
          continue;
        }
        last = std::strerror(errno);
        ::close(fd);
      }
      ::freeaddrinfo(res);
    }
    if (d.expired())
      fail(Fail::timeout, strf("timeout after %g s connecting to rank 0 at %s:%u (%s)", timeout_s, host.c_str(),
                               static_cast<unsigned>(port), last.c_str()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Mgmt::~Mgmt() {
  if (fd_ >= 0) ::close(fd_);
}

void Mgmt::send(MsgType t, const std::string& payload) {
  const std::string buf = wire::encode(t, payload);
  const char* p = buf.data();
  std::size_t left = buf.size();
  while (left > 0) {
    ssize_t n = ::send(fd_, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(Fail::peer, strf("management connection: send failed: %s", std::strerror(errno)));
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void Mgmt::read_exact(void* buf, std::size_t n, const Deadline& d, const char* waiting_for) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    pollfd pf{fd_, POLLIN, 0};
    int r = ::poll(&pf, 1, d.remaining_ms());
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) fail(Fail::timeout, strf("timeout after %g s waiting for the peer (%s)", timeout_s_, waiting_for));
    ssize_t got = ::recv(fd_, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) fail(Fail::peer, strf("peer closed the management connection (while waiting for %s)", waiting_for));
    if (got < 0) fail(Fail::peer, strf("management connection: %s", std::strerror(errno)));
    p += got;
    n -= static_cast<std::size_t>(got);
  }
}

wire::Message Mgmt::recv_any(const Deadline& d, const char* waiting_for) {
  std::array<std::uint8_t, wire::kHeaderSize> hb{};
  read_exact(hb.data(), hb.size(), d, waiting_for);
  const wire::Header h = wire::decode_header(hb);
  if (!wire::fits(h)) fail(Fail::peer, strf("management connection: oversized message (%u bytes)", h.len));
  wire::Message m{h.type, std::string(h.len, '\0')};
  if (h.len) read_exact(m.payload.data(), h.len, d, waiting_for);
  return m;
}

std::string Mgmt::recv(MsgType t, const Deadline& d, const char* waiting_for) {
  wire::Message m = recv_any(d, waiting_for);
  if (m.type == static_cast<std::uint32_t>(MsgType::abort)) fail(Fail::peer, "peer aborted: " + m.payload);
  if (m.type != static_cast<std::uint32_t>(t))
    fail(Fail::peer, strf("management protocol: got message type %u while waiting for %s", m.type, waiting_for));
  return std::move(m.payload);
}

void Mgmt::barrier(const std::string& name, double timeout_s) {
  send(MsgType::barrier, name);
  Deadline d(timeout_s);
  std::string what = "barrier '" + name + "'";
  std::string got = recv(MsgType::barrier, d, what.c_str());
  if (got != name) fail(Fail::peer, strf("management protocol: peer is at barrier '%s', we are at '%s'", got.c_str(), name.c_str()));
}

void Mgmt::check_abort() {
  std::array<std::uint8_t, wire::kHeaderSize> h{};
  ssize_t n = ::recv(fd_, h.data(), h.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) fail(Fail::peer, "peer closed the management connection");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    fail(Fail::peer, strf("management connection: %s", std::strerror(errno)));
  }
  if (static_cast<std::size_t>(n) < h.size() || wire::decode_header(h).type != static_cast<std::uint32_t>(MsgType::abort))
    return;
  Deadline d(timeout_s_);
  (void)recv(MsgType::abort, d, "abort reason");  // throws with the reason
}

std::optional<std::string> Mgmt::try_recv(MsgType t) {
  std::array<std::uint8_t, wire::kHeaderSize> h{};
  ssize_t n = ::recv(fd_, h.data(), h.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(h.size()) || wire::decode_header(h).type != static_cast<std::uint32_t>(t))
    return std::nullopt;
  Deadline d(timeout_s_);
  return recv(t, d, "the rest of a message");
}

bool Mgmt::has_message() const noexcept {
  std::array<std::uint8_t, wire::kHeaderSize> h{};
  ssize_t n = ::recv(fd_, h.data(), h.size(), MSG_PEEK | MSG_DONTWAIT);
  return n == static_cast<ssize_t>(h.size());
}

bool Mgmt::peer_closed() const noexcept {
  char c;
  ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

std::string Mgmt::peer_address() const {
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) return "";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), sl, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  return std::string(host) + ":" + serv;
}

void Mgmt::send_abort(const std::string& why) noexcept {
  try {
    send(MsgType::abort, why);
  } catch (...) {
  }
}

}  // namespace hnd
