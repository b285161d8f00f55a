#include "mgmt_auth.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "logger.hpp"
#include "mgmt_wire.hpp"
#include "token_auth.hpp"
#include "unique_fd.hpp"

namespace hnd {
namespace {

constexpr const char* kAuthFailed = "authentication failed";
constexpr int kMaxDropLines = 10;  // then only counted

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &sl) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), sl, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  return std::string(host) + ":" + serv;
}

// Small messages into a fresh socket's empty buffer: all at once, or the connection is no use.
bool send_now(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(bytes.size());
}

// One accepted connection on its way to a proof.
struct Pending {
  UniqueFd fd;
  std::string from;
  wire::Nonce nonce{};
  std::array<std::uint8_t, wire::kHeaderSize + wire::kProofMsgSize> buf{};
  std::size_t got = 0;
  Clock::time_point until;
};

class Gate {
 public:
  Gate(int listen_fd, const std::string& token, const Deadline& d) : lfd_(listen_fd), token_(token), d_(d) {}

  // The proved connection, or -1 at the deadline.
  int run() {
    while (!d_.expired()) {
      std::vector<pollfd> fds{{lfd_, POLLIN, 0}};
      for (const auto& p : pending_) fds.push_back({p.fd.get(), POLLIN, 0});
      int n = ::poll(fds.data(), fds.size(), wait_ms());
      if (n < 0 && errno != EINTR) fail(Fail::peer, strf("poll: %s", std::strerror(errno)));
      // Readable connections first (the listener's new one is appended after them).
      for (std::size_t i = pending_.size(); i-- > 0;) {
        if (n > 0 && fds[1 + i].revents) {
          if (int fd = step(i); fd >= 0) return fd;
        } else if (Clock::now() >= pending_[i].until) {
          drop(i, "silent", "no proof within the step");
        }
      }
      if (n > 0 && fds[0].revents) accept_one();
    }
    return -1;
  }

  // "3 silent, 1 wrong token" (empty: nothing dropped)
  std::string dropped() const {
    std::string s;
    for (const auto& [what, count] : dropped_) s += (s.empty() ? "" : ", ") + std::to_string(count) + " " + what;
    return s;
  }

 private:
  int wait_ms() const {
    long long ms = d_.remaining_ms();
    const auto now = Clock::now();
    for (const auto& p : pending_)
      ms = std::min<long long>(ms, std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(p.until - now).count()));
    return static_cast<int>(ms);
  }

  void accept_one() {
    UniqueFd fd(::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd) {  // gone before we took it; or no fd left: let the pending ones free some
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    // Full: the oldest goes. A real peer proves within a round trip of its challenge, so a flood
    // of strangers cannot keep it out, and every stranger is still held at most one step.
    if (pending_.size() >= kMaxPendingPeers) drop(0, "evicted", "more connections waiting");
    Pending p;
    p.fd = std::move(fd);
    p.from = peer_name(p.fd.get());
    p.nonce = ha_tools::random_nonce();
    const auto step = std::chrono::milliseconds(static_cast<long long>(kAuthStepS * 1000));
    p.until = Clock::now() + std::min<Clock::duration>(step, std::chrono::milliseconds(d_.remaining_ms()));
    if (!send_now(p.fd.get(), wire::encode(MsgType::auth_challenge, wire::encode_challenge(p.nonce)))) {
      note("gone", p.from, "could not send the challenge");
      return;
    }
    pending_.push_back(std::move(p));
  }

  // Reads what connection i sent; its fd once it proved the token, else -1.
  int step(std::size_t i) {
    Pending& p = pending_[i];
    const ssize_t n = ::recv(p.fd.get(), p.buf.data() + p.got, p.buf.size() - p.got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return -1;
    if (n <= 0) {
      drop(i, "closed", "closed before its proof");
      return -1;
    }
    const std::size_t before = p.got;
    p.got += static_cast<std::size_t>(n);
    if (before < wire::kHeaderSize && p.got >= wire::kHeaderSize) {
      const wire::Header h = wire::decode_header(std::span(p.buf).first<wire::kHeaderSize>());
      if (h.type != static_cast<std::uint32_t>(MsgType::auth_proof) || h.len != wire::kProofMsgSize) {
        drop(i, "not ha-net-driver", strf("message type %u of %u bytes instead of a proof (no ha-net-driver, or an older one)", h.type, h.len));
        return -1;
      }
    }
    if (p.got < p.buf.size()) return -1;
    const std::string_view payload(reinterpret_cast<const char*>(p.buf.data()) + wire::kHeaderSize, wire::kProofMsgSize);
    const auto proof = wire::decode_proof(payload);
    if (!proof || !ha_tools::same_mac(proof->proof, ha_tools::prove(token_, wire::kRank1Label, p.nonce, proof->nonce))) {
      (void)send_now(p.fd.get(), wire::encode(MsgType::abort, kAuthFailed));
      drop(i, "wrong token", kAuthFailed);
      return -1;
    }
    const ha_tools::Mac mine = ha_tools::prove(token_, wire::kRank0Label, proof->nonce, p.nonce);
    if (!send_now(p.fd.get(), wire::encode(MsgType::auth_ok, wire::encode_ok(mine)))) {
      drop(i, "gone", "could not send rank 0's proof");
      return -1;
    }
    return p.fd.release();
  }

  void drop(std::size_t i, const char* what, const std::string& why) {
    note(what, pending_[i].from, why);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void note(const char* what, const std::string& from, const std::string& why) {
    ++dropped_[what];
    if (++lines_ <= kMaxDropLines)
      log::warn("management port: dropped a connection from %s: %s%s", from.c_str(), why.c_str(),
                lines_ == kMaxDropLines ? " (further drops only counted)" : "");
  }

  int lfd_;
  const std::string& token_;
  const Deadline& d_;
  std::vector<Pending> pending_;
  std::map<std::string, int> dropped_;
  int lines_ = 0;
};

}  // namespace

int admit_peer(int listen_fd, const std::string& token, const Deadline& d, double timeout_s, unsigned port) {
  Gate gate(listen_fd, token, d);
  const int fd = gate.run();
  if (fd >= 0) return fd;
  const std::string dropped = gate.dropped();
  fail(Fail::timeout, strf("timeout after %g s waiting for rank 1 on port %u%s", timeout_s, port,
                           dropped.empty() ? "" : (" (connections dropped: " + dropped + ")").c_str()));
}


}  // namespace hnd
