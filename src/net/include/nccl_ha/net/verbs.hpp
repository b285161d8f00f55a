// RAII owners for verbs objects. Each owner releases exactly one object with the matching
// ibv_destroy/close call; destruction order is the reverse of the dependency order
// (MR, QP -> CQ -> completion channel -> PD -> context), which holding them as members in
// dependency order gives for free.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

#include "nccl_ha/reactor/completion_loop.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::net {

struct ContextDeleter { void operator()(ibv_context* p) const noexcept { if (p) ibv_close_device(p); } };
struct PdDeleter { void operator()(ibv_pd* p) const noexcept { if (p) ibv_dealloc_pd(p); } };
struct ChannelDeleter { void operator()(ibv_comp_channel* p) const noexcept { if (p) ibv_destroy_comp_channel(p); } };
struct QpDeleter { void operator()(ibv_qp* p) const noexcept { if (p) ibv_destroy_qp(p); } };
struct MrDeleter { void operator()(ibv_mr* p) const noexcept { if (p) ibv_dereg_mr(p); } };
struct CqDeleter { void operator()(ibv_cq* p) const noexcept { if (p) ibv_destroy_cq(p); } };

using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, ChannelDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;  // a CQ without completion channel (polled)

// A symbol of the libibverbs this process already loaded (the plugin may be loaded RTLD_LOCAL:
// not through RTLD_DEFAULT), with `version` (dlvsym) or without (dlsym); nullptr when the library
// or the symbol is absent: what rdma-core added later is resolved at run time, so an older library
// still loads the plugin.
void* loaded_verbs_symbol(const char* name, const char* version = nullptr);

// Opens the device called `name` (e.g. "rxe0", "mlx5_0").
Expected<ContextPtr> open_device(const std::string& name);
Expected<PdPtr> alloc_pd(ibv_context* ctx);
Expected<MrPtr> register_mr(ibv_pd* pd, void* addr, std::size_t length, int access);
Expected<CqPtr> create_polled_cq(ibv_context* ctx, int depth);

// A completion queue with its own completion channel. Implements the reactor's CqEventSource,
// and acknowledges every event it took before destroying the CQ, so destruction never blocks.
class CompletionQueue final : public reactor::CqEventSource {
 public:
  static Expected<std::unique_ptr<CompletionQueue>> create(ibv_context* ctx, int depth);
  ~CompletionQueue() override;

 private:
  struct Key {
    explicit Key() = default;
  };

 public:
  CompletionQueue(Key, ChannelPtr channel, ibv_cq* cq) : channel_(std::move(channel)), cq_(cq) {}
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  ibv_cq* get() const noexcept { return cq_; }

  int event_fd() const noexcept override { return channel_->fd; }
  bool arm() noexcept override { return ibv_req_notify_cq(cq_, 0) == 0; }
  int take_events() noexcept override;
  void ack_events() noexcept override;
  unsigned unacked_events() const noexcept override { return unacked_; }
  int poll(std::span<ibv_wc> out) noexcept override {
    return ibv_poll_cq(cq_, static_cast<int>(out.size()), out.data());
  }

 private:
  ChannelPtr channel_;
  ibv_cq* cq_;
  unsigned unacked_ = 0;
};

}  // namespace nccl_ha::net
