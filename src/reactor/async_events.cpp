#include "nccl_ha/reactor/async_events.hpp"

#include <cerrno>
#include <map>
#include <optional>
#include <vector>

#include "nccl_ha/reactor/fd_watcher.hpp"

namespace nccl_ha::reactor {

const char* to_string(DeviceEventKind kind) noexcept {
  switch (kind) {
    case DeviceEventKind::port_active: return "port active";
    case DeviceEventKind::port_error: return "port error";
    case DeviceEventKind::gid_change: return "GID change";
    case DeviceEventKind::lid_change: return "LID change";
    case DeviceEventKind::pkey_change: return "P_Key change";
    case DeviceEventKind::sm_change: return "SM change";
    case DeviceEventKind::client_reregister: return "client reregister";
    case DeviceEventKind::device_fatal: return "device fatal";
    case DeviceEventKind::qp_fatal: return "QP fatal";
    case DeviceEventKind::qp_request_error: return "QP invalid request";
    case DeviceEventKind::qp_access_error: return "QP access error";
    case DeviceEventKind::qp_last_wqe_reached: return "QP last WQE reached";
    case DeviceEventKind::comm_established: return "communication established";
    case DeviceEventKind::sq_drained: return "SQ drained";
    case DeviceEventKind::path_migrated: return "path migrated";
    case DeviceEventKind::path_migration_error: return "path migration error";
    case DeviceEventKind::cq_error: return "CQ error";
    case DeviceEventKind::srq_error: return "SRQ error";
    case DeviceEventKind::srq_limit_reached: return "SRQ limit reached";
    case DeviceEventKind::wq_fatal: return "WQ fatal";
    case DeviceEventKind::other: return "other";
  }
  return "?";
}

DeviceEvent classify_async_event(const ibv_async_event& ev, const std::string& device) {
  DeviceEvent out;
  out.device = device;
  out.raw_type = static_cast<int>(ev.event_type);
  auto port = [&](DeviceEventKind k) {
    out.kind = k;
    out.scope = EventScope::port;
    out.port = static_cast<std::uint32_t>(ev.element.port_num);
  };
  auto qp = [&](DeviceEventKind k) {
    out.kind = k;
    out.scope = EventScope::qp;
    out.qp_num = ev.element.qp ? ev.element.qp->qp_num : 0;
  };
  switch (ev.event_type) {
    case IBV_EVENT_PORT_ACTIVE: port(DeviceEventKind::port_active); break;
    case IBV_EVENT_PORT_ERR: port(DeviceEventKind::port_error); break;
    case IBV_EVENT_GID_CHANGE: port(DeviceEventKind::gid_change); break;
    case IBV_EVENT_LID_CHANGE: port(DeviceEventKind::lid_change); break;
    case IBV_EVENT_PKEY_CHANGE: port(DeviceEventKind::pkey_change); break;
    case IBV_EVENT_SM_CHANGE: port(DeviceEventKind::sm_change); break;
    case IBV_EVENT_CLIENT_REREGISTER: port(DeviceEventKind::client_reregister); break;
    case IBV_EVENT_DEVICE_FATAL: out.kind = DeviceEventKind::device_fatal; break;
    case IBV_EVENT_QP_FATAL: qp(DeviceEventKind::qp_fatal); break;
    case IBV_EVENT_QP_REQ_ERR: qp(DeviceEventKind::qp_request_error); break;
    case IBV_EVENT_QP_ACCESS_ERR: qp(DeviceEventKind::qp_access_error); break;
    case IBV_EVENT_QP_LAST_WQE_REACHED: qp(DeviceEventKind::qp_last_wqe_reached); break;
    case IBV_EVENT_COMM_EST: qp(DeviceEventKind::comm_established); break;
    case IBV_EVENT_SQ_DRAINED: qp(DeviceEventKind::sq_drained); break;
    case IBV_EVENT_PATH_MIG: qp(DeviceEventKind::path_migrated); break;
    case IBV_EVENT_PATH_MIG_ERR: qp(DeviceEventKind::path_migration_error); break;
    case IBV_EVENT_CQ_ERR:
      out.kind = DeviceEventKind::cq_error;
      out.scope = EventScope::cq;
      out.cq = ev.element.cq;
      break;
    case IBV_EVENT_SRQ_ERR:
      out.kind = DeviceEventKind::srq_error;
      out.scope = EventScope::srq;
      break;
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      out.kind = DeviceEventKind::srq_limit_reached;
      out.scope = EventScope::srq;
      break;
    case IBV_EVENT_WQ_FATAL: out.kind = DeviceEventKind::wq_fatal; break;
    default: out.kind = DeviceEventKind::other; break;
  }
  return out;
}

struct AsyncEventPump::State {
  State(ibv_context* c, std::string n) : context(c), name(std::move(n)) {}
  ibv_context* context;
  std::string name;
  std::optional<FdWatcher> watcher;              // progress thread only
  std::map<std::uint64_t, Subscriber> subscribers;  // progress thread only
  std::uint64_t next_id = 1;
  bool closed = false;
  bool started = false;
  std::atomic<std::uint64_t> seen{0};

  void deliver(const DeviceEvent& ev) {
    std::vector<std::uint64_t> ids;
    ids.reserve(subscribers.size());
    for (auto& [id, _] : subscribers) ids.push_back(id);
    for (auto id : ids) {
      auto it = subscribers.find(id);  // a subscriber may have unsubscribed another
      if (it == subscribers.end()) continue;
      try {
        auto copy = it->second;  // survives the subscriber unsubscribing itself
        copy(ev);
      } catch (const std::exception& e) {
        HA_WARN("%s: async event subscriber threw: %s", name.c_str(), e.what());
      } catch (...) {
        HA_WARN("%s: async event subscriber threw", name.c_str());
      }
    }
  }

  // Reads every pending event; false when the fd is broken.
  bool drain() {
    for (;;) {
      ibv_async_event raw{};
      if (ibv_get_async_event(context, &raw) != 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
      DeviceEvent ev = classify_async_event(raw, name);
      seen.fetch_add(1, std::memory_order_relaxed);
      const bool serious = ev.kind == DeviceEventKind::port_error || ev.kind == DeviceEventKind::device_fatal ||
                           ev.kind == DeviceEventKind::qp_fatal || ev.kind == DeviceEventKind::qp_access_error ||
                           ev.kind == DeviceEventKind::qp_request_error || ev.kind == DeviceEventKind::cq_error;
      if (serious)
        HA_WARN("%s: async event: %s (port %u, qp %u)", name.c_str(), to_string(ev.kind), ev.port, ev.qp_num);
      else
        HA_INFO("%s: async event: %s (port %u, qp %u)", name.c_str(), to_string(ev.kind), ev.port, ev.qp_num);
      deliver(ev);
      ibv_ack_async_event(&raw);  // always, whatever the subscribers did
      if (closed) return true;
    }
  }
};

AsyncEventPump::AsyncEventPump(Reactor& reactor, ibv_context* context, std::string device_name)
    : reactor_(reactor), state_(std::make_shared<State>(context, std::move(device_name))) {}

AsyncEventPump::~AsyncEventPump() { close(); }

void AsyncEventPump::start() {
  reactor_.run_sync([this] {
    if (state_->started || state_->closed) return;
    state_->started = true;
    state_->watcher.emplace(reactor_.executor(), state_->context->async_fd);
    reactor_.spawn(state_->name + " async events", run(state_));
  });
}

void AsyncEventPump::close() {
  reactor_.run_sync([this] {
    state_->closed = true;
    state_->watcher.reset();
    state_->subscribers.clear();
  });
}

std::uint64_t AsyncEventPump::events_seen() const noexcept { return state_->seen.load(); }

AsyncEventPump::Subscription AsyncEventPump::subscribe(Subscriber subscriber) {
  std::uint64_t id = 0;
  reactor_.run_sync([&] {
    id = state_->next_id++;
    state_->subscribers.emplace(id, std::move(subscriber));
  });
  return Subscription(this, id);
}

void AsyncEventPump::unsubscribe(std::uint64_t id) {
  reactor_.run_sync([&] { state_->subscribers.erase(id); });
}

AsyncEventPump::Subscription::Subscription(Subscription&& o) noexcept : pump_(o.pump_), id_(o.id_) {
  o.pump_ = nullptr;
}

AsyncEventPump::Subscription& AsyncEventPump::Subscription::operator=(Subscription&& o) noexcept {
  if (this != &o) {
    reset();
    pump_ = o.pump_;
    id_ = o.id_;
    o.pump_ = nullptr;
  }
  return *this;
}

void AsyncEventPump::Subscription::reset() {
  if (pump_) pump_->unsubscribe(id_);
  pump_ = nullptr;
}

asio::awaitable<void> AsyncEventPump::run(std::shared_ptr<State> s) {
  if (!s->drain()) {
    HA_WARN("%s: reading async events failed", s->name.c_str());
    co_return;
  }
  while (!s->closed) {
    auto ec = co_await s->watcher->readable();
    if (s->closed) break;
    if (ec) {
      if (ec != asio::error::operation_aborted) HA_WARN("%s: waiting for async events failed", s->name.c_str());
      break;
    }
    if (!s->drain()) {
      HA_WARN("%s: reading async events failed", s->name.c_str());
      break;
    }
  }
}

}  // namespace nccl_ha::reactor
