// ha-net-driver: the management TCP connection between the two ranks (plain blocking POSIX
// sockets + poll for deadlines). Carries the authentication (mgmt_auth.hpp), the hello, the
// 128-byte listen handles, barriers, results and aborts; never any plugin traffic. The wire format
// is in mgmt_wire.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common.hpp"
#include "mgmt_wire.hpp"

namespace hnd {

class Mgmt {
 public:
  // Rank 0: listen on bind:port (port 0 = any; the bound port goes to port_file if given) and
  // accept the one peer that proves `token` (mgmt_auth.hpp; strangers are dropped) before the deadline.
  static Mgmt accept_peer(const std::string& bind, std::uint16_t port, const std::string& port_file, double timeout_s,
                          const std::string& token);
  // Rank 1: connect to host:port, retrying until the deadline (rank 0 may start later, or close a
  // connection before the exchange ended), and prove `token` to rank 0 (and check that rank 0
  // holds it too). A failed authentication throws DriverError(usage) at once.
  static Mgmt connect_peer(const std::string& host, std::uint16_t port, double timeout_s, const std::string& token);

  Mgmt(Mgmt&& o) noexcept : fd_(o.fd_), timeout_s_(o.timeout_s_) { o.fd_ = -1; }
  Mgmt& operator=(Mgmt&&) = delete;
  ~Mgmt();

  void send(MsgType t, const std::string& payload);
  // Next message, which must be of type t. An abort message, EOF or another type throws
  // DriverError(peer); no message before the deadline throws DriverError(timeout).
  std::string recv(MsgType t, const Deadline& d, const char* waiting_for);
  // Next message, whatever its type (an abort too). EOF throws DriverError(peer), no message
  // before the deadline DriverError(timeout).
  wire::Message recv_any(const Deadline& d, const char* waiting_for);
  // Both ranks call barrier(name); returns when the peer reached the same one.
  void barrier(const std::string& name, double timeout_s);
  // Non-blocking: throws DriverError(peer) if the peer sent an abort or closed the connection.
  // Other pending messages are left alone.
  void check_abort();
  // Non-blocking: if the next message is complete or at least its header has arrived and it is of
  // type t, reads it (waiting up to the timeout for the rest) and returns its payload; otherwise
  // (nothing pending, another type, EOF) returns nullopt and leaves the connection alone.
  std::optional<std::string> try_recv(MsgType t);
  // Non-blocking, never throws: true when a complete message header is waiting to be read.
  bool has_message() const noexcept;
  // Non-blocking, never throws: true when the peer closed the connection (EOF or reset) and no
  // message is pending before that.
  bool peer_closed() const noexcept;
  // Best effort, never throws.
  void send_abort(const std::string& why) noexcept;

  double timeout_s() const { return timeout_s_; }
  std::string peer_address() const;  // "host:port" of the other end

 private:
  Mgmt(int fd, double timeout_s) : fd_(fd), timeout_s_(timeout_s) {}
  void read_exact(void* buf, std::size_t n, const Deadline& d, const char* waiting_for);
  int fd_ = -1;
  double timeout_s_ = 60;
};

}  // namespace hnd
