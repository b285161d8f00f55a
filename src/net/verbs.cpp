#include "nccl_ha/net/verbs.hpp"

#include <dlfcn.h>

#include <cerrno>

#include "nccl_ha/reactor/fd_watcher.hpp"

namespace nccl_ha::net {

void* loaded_verbs_symbol(const char* name, const char* version) {
  void* lib = ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return nullptr;
  void* sym = version ? ::dlvsym(lib, name, version) : ::dlsym(lib, name);
  ::dlclose(lib);  // only drops the reference RTLD_NOLOAD took: the library stays loaded
  return sym;
}

Expected<ContextPtr> open_device(const std::string& name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return errno_error(Errc::verbs, "ibv_get_device_list", errno);
  ContextPtr ctx;
  bool found = false;
  for (int i = 0; i < n; ++i) {
    if (name == ibv_get_device_name(list[i])) {
      found = true;
      ctx.reset(ibv_open_device(list[i]));
      break;
    }
  }
  int err = errno;
  ibv_free_device_list(list);
  if (!found) return make_error(Errc::not_found, "no verbs device named '" + name + "'");
  if (!ctx) return errno_error(Errc::verbs, "ibv_open_device(" + name + ")", err);
  return ctx;
}

Expected<PdPtr> alloc_pd(ibv_context* ctx) {
  PdPtr pd(ibv_alloc_pd(ctx));
  if (!pd) return errno_error(Errc::verbs, "ibv_alloc_pd", errno);
  return pd;
}

Expected<MrPtr> register_mr(ibv_pd* pd, void* addr, std::size_t length, int access) {
  MrPtr mr(ibv_reg_mr(pd, addr, length, access));
  if (!mr) return errno_error(Errc::verbs, "ibv_reg_mr(" + std::to_string(length) + " bytes)", errno);
  return mr;
}

Expected<CqPtr> create_polled_cq(ibv_context* ctx, int depth) {
  CqPtr cq(ibv_create_cq(ctx, depth, nullptr, nullptr, 0));
  if (!cq) return errno_error(Errc::verbs, "ibv_create_cq(" + std::to_string(depth) + ")", errno);
  return cq;
}

Expected<std::unique_ptr<CompletionQueue>> CompletionQueue::create(ibv_context* ctx, int depth) {
  ChannelPtr channel(ibv_create_comp_channel(ctx));
  if (!channel) return errno_error(Errc::verbs, "ibv_create_comp_channel", errno);
  if (!reactor::set_nonblocking(channel->fd)) return errno_error(Errc::system, "fcntl(O_NONBLOCK)", errno);
  ibv_cq* cq = ibv_create_cq(ctx, depth, nullptr, channel.get(), 0);
  if (!cq) return errno_error(Errc::verbs, "ibv_create_cq(" + std::to_string(depth) + ")", errno);
  return std::make_unique<CompletionQueue>(Key{}, std::move(channel), cq);
}

CompletionQueue::~CompletionQueue() {
  ack_events();  // ibv_destroy_cq waits for every taken event to be acknowledged
  if (int rc = ibv_destroy_cq(cq_)) HA_WARN("ibv_destroy_cq failed: %d", rc);
}

int CompletionQueue::take_events() noexcept {
  int n = 0;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* cq_context = nullptr;
    if (ibv_get_cq_event(channel_.get(), &cq, &cq_context) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return n;
      return -1;
    }
    ++unacked_;
    ++n;
  }
}

void CompletionQueue::ack_events() noexcept {
  if (unacked_) ibv_ack_cq_events(cq_, unacked_);
  unacked_ = 0;
}

}  // namespace nccl_ha::net
