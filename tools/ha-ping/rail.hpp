// One rail under test: the verbs resources on one port, driven by the reactor.
//
// The CQ is watched by a reactor CompletionLoop; completions are queued here and the session's
// wake-up is notified. Port events for this port come from the device's AsyncEventPump.
// Everything but open() runs on the progress thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nccl_ha/net/discovery.hpp"
#include "nccl_ha/net/qp.hpp"
#include "nccl_ha/net/verbs.hpp"
#include "nccl_ha/reactor/async_events.hpp"
#include "nccl_ha/reactor/completion_loop.hpp"

namespace ha_ping {

enum class WrKind : std::uint64_t { send = 1, recv = 2, write = 3 };
inline std::uint64_t wr_id(WrKind k, std::uint64_t seq) { return (static_cast<std::uint64_t>(k) << 56) | seq; }
inline WrKind wr_kind(std::uint64_t id) { return static_cast<WrKind>(id >> 56); }

class Rail {
 public:
  using Wake = std::function<void()>;

  // `buffer_bytes` is split in two halves: [0, half) is sent from, [half, 2*half) received into.
  // `gid_index` replaces the discovered GID index (-x).
  static nccl_ha::Expected<std::unique_ptr<Rail>> open(nccl_ha::reactor::Reactor& reactor, const nccl_ha::net::PortInfo& port,
                                                       std::size_t buffer_bytes, Wake wake,
                                                       std::optional<std::uint32_t> gid_index = std::nullopt);
  ~Rail();

  const nccl_ha::net::PortInfo& port() const noexcept { return port_; }
  const nccl_ha::net::Endpoint& endpoint() const noexcept { return local_; }
  std::uint64_t recv_addr() const noexcept;
  std::uint32_t rkey() const noexcept { return mr_->rkey; }
  std::size_t half() const noexcept { return half_; }
  std::uint8_t* send_region() noexcept { return buffer_.get(); }
  const std::uint8_t* recv_region() const noexcept { return buffer_.get() + half_; }

  // INIT -> RTR -> RTS; `tclass` / `sl` go into the address vector of the RTR transition.
  nccl_ha::Status connect(const nccl_ha::net::Endpoint& remote, std::uint8_t tclass, std::uint8_t sl);

  // What the QP really uses, read back with ibv_query_qp (after connect()).
  struct Qos {
    int sl = -1;
    int tclass = -1;       // -1: no GRH (IB without global routing)
    int sgid_index = -1;
  };
  nccl_ha::Expected<Qos> query_qos() const;

  // Posting; false + reason on failure.
  nccl_ha::Status post_send(std::size_t len, std::uint64_t id);
  nccl_ha::Status post_recv(std::size_t len, std::uint64_t id);
  nccl_ha::Status post_write(std::size_t len, std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t id,
                             std::optional<std::uint32_t> imm);

  // Wall time of every ibv_post_send on this rail (microseconds): the cost of one bare verbs
  // call, the yardstick for "does local work only" in the plugin contract checks.
  const std::vector<double>& post_send_us() const noexcept { return post_send_us_; }

  // Completions delivered so far and not yet consumed (progress thread).
  std::deque<ibv_wc>& completions() noexcept { return completions_; }
  // Set when a port error / device fatal event hit this port, or the completion loop died.
  const std::optional<std::string>& failure() const noexcept { return failure_; }
  // "port error on DEV:PORT (port DOWN)" when the port is not ACTIVE right now (queried): an
  // error completion can overtake the port-error event of the same fault.
  std::optional<std::string> port_down_now() const;

 private:
  struct Key {
    explicit Key() = default;
  };

 public:
  Rail(Key, nccl_ha::reactor::Reactor& reactor, nccl_ha::net::PortInfo port, Wake wake);

 private:
  nccl_ha::Status init(std::size_t buffer_bytes, std::optional<std::uint32_t> gid_index);
  void on_event(const nccl_ha::reactor::DeviceEvent& ev);

  struct FreeDeleter { void operator()(std::uint8_t* p) const noexcept { std::free(p); } };

  nccl_ha::reactor::Reactor& reactor_;
  nccl_ha::net::PortInfo port_;
  Wake wake_;
  // Declaration order is destruction order reversed: dependents are declared after what they use.
  nccl_ha::net::ContextPtr ctx_;
  nccl_ha::net::PdPtr pd_;
  std::unique_ptr<std::uint8_t, FreeDeleter> buffer_;
  std::size_t half_ = 0;
  nccl_ha::net::MrPtr mr_;
  std::unique_ptr<nccl_ha::net::CompletionQueue> cq_;
  nccl_ha::net::QpPtr qp_;
  nccl_ha::net::Endpoint local_;
  std::unique_ptr<nccl_ha::reactor::AsyncEventPump> pump_;
  nccl_ha::reactor::AsyncEventPump::Subscription subscription_;
  std::unique_ptr<nccl_ha::reactor::CompletionLoop> loop_;
  std::deque<ibv_wc> completions_;
  std::vector<double> post_send_us_;
  int timed_post_send(ibv_send_wr* wr);
  std::optional<std::string> failure_;
};

}  // namespace ha_ping
