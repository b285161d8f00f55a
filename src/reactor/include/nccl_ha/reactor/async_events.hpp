// Device async events (ibv_get_async_event) delivered as typed values to subscribers.
//
// AsyncEventPump watches one device context's async fd on the reactor. Every event is
// classified, logged, handed to every subscriber, then acknowledged (ibv_ack_async_event) -
// always, even when a subscriber throws.
//
// Thread-safety: construct, start(), close(), subscribe() and Subscription destruction from
// any thread (they hop to the progress thread). Subscribers run on the progress thread.
// close() must run before the ibv_context is closed.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "nccl_ha/reactor/reactor.hpp"

namespace nccl_ha::reactor {

enum class DeviceEventKind {
  port_active,
  port_error,
  gid_change,
  lid_change,
  pkey_change,
  sm_change,
  client_reregister,
  device_fatal,
  qp_fatal,
  qp_request_error,
  qp_access_error,
  qp_last_wqe_reached,
  comm_established,
  sq_drained,
  path_migrated,
  path_migration_error,
  cq_error,
  srq_error,
  srq_limit_reached,
  wq_fatal,
  other,
};

const char* to_string(DeviceEventKind kind) noexcept;

enum class EventScope { port, qp, cq, srq, device };

struct DeviceEvent {
  DeviceEventKind kind = DeviceEventKind::other;
  EventScope scope = EventScope::device;
  std::string device;
  std::uint32_t port = 0;      // port events
  std::uint32_t qp_num = 0;    // QP events
  ibv_cq* cq = nullptr;        // CQ events (identity only; do not use after the event)
  int raw_type = 0;            // the ibv_event_type
};

// Pure mapping from the verbs event to the typed event (unit-tested on fixtures).
DeviceEvent classify_async_event(const ibv_async_event& ev, const std::string& device);

class AsyncEventPump {
 public:
  using Subscriber = std::function<void(const DeviceEvent&)>;

  class Subscription {
   public:
    Subscription() = default;
    ~Subscription() { reset(); }
    Subscription(Subscription&& o) noexcept;
    Subscription& operator=(Subscription&& o) noexcept;
    void reset();

   private:
    friend class AsyncEventPump;
    Subscription(AsyncEventPump* pump, std::uint64_t id) : pump_(pump), id_(id) {}
    AsyncEventPump* pump_ = nullptr;
    std::uint64_t id_ = 0;
  };

  // Reads events with `get`/`ack` (ibv_get_async_event / ibv_ack_async_event by default).
  AsyncEventPump(Reactor& reactor, ibv_context* context, std::string device_name);
  ~AsyncEventPump();
  AsyncEventPump(const AsyncEventPump&) = delete;
  AsyncEventPump& operator=(const AsyncEventPump&) = delete;

  void start();
  void close();

  [[nodiscard]] Subscription subscribe(Subscriber subscriber);

  std::uint64_t events_seen() const noexcept;

 private:
  struct State;
  static asio::awaitable<void> run(std::shared_ptr<State> state);
  void unsubscribe(std::uint64_t id);

  Reactor& reactor_;
  std::shared_ptr<State> state_;
};

}  // namespace nccl_ha::reactor
