#include "rail.hpp"

#include <arpa/inet.h>

#include <chrono>
#include <cstdlib>
#include <unistd.h>

namespace ha_ping {

using namespace nccl_ha;

Rail::Rail(Key, reactor::Reactor& reactor, net::PortInfo port, Wake wake)
    : reactor_(reactor), port_(std::move(port)), wake_(std::move(wake)) {}

Rail::~Rail() {
  if (loop_) loop_->close();
  subscription_.reset();
  if (pump_) pump_->close();
}

Expected<std::unique_ptr<Rail>> Rail::open(reactor::Reactor& reactor, const net::PortInfo& port, std::size_t buffer_bytes,
                                           Wake wake, std::optional<std::uint32_t> gid_index) {
  auto rail = std::make_unique<Rail>(Key{}, reactor, port, std::move(wake));
  if (auto s = rail->init(buffer_bytes, gid_index); !s) return std::move(s).error();
  return rail;
}

std::uint64_t Rail::recv_addr() const noexcept { return reinterpret_cast<std::uint64_t>(buffer_.get() + half_); }

Status Rail::init(std::size_t buffer_bytes, std::optional<std::uint32_t> gid_index) {
  auto ctx = net::open_device(port_.device);
  if (!ctx) return std::move(ctx).error();
  ctx_ = std::move(ctx).value();
  if (gid_index) {
    ibv_gid gid{};
    if (int rc = ibv_query_gid(ctx_.get(), static_cast<std::uint8_t>(port_.port), static_cast<int>(*gid_index), &gid))
      return errno_error(Errc::verbs, "--gid-index " + std::to_string(*gid_index) + " on " + port_.id(), rc);
    bool empty = true;
    for (auto b : gid.raw) empty = empty && b == 0;
    if (empty)
      return make_error(Errc::invalid_argument,
                        "--gid-index " + std::to_string(*gid_index) + ": GID table entry of " + port_.id() + " is empty");
    port_.gid_index = *gid_index;
    port_.gid = gid;
  }
  auto pd = net::alloc_pd(ctx_.get());
  if (!pd) return std::move(pd).error();
  pd_ = std::move(pd).value();

  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  half_ = (buffer_bytes + page - 1) / page * page;
  buffer_.reset(static_cast<std::uint8_t*>(std::aligned_alloc(page, 2 * half_)));
  if (!buffer_) return make_error(Errc::system, "cannot allocate a " + std::to_string(2 * half_) + "-byte buffer");
  auto mr = net::register_mr(pd_.get(), buffer_.get(), 2 * half_, net::kDefaultQpAccess);
  if (!mr) return std::move(mr).error();
  mr_ = std::move(mr).value();

  auto cq = net::CompletionQueue::create(ctx_.get(), 512);
  if (!cq) return std::move(cq).error();
  cq_ = std::move(cq).value();
  net::QpCaps caps;
  caps.max_send_wr = 128;
  caps.max_recv_wr = 256;
  auto qp = net::create_rc_qp(pd_.get(), cq_->get(), cq_->get(), caps);
  if (!qp) return std::move(qp).error();
  qp_ = std::move(qp).value();
  local_ = net::local_endpoint(qp_.get(), port_, net::random_psn());

  pump_ = std::make_unique<reactor::AsyncEventPump>(reactor_, ctx_.get(), port_.device);
  subscription_ = pump_->subscribe([this](const reactor::DeviceEvent& ev) { on_event(ev); });
  pump_->start();
  loop_ = std::make_unique<reactor::CompletionLoop>(
      reactor_, *cq_,
      [this](std::span<const ibv_wc> wcs) {
        completions_.insert(completions_.end(), wcs.begin(), wcs.end());
        wake_();
      },
      [this](const char* what) {
        failure_ = std::string("completion loop failed: ") + what;
        wake_();
      },
      reactor::CompletionLoopOptions{16, port_.id()});
  loop_->start();
  return {};
}

void Rail::on_event(const reactor::DeviceEvent& ev) {
  const bool ours = ev.scope != reactor::EventScope::port || ev.port == port_.port;
  if (!ours) return;
  if (ev.kind == reactor::DeviceEventKind::port_error || ev.kind == reactor::DeviceEventKind::device_fatal) {
    if (!failure_) failure_ = std::string(reactor::to_string(ev.kind)) + " on " + port_.id();
    wake_();
  }
}

std::optional<std::string> Rail::port_down_now() const {
  ibv_port_attr attr{};
  if (ibv_query_port(ctx_.get(), static_cast<std::uint8_t>(port_.port), &attr) != 0 || attr.state == IBV_PORT_ACTIVE)
    return std::nullopt;
  return "port error on " + port_.id() + " (port " + net::port_state_name(attr.state) + ")";
}

Status Rail::connect(const net::Endpoint& remote, std::uint8_t tclass, std::uint8_t sl) {
  auto t = net::QpTimeouts::from_env();
  t.traffic_class = tclass;
  t.service_level = sl;
  return net::connect_rc_qp(qp_.get(), local_, remote, t);
}

Expected<Rail::Qos> Rail::query_qos() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_.get(), &attr, IBV_QP_AV, &init)) return errno_error(Errc::verbs, "ibv_query_qp", rc);
  Qos q;
  q.sl = attr.ah_attr.sl;
  if (attr.ah_attr.is_global) {
    q.tclass = attr.ah_attr.grh.traffic_class;
    q.sgid_index = attr.ah_attr.grh.sgid_index;
  }
  return q;
}

Status Rail::post_send(std::size_t len, std::uint64_t id) {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(buffer_.get()), static_cast<std::uint32_t>(len), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (int rc = timed_post_send(&wr)) return errno_error(Errc::verbs, "ibv_post_send(SEND)", rc);
  return {};
}

Status Rail::post_recv(std::size_t len, std::uint64_t id) {
  ibv_sge sge{recv_addr(), static_cast<std::uint32_t>(len), mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_.get(), &wr, &bad)) return errno_error(Errc::verbs, "ibv_post_recv", rc);
  return {};
}

Status Rail::post_write(std::size_t len, std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t id,
                        std::optional<std::uint32_t> imm) {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(buffer_.get()), static_cast<std::uint32_t>(len), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (imm) wr.imm_data = htonl(*imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  if (int rc = timed_post_send(&wr)) return errno_error(Errc::verbs, "ibv_post_send(RDMA_WRITE)", rc);
  return {};
}

}  // namespace ha_ping

namespace ha_ping {

int Rail::timed_post_send(ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = ibv_post_send(qp_.get(), wr, &bad);
  post_send_us_.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  return rc;
}

}  // namespace ha_ping
