// The rescue service and the comm's side of it (rescue.hpp).
#include "ha/rescue.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>

#include "core/state.hpp"
#include "ha/control_ops.hpp"
#include "ha/rescue_wire.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "runtime/admission.hpp"

namespace nccl_ha::plugin {

// The writer of a comm's rescue state, and of its TCP mail into the inbox (ControlPlane): defined
// here only.
struct RescueWriter {
  static RescueState& rescue(CommBase& c) noexcept { return c.cp.rescue_; }
  static Inbox& inbox(CommBase& c) noexcept { return c.cp.inbox_; }
};
namespace {
RescueState& rescue_of(CommBase& c) noexcept { return RescueWriter::rescue(c); }
}  // namespace

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Millis = std::chrono::milliseconds;

// The receive side asks this often whether the peer's side of the connection still lives.
constexpr std::uint64_t kCheckEveryNs = 1'000'000'000;

struct RescueExchange {
  explicit RescueExchange(const asio::any_io_executor& ex) : ready(ex) {}
  asio::steady_timer ready;  // cancelled when `answer` is set
  std::optional<std::vector<std::uint8_t>> answer;
};

struct RescueService::Impl {
  explicit Impl(asio::io_context& io) : acceptor(io) {}
  tcp::acceptor acceptor;
};

namespace {

std::vector<std::uint8_t> bytes_of(const ReprotectMsg& m) {
  std::vector<std::uint8_t> out(sizeof m);
  std::memcpy(out.data(), &m, sizeof m);
  return out;
}

std::uint32_t gen_of(const std::vector<std::uint8_t>& bytes) {
  ReprotectMsg m;
  std::memcpy(&m, bytes.data(), sizeof m);
  return m.gen;
}

Millis exchange_timeout() {
  const State* st = state();
  return Millis(st ? std::max(st->config.failover_timeout_ms * 5, 5000) : 5000);
}

// A proven request's answer, sealed (rescue_wire.hpp): `type` kRescueMsg with a ReprotectMsg, or an
// error frame with a reason.
asio::awaitable<void> answer(tcp::socket& sock, std::uint64_t id, const net::Key& key, const net::Mac& request_tag,
                             std::uint16_t type, std::span<const std::uint8_t> body, Millis timeout) {
  const auto sealed = seal_rescue_answer(key, id, request_tag, type, body);
  auto sent = co_await net::write_frame(sock, type, id, sealed, timeout);
  (void)sent;
}

asio::awaitable<void> refuse(tcp::socket& sock, std::uint64_t id, const net::Key& key, const net::Mac& request_tag,
                             const std::string& why, Millis timeout) {
  const std::vector<std::uint8_t> reason(why.begin(), why.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(why.size(), 1024)));
  co_await answer(sock, id, key, request_tag, static_cast<std::uint16_t>(net::MsgType::error), reason, timeout);
}

// Whether the comm is in the state a proven request `m` belongs to (rescue.hpp: who is heard): a
// check to a send comm, newer than the last; a rescue's request to a receive comm with a standby
// slot, newer than the last attempt taken (whether the receive side noticed the loss yet or not:
// the sender, which posts, sees it first). Takes the generation when it is.
bool called_for(CommBase& c, const ReprotectMsg& m) {
  RescueState& r = rescue_of(c);
  if (m.ok == kRescueCheck) {
    if (c.kind != CommKind::send || !newer_gen(m.gen, r.check_gen)) return false;
    r.check_gen = m.gen;
    return true;
  }
  if (c.kind != CommKind::recv || (m.ok != kRescueSlot && m.ok != kRescueSlot + 1) || !c.devs[c.standby_slot()] ||
      !newer_gen(m.gen, r.taken_gen))
    return false;
  r.taken_gen = m.gen;
  return true;
}

// One connection to the service: admitted unproven; closed without a word unless it brings, within
// the admission deadline, a request sealed with the key of the connection it names. A proven
// request is handed to its comm and answered with what the comm answers (sealed), if the comm's
// state calls for it; else it is dropped and counted.
asio::awaitable<void> serve_one(std::weak_ptr<RescueService> weak, tcp::socket sock, Millis timeout) {
  Admission& adm = state()->admission;
  boost::system::error_code ec;
  const asio::ip::address from = sock.remote_endpoint(ec).address();
  Admission::Ticket ticket = adm.admit(sock, from);
  const RescueKeyLookup key_for = [weak](std::uint64_t id) -> std::optional<net::Key> {
    auto svc = weak.lock();
    if (!svc) return std::nullopt;
    if (auto c = svc->find(id)) return rescue_of(*c).key;
    if (auto closed = svc->find_closed(id)) return closed->key;
    return std::nullopt;
  };
  auto proven = co_await read_rescue_request(sock, key_for, std::min(adm.limits().deadline, timeout));
  if (!proven) co_return adm.refused("rescue service", from, proven.error().message);
  auto svc = weak.lock();
  if (!svc) co_return;
  const std::uint64_t id = proven->id;
  const RescueRequest* req = &proven->request;
  std::shared_ptr<CommBase> c = svc->find(id);
  const std::optional<RescueService::Closed> closed = c ? std::nullopt : svc->find_closed(id);
  if (!c && !closed) co_return;  // withdrawn and forgotten meanwhile
  const net::Key key = c ? rescue_of(*c).key : closed->key;
  ticket.proven();
  const asio::ip::address peer = c ? rescue_of(*c).peer.address() : closed->peer;
  if (from != peer) {  // the key is the proof; the address must be the peer's all the same
    svc->count_dropped();
    co_return;
  }
  if (!c || c->closing.load(std::memory_order_relaxed))
    co_return co_await refuse(sock, id, key, req->tag, "no such connection here (closed)", timeout);
  if (rescue_of(*c).failed)
    co_return co_await refuse(sock, id, key, req->tag, "the connection failed here: " + rescue_of(*c).cause, timeout);
  if (!called_for(*c, req->msg)) {
    svc->count_dropped();
    co_return;
  }
  svc.reset();
  if (req->msg.ok == kRescueCheck) {
    c.reset();
    co_return co_await answer(sock, id, key, req->tag, kRescueMsg, net::bytes_of(req->msg), timeout);  // alive: the echo
  }
  auto ex = std::make_shared<RescueExchange>(co_await asio::this_coro::executor);
  if (rescue_of(*c).exchange) rescue_of(*c).exchange->ready.cancel();  // an older one is left unanswered
  rescue_of(*c).exchange = ex;
  rescue_of(*c).mail = std::move(proven->raw);
  wake_here(*c);
  c.reset();  // not kept alive by the wait
  ex->ready.expires_after(timeout);
  auto [ignored] = co_await ex->ready.async_wait(asio::as_tuple(asio::use_awaitable));
  (void)ignored;
  if (ex->answer)
    co_await answer(sock, id, key, req->tag, kRescueMsg, *ex->answer, timeout);
  else
    co_await refuse(sock, id, key, req->tag, "no answer in time", timeout);
}

asio::awaitable<void> accept_loop(std::shared_ptr<RescueService::Impl> impl, std::weak_ptr<RescueService> svc) {
  State* st = state();
  for (;;) {
    auto [ec, sock] = co_await impl->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !impl->acceptor.is_open()) co_return;
    if (ec) {  // a connection gone before it was taken, descriptors short for a moment: go on
      asio::steady_timer pause(impl->acceptor.get_executor(), Millis(100));
      auto [ignored] = co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      (void)ignored;
      continue;
    }
    st->reactor.spawn("rescue request", serve_one(svc, std::move(sock), exchange_timeout()));
  }
}

// Send side (or the receive side's check): one exchange, sealed with the connection's key `key`;
// its outcome goes to the comm's mail. Refusals and answers that do not carry the key's seal for this
// request count as no answer.
asio::awaitable<void> exchange(std::weak_ptr<CommBase> owner, tcp::endpoint peer, std::uint64_t token, net::Key key,
                               ReprotectMsg sent, Millis timeout) {
  std::string why, fatal;
  std::vector<std::uint8_t> answer;
  const auto request = seal_rescue_request(key, token, sent);
  const std::optional<RescueRequest> mine = open_rescue_request(key, token, request);  // its tag, to check the answer by
  auto sock = co_await net::connect_once(peer, timeout);  // refused: the peer's process is gone
  if (!mine) {
    fatal = "the connection has no rescue key";
  } else if (!sock) {
    fatal = "the peer's rescue service at " + peer.address().to_string() + ":" + std::to_string(peer.port()) +
            " does not answer (" + sock.error().message + ")";
  } else if (auto s = co_await net::write_frame(*sock, kRescueMsg, token, request, timeout); !s) {
    fatal = "sending to the peer's rescue service: " + s.error().message;
  } else if (auto f = co_await net::read_frame(*sock, token, timeout, kRescueMaxAnswer); !f) {
    why = "the peer's rescue service: " + f.error().message;
  } else if (auto body = open_rescue_answer(key, token, mine->tag, f->type, f->payload); !body) {
    why = "the peer's rescue service: an answer without the connection's seal";
  } else if (f->type == static_cast<std::uint16_t>(net::MsgType::error)) {
    const std::string reason(body->begin(), body->end());
    if (reason.find("no answer in time") == std::string::npos)
      fatal = "the peer: peer reported: " + reason;  // its side of the connection is gone
    else
      why = "the peer's rescue service: peer reported: " + reason;
  } else if (f->type != kRescueMsg || body->size() != sizeof(ReprotectMsg)) {
    fatal = "the peer's rescue service answered " + std::to_string(body->size()) + " bytes";
  } else {
    answer = std::move(*body);
  }
  auto c = owner.lock();
  if (!c) co_return;
  if (rescue_of(*c).mail && sent.gen < gen_of(*rescue_of(*c).mail)) co_return;  // a newer attempt's outcome is waiting
  if (!fatal.empty()) {
    rescue_of(*c).fatal = fatal;
  } else if (!why.empty()) {  // a refusal of this attempt, as the comm's own answer would be
    ReprotectMsg refusal;
    refusal.gen = sent.gen;
    seal(refusal);
    rescue_of(*c).why = why;
    rescue_of(*c).mail = bytes_of(refusal);
  } else {
    ReprotectMsg m;
    std::memcpy(&m, answer.data(), sizeof m);
    if (m.ok != kRescueCheck) rescue_of(*c).mail = std::move(answer);
  }
  wake_here(*c);
}

}  // namespace

Expected<std::shared_ptr<RescueService>> RescueService::start(const std::string& ip) {
  State* st = state();
  auto svc = std::make_shared<RescueService>();
  svc->impl_ = std::make_shared<Impl>(st->reactor.context());
  tcp::acceptor& a = svc->impl_->acceptor;
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(ip, ec);
  const tcp::endpoint ep(addr, 0);
  if (!ec) a.open(ep.protocol(), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) svc->port_ = a.local_endpoint(ec).port();
  if (ec) return make_error(Errc::system, "the rescue service on " + ip + ": " + ec.message());
  st->reactor.spawn("rescue service", accept_loop(svc->impl_, svc));
  return svc;
}

std::uint64_t RescueService::enroll(const std::shared_ptr<CommBase>& c) {
  const std::uint64_t token = net::random_token();
  std::lock_guard<std::mutex> lock(mutex_);
  comms_[token] = c;
  return token;
}

void RescueService::withdraw(std::uint64_t token, const net::Key& key, const asio::ip::address& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_.erase(token);
  if (net::all_zero(key) || !closed_.emplace(token, Closed{key, peer}).second) return;
  closed_order_.push_back(token);
  if (closed_order_.size() > kClosedMemory) {
    closed_.erase(closed_order_.front());
    closed_order_.pop_front();
  }
}

std::shared_ptr<CommBase> RescueService::find(std::uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = comms_.find(token);
  return it == comms_.end() ? nullptr : it->second.lock();
}

std::optional<RescueService::Closed> RescueService::find_closed(std::uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = closed_.find(token);
  if (it == closed_.end()) return std::nullopt;
  return it->second;
}

void RescueService::stop() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
}

RescuePoint rescue_point(const std::shared_ptr<CommBase>& c, const net::Key& key) {
  State* st = state();
  if (!st || !st->rescue || !st->config.enable_standby) return {};
  rescue_of(*c).key = key;  // before the comm can be found by its id
  rescue_of(*c).token = st->rescue->enroll(c);
  return {st->rescue->port(), rescue_of(*c).token};
}

void take_rescue_point(CommBase& c, const asio::ip::address& addr, const RescuePoint& theirs) {
  rescue_of(c).peer = tcp::endpoint(addr, theirs.port);
  rescue_of(c).peer_token = theirs.token;
}

void withdraw_rescue(CommBase& c) {
  if (State* st = state(); st && st->rescue && rescue_of(c).token)
    st->rescue->withdraw(rescue_of(c).token, rescue_of(c).key, rescue_of(c).peer.address());
}

bool rescue_possible(const CommBase& c) {
  const State* st = state();
  if (!st || !st->rescue || c.cp.rescue().token == 0 || c.cp.rescue().peer.port() == 0 || !c.devs[c.standby_slot()]) return false;
  for (const auto& d : st->devices)
    if (d->port_up.load(std::memory_order_relaxed) && d->port.link_layer == c.home->port.link_layer) return true;
  return false;
}

void rescue_send(CommBase& c) {
  State* st = state();
  st->reactor.spawn(c.id + " rescue", exchange(c.weak_from_this(), rescue_of(c).peer, rescue_of(c).peer_token,
                                               rescue_of(c).key, c.ctrl_out.reprotect, exchange_timeout()));
}

bool rescue_answer(CommBase& c, const ReprotectMsg& m) {
  if (!rescue_of(c).exchange || m.ok == kPortBack) return false;
  const auto ex = std::move(rescue_of(c).exchange);
  ex->answer = bytes_of(m);
  ex->ready.cancel();
  return true;
}

namespace {

// The receive side asks the peer's service whether the connection lives there (the sender drives
// the rescue; a sender that failed at once, its ports all down, never will).
void check_peer(CommBase& c) {
  ReprotectMsg q;
  q.ok = kRescueCheck;
  q.gen = ++rescue_of(c).check_gen;  // the service answers only checks newer than the last
  seal(q);
  state()->reactor.spawn(c.id + " rescue check", exchange(c.weak_from_this(), rescue_of(c).peer, rescue_of(c).peer_token,
                                                          rescue_of(c).key, q, exchange_timeout()));
}

// The first time: the rescue begins (send side: re-protection starts over, its messages over TCP).
void begin_rescue(CommBase& c, const std::string& what, std::uint64_t now) {
  RescueState& r = rescue_of(c);
  r.on = true;
  r.deadline_ns = now + c.rescue_timeout_ns;
  r.cause = what;
  r.why.clear();
  r.fatal.clear();
  r.next_check_ns = now;  // the receive side asks at once: a peer that failed at once never rescues
  r.started_ns = now;
  HA_WARN("NET/HA: %s: %s: no path left; building a new one on a pair of ports still up at both ends (over TCP, "
          "within HA_NCCL_RESCUE_TIMEOUT_MS = %llu ms); traffic waits", c.id.c_str(), what.c_str(),
          static_cast<unsigned long long>(c.rescue_timeout_ns / 1000000));
  write_stats(c, "rescue", [&](net::JsonWriter& j) { j.kv("why", what); });
  if (Path* sb = c.paths[c.standby_slot()].get()) sb->link.store(Path::failed, std::memory_order_relaxed);
  restart_for_rescue(c, now);
}

}  // namespace

bool wait_for_rescue(CommBase& c, const std::string& what, std::uint64_t now,
                     std::string& gave_up) {
  RescueState& r = rescue_of(c);
  if (!r.on) {
    if (!rescue_possible(c)) return false;
    begin_rescue(c, what, now);
  } else if (!r.fatal.empty()) {
    gave_up = r.fatal;
    return false;
  } else if (!rescue_possible(c)) {  // the last port here went down while it waited (both rails pulled)
    gave_up = "no port left up here for a new path";
    return false;
  } else if (now >= r.deadline_ns) {
    gave_up = "no new path within HA_NCCL_RESCUE_TIMEOUT_MS (" + std::to_string(c.rescue_timeout_ns / 1000000) + " ms)" +
              (r.why.empty() ? std::string() : ": " + r.why);
    return false;
  }
  if (c.kind == CommKind::recv && now >= r.next_check_ns) {
    r.next_check_ns = now + kCheckEveryNs;
    check_peer(c);
  }
  return true;
}

void end_rescue(CommBase& c, std::uint64_t now) {
  if (!rescue_of(c).on) return;
  rescue_of(c).on = false;
  const Path& p = *c.paths[c.standby_slot()];
  HA_WARN("NET/HA: %s: rescued %.0f ms after the loss: a new path on %s <-> the peer's device %d; failing over to it",
          c.id.c_str(), static_cast<double>(now - rescue_of(c).started_ns) / 1e6, p.dev->port.id().c_str(), p.peer_dev);
}

void refuse_rescues(CommBase& c, const std::string& why) {
  rescue_of(c).failed = true;
  rescue_of(c).cause = why;
}

void rescue_hopeless(CommBase& c, const std::string& why) {
  if (rescue_of(c).on && rescue_of(c).fatal.empty()) rescue_of(c).fatal = why;
}

bool deliver_rescue_mail(CommBase& c) {
  if (!rescue_of(c).mail) return false;
  std::memcpy(static_cast<void*>(&c.ctrl.reprotect), rescue_of(c).mail->data(), sizeof(ReprotectMsg));
  rescue_of(c).mail.reset();
  RescueWriter::inbox(c).post_mail(CtlKind::reprotect);
  return true;
}

}  // namespace nccl_ha::plugin
