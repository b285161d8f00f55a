// A comm's record of the rescue (rescue.hpp: re-protection over TCP when no RDMA path of the
// connection is left), held in its ControlPlane; written by the rescue service and the control
// plane on the progress thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nccl_ha/net/auth.hpp"

namespace nccl_ha::plugin {

struct RescueExchange;  // one exchange of the receive side waiting for its comm's answer (rescue.cpp)

// A comm's side of it (ControlPlane::rescue, CommBase::cp); progress thread only.
struct RescueState {
  std::uint64_t token = 0;             // ours (0: not enrolled: HA off, or no service)
  net::Key key{};                      // the connection's rescue key (handshake_auth.hpp), both ways
  boost::asio::ip::tcp::endpoint peer;  // the peer's rescue service (port 0: it has none)
  std::uint64_t peer_token = 0;
  std::uint32_t taken_gen = 0;         // receive side: the newest request the service handed over
  std::uint32_t check_gen = 0;         // receive side: our checks so far; send side: the newest answered
  // A failover found no path left and a pair may still be up at both ends: re-protection runs
  // over TCP (send side) or is waited for (receive side) until `deadline_ns`.
  bool on = false;
  std::uint64_t deadline_ns = 0;
  std::string cause;                   // what failed (the failover's words), for the final WARN
  std::string why;                     // the last exchange's failure, for the attempt's message
  std::string fatal;                   // the peer's side of the connection is gone: why (fail at once)
  bool failed = false;                 // fail_comm ran: requests are refused at once
  std::uint64_t next_check_ns = 0;     // receive side: when to ask again whether the peer lives
  std::uint64_t started_ns = 0;
  std::optional<std::vector<std::uint8_t>> mail;  // a message that came over TCP, not yet read
  std::shared_ptr<RescueExchange> exchange;       // receive side: the peer waits for our answer
};

}  // namespace nccl_ha::plugin
