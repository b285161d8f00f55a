#include "session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>

#include "auth.hpp"
#include "server_limits.hpp"
#include "token_auth.hpp"

namespace ha_ping {

using namespace nccl_ha;
using net::Frame;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr milliseconds kIdleReadTimeout = std::chrono::hours(24);  // phases carry their own deadlines

std::uint8_t pattern_byte(std::uint64_t size, std::size_t j) {
  return static_cast<std::uint8_t>(j * 131 + size * 7 + 17);
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// What a peer's error frame said ("peer reported: X" from read_frame_of): X.
std::string peer_reason(const Error& e) {
  constexpr std::string_view prefix = "peer reported: ";
  return e.message.rfind(prefix, 0) == 0 ? e.message.substr(prefix.size()) : e.message;
}

}  // namespace

Session::Session(reactor::Reactor& reactor, Options options, std::vector<net::PortInfo> rails)
    : reactor_(reactor), options_(std::move(options)), rails_(std::move(rails)), wake_(reactor.executor()) {}

// ---------------------------------------------------------------- control connection

void Session::start_reader() {
  reader_running_ = true;
  reactor_.spawn("ha-ping control reader", reader());
}

asio::awaitable<void> Session::reader() {
  while (control_ && control_->is_open()) {
    auto f = co_await net::read_frame(*control_, kFrameTag, kIdleReadTimeout);
    if (!f) {
      if (!control_error_) control_error_ = f.error().message;  // not when the session closed it
      break;
    }
    inbox_.push_back(std::move(f).value());
    wake_.notify();
  }
  reader_running_ = false;
  wake_.notify();
}

void Session::close_control() {
  if (control_ && control_->is_open()) {
    boost::system::error_code ignored;
    control_->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    control_->close(ignored);
  }
}

asio::awaitable<Status> Session::send(Msg type, std::span<const std::uint8_t> payload) {
  co_return co_await net::write_frame(*control_, static_cast<std::uint16_t>(type), kFrameTag, payload,
                                      params_.timeout.count() ? params_.timeout : milliseconds(options_.timeout_ms));
}

template <class Pred>
asio::awaitable<bool> Session::wait_until(Pred pred, Clock::time_point deadline) {
  for (;;) {
    if (pred()) co_return true;
    auto now = Clock::now();
    if (now >= deadline) co_return false;
    co_await wake_.wait(deadline - now);
  }
}

asio::awaitable<Expected<Frame>> Session::next_frame(Clock::time_point deadline) {
  auto ready = [this] { return !inbox_.empty() || control_error_ || !reader_running_; };
  bool got = co_await wait_until(ready, deadline);
  if (!inbox_.empty()) {
    Frame f = std::move(inbox_.front());
    inbox_.pop_front();
    co_return f;
  }
  if (!got) {
    // A peer silent for a whole step holds this side no longer: the session is over, every later
    // step fails at once (the server goes on with its next client).
    const auto why = "the peer sent no control message within " + std::to_string(params_.timeout.count()) + " ms";
    if (!control_error_) control_error_ = why;
    close_control();
    co_return make_error(Errc::timeout, "timed out: " + why);
  }
  co_return make_error(Errc::closed, "control connection lost: " + control_error_.value_or("closed"));
}

std::optional<PhaseDone> Session::peeked_peer_failure() const {
  for (const auto& f : inbox_) {
    if (f.type != static_cast<std::uint16_t>(Msg::phase_done)) continue;
    auto d = decode_phase_done(f.payload);
    if (d && !d->ok) return *d;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- phases

template <class Done, class OnWc>
asio::awaitable<Session::Outcome> Session::drive(Rail& rail, Done done, OnWc on_wc, Clock::duration extra) {
  // A phase may run as long as it keeps completing work; it fails after `timeout` without any.
  auto deadline = phase_deadline() + extra;
  for (;;) {
    auto& q = rail.completions();
    if (!q.empty()) deadline = phase_deadline() + extra;
    while (!q.empty()) {
      ibv_wc wc = q.front();
      q.pop_front();
      if (wc.status != IBV_WC_SUCCESS) {
        // A pulled link fails the send at once, a moment before the port goes DOWN and its event
        // arrives: give the event a short grace before calling it a completion error.
        const auto grace = Clock::now() + milliseconds(500);
        const auto event_seen = [&rail] { return rail.failure().has_value() || rail.port_down_now().has_value(); };
        co_await wait_until(event_seen, grace);
        if (rail.failure()) co_return Outcome{false, true, *rail.failure()};
        if (auto down = rail.port_down_now()) co_return Outcome{false, true, *down};
        co_return Outcome{false, false,
                          std::string("completion error on ") + rail.port().id() + ": " + ibv_wc_status_str(wc.status) +
                              " (vendor error " + std::to_string(wc.vendor_err) + ")"};
      }
      if (auto o = on_wc(wc); !o.ok) co_return o;
    }
    if (done()) co_return Outcome{};
    if (rail.failure()) co_return Outcome{false, true, *rail.failure()};
    if (auto p = peeked_peer_failure()) co_return Outcome{false, p->port_down, "peer: " + p->reason};
    if (control_error_ || !reader_running_)
      co_return Outcome{false, false, "control connection lost: " + control_error_.value_or("closed")};
    auto now = Clock::now();
    if (now >= deadline)
      co_return Outcome{false, false,
                        "no completion within " + std::to_string(params_.timeout.count()) + " ms on " + rail.port().id()};
    co_await wake_.wait(deadline - now);
  }
}

asio::awaitable<std::optional<PhaseDone>> Session::await_ready(Clock::time_point deadline, Outcome& failure) {
  auto f = co_await next_frame(deadline);
  if (!f) {
    failure = Outcome{false, false, f.error().message};
    co_return std::nullopt;
  }
  if (f->type == static_cast<std::uint16_t>(Msg::phase_ready)) co_return std::nullopt;
  if (f->type == static_cast<std::uint16_t>(Msg::phase_done)) {
    auto d = decode_phase_done(f->payload);
    if (!d) {
      failure = Outcome{false, false, d.error().message};
      co_return std::nullopt;
    }
    failure = Outcome{false, d->port_down, "peer: " + d->reason};
    co_return *d;
  }
  failure = Outcome{false, false, "unexpected control message " + std::to_string(f->type)};
  co_return std::nullopt;
}

asio::awaitable<Session::Outcome> Session::finish_phase(const Outcome& mine_in, const PhaseDone* peer_already) {
  Outcome mine = mine_in;
  const PhaseDone done_msg{mine.ok, mine.port_down, mine.reason};
  const auto payload = encode(done_msg);
  if (auto s = co_await send(Msg::phase_done, payload); !s)
    if (mine.ok) mine = Outcome{false, false, s.error().message};
  if (peer_already) co_return mine;
  auto f = co_await next_frame(phase_deadline());
  Outcome peer;
  if (!f) {
    peer = Outcome{false, false, f.error().message};
  } else if (f->type != static_cast<std::uint16_t>(Msg::phase_done)) {
    peer = Outcome{false, false, "unexpected control message " + std::to_string(f->type)};
  } else if (auto d = decode_phase_done(f->payload); !d) {
    peer = Outcome{false, false, d.error().message};
  } else if (!d->ok) {
    peer = Outcome{false, d->port_down, "peer: " + d->reason};
  }
  co_return mine.ok ? peer : mine;
}

asio::awaitable<Session::Outcome> Session::latency_phase(Rail& rail, std::uint64_t size, SizeResult& out) {
  const auto deadline = phase_deadline();
  const std::uint32_t iters = params_.iters;
  Outcome o;
  if (is_client()) {
    Outcome early;
    auto peer = co_await await_ready(deadline, early);
    if (peer || !early.ok) co_return co_await finish_phase(early, peer ? &*peer : nullptr);
    std::vector<double> rtt;
    rtt.reserve(iters);
    for (std::uint32_t k = 0; k < iters && o.ok; ++k) {
      bool got_recv = false, got_send = false;
      Clock::time_point t0, t1;
      if (auto s = rail.post_recv(size, wr_id(WrKind::recv, k)); !s) {
        o = Outcome{false, false, s.error().message};
        break;
      }
      t0 = Clock::now();
      if (auto s = rail.post_send(size, wr_id(WrKind::send, k)); !s) {
        o = Outcome{false, false, s.error().message};
        break;
      }
      auto done = [&] { return got_recv && got_send; };
      auto on_wc = [&](const ibv_wc& wc) {
        if (wr_kind(wc.wr_id) == WrKind::recv) {
          t1 = Clock::now();
          got_recv = true;
        } else {
          got_send = true;
        }
        return Outcome{};
      };
      o = co_await drive(rail, done, on_wc);
      if (o.ok) rtt.push_back(micros(t1 - t0));
    }
    if (o.ok) {
      out.has_latency = true;
      out.latency = summarize_rtt(std::move(rtt));
    }
  } else {
    const std::uint32_t depth = std::min<std::uint32_t>(iters, 200);
    std::uint32_t posted = 0, received = 0, sent = 0;
    for (; posted < depth && o.ok; ++posted)
      if (auto s = rail.post_recv(size, wr_id(WrKind::recv, posted)); !s) o = Outcome{false, false, s.error().message};
    if (!o.ok) co_return co_await finish_phase(o, nullptr);
    if (auto s = co_await send(Msg::phase_ready, {}); !s) co_return Outcome{false, false, s.error().message};
    auto done = [&] { return received == iters && sent == iters; };
    auto on_wc = [&](const ibv_wc& wc) {
      if (wr_kind(wc.wr_id) == WrKind::send) {
        ++sent;
        return Outcome{};
      }
      if (auto s = rail.post_send(wc.byte_len, wr_id(WrKind::send, received)); !s)
        return Outcome{false, false, s.error().message};
      ++received;
      if (posted < iters) {
        if (auto s = rail.post_recv(size, wr_id(WrKind::recv, posted)); !s) return Outcome{false, false, s.error().message};
        ++posted;
      }
      return Outcome{};
    };
    o = co_await drive(rail, done, on_wc);
  }
  co_return co_await finish_phase(o, nullptr);
}

asio::awaitable<Session::Outcome> Session::bandwidth_phase(Rail& rail, const RailSetup& peer, std::uint64_t size,
                                                           SizeResult& out) {
  const auto deadline = phase_deadline();
  const std::uint32_t iters = params_.bw_iters;
  Outcome o;
  if (is_client()) {
    std::uint8_t* buf = rail.send_region();
    for (std::size_t j = 0; j < size; ++j) buf[j] = pattern_byte(size, j);
    Outcome early;
    auto peer_done = co_await await_ready(deadline, early);
    if (peer_done || !early.ok) co_return co_await finish_phase(early, peer_done ? &*peer_done : nullptr);
    // Count mode: `iters` writes; duration mode: writes until the duration is over. The last
    // write carries its sequence number as immediate data, which ends the receiver's phase.
    const bool timed = params_.duration.count() > 0;
    std::uint32_t posted = 0, completed = 0;
    bool stopped = false;
    Clock::time_point t0;
    auto post_more = [&]() -> Outcome {
      while (!stopped && posted - completed < params_.window) {
        const bool last = timed ? Clock::now() - t0 >= params_.duration : posted + 1 == iters;
        auto s = rail.post_write(size, peer.addr, peer.rkey, wr_id(WrKind::write, posted),
                                 last ? std::optional<std::uint32_t>(posted) : std::nullopt);
        if (!s) return Outcome{false, false, s.error().message};
        ++posted;
        stopped = last;
      }
      return Outcome{};
    };
    t0 = Clock::now();
    o = post_more();
    auto done = [&] { return stopped && completed == posted; };
    auto on_wc = [&](const ibv_wc&) {
      ++completed;
      return post_more();
    };
    if (o.ok) o = co_await drive(rail, done, on_wc);
    const auto t1 = Clock::now();
    if (o.ok) {
      out.has_bandwidth = true;
      out.bw_mib_s = static_cast<double>(size) * posted / (1024.0 * 1024.0) / std::chrono::duration<double>(t1 - t0).count();
    }
  } else {
    std::memset(const_cast<std::uint8_t*>(rail.recv_region()), 0, size);
    if (auto s = rail.post_recv(0, wr_id(WrKind::recv, 0)); !s) {
      const Outcome failed{false, false, s.error().message};
      co_return co_await finish_phase(failed, nullptr);
    }
    if (auto s = co_await send(Msg::phase_ready, {}); !s) co_return Outcome{false, false, s.error().message};
    bool got_imm = false;
    auto done = [&] { return got_imm; };
    auto on_wc = [&](const ibv_wc& wc) {
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) return Outcome{false, false, "unexpected completion opcode"};
      got_imm = true;
      if (params_.duration.count() == 0 && ntohl(wc.imm_data) != iters - 1)
        return Outcome{false, false, "immediate data does not match the write count"};
      return Outcome{};
    };
    o = co_await drive(rail, done, on_wc, params_.duration);
    if (o.ok) {
      const std::uint8_t* r = rail.recv_region();
      for (std::size_t j = 0; j < size; ++j)
        if (r[j] != pattern_byte(size, j)) {
          o = Outcome{false, false, "data mismatch at byte " + std::to_string(j) + " of a " + std::to_string(size) + "-byte write"};
          break;
        }
    }
  }
  co_return co_await finish_phase(o, nullptr);
}

// ---------------------------------------------------------------- rails

RailSetup Session::open_rail(std::size_t index, std::uint64_t max_size, RailReport& out, std::unique_ptr<Rail>& rail) {
  RailSetup mine;
  if (index >= rails_.size()) {
    out.local = "(none)";
    mine.status = RailStatus::missing;
    mine.reason = "no rail " + std::to_string(index) + " on the " + std::string(is_client() ? "client" : "server");
    return mine;
  }
  const auto& port = rails_[index];
  out.local = port.id();
  out.local_netdev = port.netdev;
  out.speed_mbps = port.speed_mbps;
  if (!port.active()) {
    mine.status = RailStatus::port_down;
    mine.reason = "port " + port.id() + " is not ACTIVE (" + net::port_state_name(port.state) + ")";
  } else if (auto r = Rail::open(reactor_, port, max_size, [this] { wake_.notify(); }, options_.gid_index); !r) {
    mine.status = RailStatus::setup_failed;
    mine.reason = r.error().message;
  } else {
    rail = std::move(r).value();
    mine.endpoint = rail->endpoint();
    mine.addr = rail->recv_addr();
    mine.rkey = rail->rkey();
    mine.length = rail->half();
  }
  return mine;
}

asio::awaitable<Expected<RailSetup>> Session::exchange_setup(const RailSetup& mine) {
  const auto setup_payload = encode(mine);
  if (auto s = co_await send(Msg::rail_setup, setup_payload); !s) co_return std::move(s).error();
  auto f = co_await next_frame(phase_deadline());
  if (!f) co_return std::move(f).error();
  if (f->type != static_cast<std::uint16_t>(Msg::rail_setup))
    co_return make_error(Errc::bad_type, "expected the peer's rail setup");
  co_return decode_rail_setup(f->payload);
}

Session::Outcome Session::connect_rail(Rail& rail, const RailSetup& theirs, RailReport& out) {
  auto s = rail.connect(theirs.endpoint, params_.tclass, params_.sl);
  if (!s) return Outcome{false, false, s.error().message};
  if (auto q = rail.query_qos(); !q) {
    out.qos_error = q.error().message;
  } else {
    out.has_qos = true;
    out.qos_requested_tclass = params_.tclass;
    out.qos_requested_sl = params_.sl;
    out.qos_sl = q->sl;
    out.qos_tclass = q->tclass;
    out.qos_gid_index = q->sgid_index;
  }
  return Outcome{};
}

void Session::judge_rail(const Outcome& o, const Rail& rail, RailReport& out) const {
  if (auto samples = rail.post_send_us(); !samples.empty()) {
    std::sort(samples.begin(), samples.end());
    out.post_send_calls = samples.size();
    out.post_send_median_us = samples[samples.size() / 2];
    out.post_send_max_us = samples.back();
  }
  if (!o.ok) {
    out.health = o.port_down ? Health::down : Health::unreachable;
    out.reason = o.reason;
  } else if (options_.min_bw > 0 && !out.sizes.empty() && out.sizes.back().has_bandwidth) {
    const bool gbits = options_.report_gbits;
    const auto& last = out.sizes.back();
    out.min_bw_mib_s = min_bw_mib_s(options_, out.speed_mbps);
    char buf[256];
    if (!out.min_bw_mib_s) {
      std::snprintf(buf, sizeof buf, "--min-bw %g%% not checked: the link speed of %s is unknown", options_.min_bw,
                    out.local.c_str());
      out.reason = buf;
    } else if (last.bw_mib_s < *out.min_bw_mib_s) {
      out.health = Health::degraded;
      if (options_.min_bw_percent)
        std::snprintf(buf, sizeof buf, "%.2f %s at %llu bytes is below --min-bw %g%% of the %d Mbps link speed (%.2f %s)",
                      bw_in_unit(last.bw_mib_s, gbits), bw_unit(gbits), static_cast<unsigned long long>(last.size),
                      options_.min_bw, out.speed_mbps, bw_in_unit(*out.min_bw_mib_s, gbits), bw_unit(gbits));
      else
        std::snprintf(buf, sizeof buf, "%.2f %s at %llu bytes is below --min-bw %.2f MiB/s%s",
                      bw_in_unit(last.bw_mib_s, gbits), bw_unit(gbits), static_cast<unsigned long long>(last.size),
                      options_.min_bw,
                      gbits ? (" (" + std::to_string(bw_in_unit(options_.min_bw, true)) + " Gb/s)").c_str() : "");
      out.reason = buf;
    }
  }
}

asio::awaitable<void> Session::run_rail(std::size_t index, const std::string& peer_name, RailReport& out) {
  out.index = index;
  out.peer = peer_name.empty() ? "(none)" : peer_name;
  std::unique_ptr<Rail> rail;
  const std::uint64_t max_size = *std::max_element(params_.sizes.begin(), params_.sizes.end());
  const RailSetup mine = open_rail(index, max_size, out, rail);
  Expected<RailSetup> theirs = co_await exchange_setup(mine);
  if (!theirs) {
    out.health = Health::error;
    out.reason = theirs.error().message;
    co_return;
  }
  if (mine.status != RailStatus::ok || theirs->status != RailStatus::ok) {
    const bool down = mine.status == RailStatus::port_down || theirs->status == RailStatus::port_down;
    out.health = down ? Health::down : Health::error;
    out.reason = mine.status != RailStatus::ok ? "local " + mine.reason : "peer " + theirs->reason;
    co_return;
  }
  if (theirs->length < max_size) {
    out.health = Health::error;
    out.reason = "peer buffer too small";
    co_return;
  }

  Outcome o = connect_rail(*rail, *theirs, out);
  o = co_await finish_phase(o, nullptr);
  for (std::size_t i = 0; i < params_.sizes.size() && o.ok; ++i) {
    SizeResult r;
    r.size = params_.sizes[i];
    o = co_await latency_phase(*rail, r.size, r);
    if (o.ok) o = co_await bandwidth_phase(*rail, *theirs, r.size, r);
    out.sizes.push_back(r);
  }
  judge_rail(o, *rail, out);
}

// ---------------------------------------------------------------- sides

Settings Session::settings() const {
  Settings st;
  st.sizes = params_.sizes;
  st.iters = params_.iters;
  st.bw_iters = params_.bw_iters;
  st.duration_s = static_cast<std::uint32_t>(params_.duration.count() / 1000);
  st.tx_depth = params_.window;
  st.timeout_s = static_cast<std::uint32_t>(params_.timeout.count() / 1000);
  st.min_bw = options_.min_bw;
  st.min_bw_percent = options_.min_bw_percent;
  st.tclass = params_.tclass;
  st.sl = params_.sl;
  // The server takes the client's QoS unless it has its own (option or environment).
  st.tclass_source = is_client() || options_.tclass_source != "default" ? options_.tclass_source : "client";
  st.sl_source = is_client() || options_.sl_source != "default" ? options_.sl_source : "client";
  st.gid_index = options_.gid_index;
  st.ib_dev = options_.ib_dev;
  st.ib_port = options_.ib_port;
  st.report_gbits = options_.report_gbits;
  return st;
}

asio::awaitable<void> Session::finish() {
  close_control();
  // Let the control reader see the closed socket and finish before the session goes away.
  auto reader_gone = [this] { return !reader_running_; };
  co_await wait_until(reader_gone, Clock::now() + std::chrono::seconds(5));
}

asio::awaitable<void> Session::run(Report& report) {
  report.role = "client";
  stamp(report);
  try {
    co_await run_client(report);
  } catch (const boost::system::system_error& e) {
    if (report.fatal.empty()) report.fatal = std::string("interrupted: ") + e.what();
  } catch (const std::exception& e) {  // no random nonce (libcrypto)
    if (report.fatal.empty()) report.fatal = e.what();
  }
  co_await finish();
}

asio::awaitable<void> Session::run_client(Report& report) {
  params_ = Params{options_.sizes,       options_.iters,     options_.bw_iters,
                   options_.duration_s ? options_.window : std::min(options_.window, options_.bw_iters),
                   milliseconds(options_.timeout_ms), milliseconds(std::uint64_t{options_.duration_s} * 1000),
                   options_.tclass,      options_.sl};
  report.settings = settings();
  auto peer = net::resolve_endpoint(options_.peer, options_.port);
  if (!peer) {
    report.fatal = peer.error().message;
    co_return;
  }
  report.peer = peer->address().to_string() + ":" + std::to_string(peer->port());
  auto sock = co_await net::connect_with_retry(*peer, milliseconds(options_.timeout_ms));
  if (!sock) {
    report.fatal = "peer " + report.peer + " unreachable: " + sock.error().message;
    co_return;
  }
  control_.emplace(std::move(sock).value());
  HelloAck ack;
  if (!co_await client_handshake(report, ack)) co_return;
  start_reader();
  const std::size_t n = rails_.size();  // the client decides which rails are checked
  report.rails.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string peer_rail = i < ack.rails.size() ? ack.rails[i] : "";
    co_await run_rail(i, peer_rail, report.rails[i]);
  }
  (void)co_await send(Msg::bye, {});
}

// ---------------------------------------------------------------- handshake

asio::awaitable<bool> Session::client_handshake(Report& report, HelloAck& ack) {
  auto cf = co_await net::read_frame_of(*control_, static_cast<std::uint16_t>(Msg::challenge), kFrameTag, params_.timeout);
  auto challenge = cf ? decode_challenge(cf->payload) : Expected<Challenge>(std::move(cf).error());
  if (!challenge) {
    report.fatal = "no valid challenge from " + report.peer + " (not an ha-ping server of this version?): " +
                   challenge.error().message;
    co_return false;
  }
  Hello hello{{},
              params_.sizes,
              params_.iters,
              params_.bw_iters,
              params_.window,
              options_.timeout_ms,
              static_cast<std::uint32_t>(params_.duration.count()),
              params_.tclass,
              params_.sl,
              ha_tools::random_nonce(),
              {}};
  for (const auto& r : rails_) hello.rails.push_back(r.id());
  const auto hello_payload = signed_hello(hello, options_.token, challenge->nonce);
  if (auto s = co_await send(Msg::hello, hello_payload); !s) {
    report.fatal = "sending hello: " + s.error().message;
    co_return false;
  }
  auto f = co_await net::read_frame_of(*control_, static_cast<std::uint16_t>(Msg::hello_ack), kFrameTag, params_.timeout);
  if (!f) {
    report.fatal = f.error().code == Errc::peer_error ? "refused by " + report.peer + ": " + peer_reason(f.error())
                                                      : "no valid answer from " + report.peer + ": " + f.error().message;
    co_return false;
  }
  auto decoded = decode_hello_ack(f->payload);
  if (!decoded) {
    report.fatal = decoded.error().message;
    co_return false;
  }
  if (!ack_proved(f->payload, *decoded, options_.token, challenge->nonce, hello.nonce)) {
    report.fatal = std::string(kAuthFailed) + ": " + report.peer + " does not hold this client's token";
    co_return false;
  }
  ack = std::move(decoded).value();
  if (ack.timeout_ms < params_.timeout.count()) {
    std::fprintf(stderr, "ha-ping: the server caps --timeout at %u s: the session uses that\n", ack.timeout_ms / 1000);
    params_.timeout = milliseconds(ack.timeout_ms);
    report.settings = settings();
  }
  co_return true;
}

asio::awaitable<void> Session::send_error(const std::string& reason, milliseconds timeout) {
  const std::vector<std::uint8_t> payload(reason.begin(), reason.end());
  (void)co_await net::write_frame(*control_, static_cast<std::uint16_t>(net::MsgType::error), kFrameTag, payload, timeout);
}

asio::awaitable<Session::Admission> Session::admit_client(Report& report, Hello& hello) {
  // Until the client proved the token, every step is short and it learns nothing but the failure.
  const milliseconds step = handshake_step(options_.timeout_ms);
  const Challenge challenge{kProtocolVersion, ha_tools::random_nonce()};
  const auto challenge_payload = encode(challenge);
  std::optional<net::Frame> frame;
  std::string why;
  auto sent = co_await net::write_frame(*control_, static_cast<std::uint16_t>(Msg::challenge), kFrameTag,
                                        challenge_payload, step);
  if (!sent) {
    why = sent.error().message;
  } else {
    auto f = co_await net::read_frame_of(*control_, static_cast<std::uint16_t>(Msg::hello), kFrameTag, step);
    if (f) frame = std::move(f).value();
    else why = f.error().message;
  }
  auto h = frame ? decode_hello(frame->payload) : Expected<Hello>(make_error(Errc::closed, why));
  if (!h) {  // no ha-ping client, or silent for the whole step
    std::fprintf(stderr, "ha-ping: dropped a connection from %s: no valid hello within %lld ms: %s\n",
                 report.peer.c_str(), static_cast<long long>(step.count()), h.error().message.c_str());
    co_return Admission::dropped;
  }
  if (!hello_proved(frame->payload, *h, options_.token, challenge.nonce)) {
    std::fprintf(stderr, "ha-ping: dropped a connection from %s: %s\n", report.peer.c_str(), kAuthFailed);
    co_await send_error(kAuthFailed, step);
    co_return Admission::dropped;
  }
  hello = std::move(h).value();
  const std::uint8_t tclass = options_.tclass_source != "default" ? options_.tclass : hello.tclass;
  const std::uint8_t sl = options_.sl_source != "default" ? options_.sl : hello.sl;
  auto grant = admit(hello, ServerLimits{options_.max_size, options_.timeout_ms});
  params_ = Params{hello.sizes,
                   hello.iters,
                   hello.bw_iters,
                   hello.window,
                   milliseconds(grant ? grant->timeout_ms : hello.timeout_ms),
                   milliseconds(hello.duration_ms),
                   tclass,
                   sl};
  report.settings = settings();
  if (!grant) {
    report.fatal = "refused the client's request: " + grant.error().message;
    std::fprintf(stderr, "ha-ping: %s: %s\n", report.peer.c_str(), report.fatal.c_str());
    co_await send_error(grant.error().message, step);
    co_return Admission::refused;
  }
  if (grant->timeout_capped)
    std::fprintf(stderr, "ha-ping: client %s asked for --timeout %u s: capped at this server's %u s\n",
                 report.peer.c_str(), hello.timeout_ms / 1000, grant->timeout_ms / 1000);
  HelloAck ack;
  for (const auto& rl : rails_) ack.rails.push_back(rl.id());
  ack.timeout_ms = grant->timeout_ms;
  const auto ack_payload = signed_ack(ack, options_.token, challenge.nonce, hello.nonce);
  if (auto s = co_await send(Msg::hello_ack, ack_payload); !s) {
    report.fatal = s.error().message;
    co_return Admission::refused;
  }
  co_return Admission::admitted;
}

asio::awaitable<bool> Session::serve_client(asio::ip::tcp::socket& sock, Report& out) {
  Report report;
  report.role = "server";
  stamp(report);
  boost::system::error_code ec;
  report.peer = sock.remote_endpoint(ec).address().to_string();
  control_.emplace(std::move(sock));
  bool client = true;
  try {
    Hello hello;
    const Admission admitted = co_await admit_client(report, hello);
    client = admitted != Admission::dropped;
    if (admitted == Admission::admitted) {
      start_reader();
      const std::size_t n = hello.rails.size();
      report.rails.resize(n);
      for (std::size_t i = 0; i < n; ++i) co_await run_rail(i, hello.rails[i], report.rails[i]);
      auto bye = co_await next_frame(phase_deadline());
      if (!bye || bye->type != static_cast<std::uint16_t>(Msg::bye))
        std::fprintf(stderr, "ha-ping: client %s did not say goodbye\n", report.peer.c_str());
    }
  } catch (const boost::system::system_error& e) {
    if (report.fatal.empty()) report.fatal = std::string("interrupted: ") + e.what();
  } catch (const std::exception& e) {  // no random nonce (libcrypto)
    if (report.fatal.empty()) report.fatal = e.what();
  }
  co_await finish();
  if (client) out = std::move(report);
  co_return client;
}

asio::awaitable<void> serve(reactor::Reactor& reactor, Options options, std::vector<net::PortInfo> rails,
                            ReportSink on_report) {
  auto ex = co_await asio::this_coro::executor;
  Report fatal;
  fatal.role = "server";
  stamp(fatal);
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(options.bind, ec);
  if (ec) {
    fatal.fatal = "bad --bind address '" + options.bind + "'";
    on_report(fatal);
    co_return;
  }
  asio::ip::tcp::acceptor acceptor(ex);
  asio::ip::tcp::endpoint ep(addr, options.port);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    fatal.fatal = "cannot listen on " + options.bind + ":" + std::to_string(options.port) + ": " + ec.message();
    on_report(fatal);
    co_return;
  }
  const unsigned port = acceptor.local_endpoint(ec).port();  // --port 0: the one the kernel chose
  if (options.count == 1)
    std::fprintf(stderr, "ha-ping: server listening on %s:%u\n", options.bind.c_str(), port);
  else if (options.count == 0)
    std::fprintf(stderr, "ha-ping: server listening on %s:%u, serving clients until killed\n", options.bind.c_str(), port);
  else
    std::fprintf(stderr, "ha-ping: server listening on %s:%u for %u clients\n", options.bind.c_str(), port,
                 options.count);
  if (options.token.empty())
    std::fprintf(stderr, "ha-ping: no --token (nor %s): anyone who can reach this port can use the server\n",
                 kTokenEnv);
  std::uint64_t served = 0;
  while (options.count == 0 || served < options.count) {
    using namespace asio::experimental::awaitable_operators;
    // --serve waits for ever; a counted server gives up after --timeout without a client.
    const auto wait = options.count == 0 ? milliseconds(std::chrono::hours(24 * 365)) : milliseconds(options.timeout_ms);
    asio::steady_timer timer(ex, wait);
    auto r = co_await (acceptor.async_accept(use_tuple) || timer.async_wait(use_tuple));
    if (r.index() == 1) {
      if (options.count == 0) continue;
      fatal.fatal = "no client connected within " + std::to_string(options.timeout_ms / 1000) + " s";
      if (served) fatal.fatal += " (" + std::to_string(served) + " of " + std::to_string(options.count) + " served)";
      stamp(fatal);
      on_report(fatal);
      co_return;
    }
    auto [aec, sock] = std::move(std::get<0>(r));
    if (aec) {
      fatal.fatal = "accept failed: " + aec.message();
      stamp(fatal);
      on_report(fatal);
      co_return;
    }
    Report report;
    bool was_client = false;
    {
      Session session(reactor, options, rails);
      was_client = co_await session.serve_client(sock, report);
    }
    if (!was_client) continue;
    report.client = ++served;
    on_report(report);
  }
}

}  // namespace ha_ping
