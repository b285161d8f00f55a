// One ha-ping session, client or server side, as coroutines on the reactor.
//
// Coroutine rule used throughout (GCC 12 destroys some temporaries of a co_await
// full-expression twice): no temporary with a non-trivial destructor inside a co_await
// expression - build strings, vectors and std::functions as named locals first; callables are
// passed as lambdas (by-reference captures only), never converted to std::function.
//
// The control connection is read by its own coroutine into an inbox; the session coroutine
// waits on one AsyncSignal that the control reader, the rails' completion loops and their
// port-event subscriptions all notify, and re-checks what it waits for on every wake-up.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "nccl_ha/net/discovery.hpp"
#include "nccl_ha/net/handshake.hpp"
#include "nccl_ha/reactor/reactor.hpp"
#include "nccl_ha/reactor/signal.hpp"
#include "options.hpp"
#include "protocol.hpp"
#include "rail.hpp"
#include "report.hpp"

namespace ha_ping {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

class Session {
 public:
  Session(nccl_ha::reactor::Reactor& reactor, Options options, std::vector<nccl_ha::net::PortInfo> rails);

  // Client: runs the whole session against options.peer; fills `report`. Never throws except
  // on cancellation.
  asio::awaitable<void> run(Report& report);
  // Server: one client's session on an accepted control connection. False when the connection
  // was no ha-ping client (no valid Hello within the handshake step, or a wrong proof): nothing
  // to report, `report` untouched. A proved client whose request the server refuses is reported
  // (report.fatal says why).
  asio::awaitable<bool> serve_client(asio::ip::tcp::socket& sock, Report& report);

 private:
  struct Outcome {
    bool ok = true;
    bool port_down = false;
    std::string reason;
  };
  struct Params {  // what both sides agreed on (the client's Hello)
    std::vector<std::uint64_t> sizes;
    std::uint32_t iters = 0, bw_iters = 0, window = 0;
    std::chrono::milliseconds timeout{0};
    std::chrono::milliseconds duration{0};  // bandwidth phase length (0: bw_iters writes)
    std::uint8_t tclass = 0, sl = 0;        // this side's QoS
  };
  Settings settings() const;
  asio::awaitable<void> finish();

  // The handshake (protocol.hpp). Client: the server's challenge, our proved Hello, the server's
  // proved HelloAck; false with report.fatal set when it failed. Server: the challenge, the
  // client's Hello checked (proof, then limits) and answered.
  enum class Admission { dropped, refused, admitted };
  asio::awaitable<bool> client_handshake(Report& report, HelloAck& ack);
  asio::awaitable<Admission> admit_client(Report& report, Hello& hello);
  asio::awaitable<void> send_error(const std::string& reason, std::chrono::milliseconds timeout);

  asio::awaitable<void> run_client(Report& report);
  asio::awaitable<void> run_rail(std::size_t index, const std::string& peer_name, RailReport& out);
  // run_rail's phases: this side's rail (opened into `rail` when its port is usable) and what the
  // peer is told about it; the setups exchanged; the QP connected and its QoS read back; the
  // rail's verdict from the phases' outcome (post_send times, --min-bw).
  RailSetup open_rail(std::size_t index, std::uint64_t max_size, RailReport& out, std::unique_ptr<Rail>& rail);
  asio::awaitable<nccl_ha::Expected<RailSetup>> exchange_setup(const RailSetup& mine);
  Outcome connect_rail(Rail& rail, const RailSetup& theirs, RailReport& out);
  void judge_rail(const Outcome& o, const Rail& rail, RailReport& out) const;

  asio::awaitable<Outcome> latency_phase(Rail& rail, std::uint64_t size, SizeResult& out);
  asio::awaitable<Outcome> bandwidth_phase(Rail& rail, const RailSetup& peer, std::uint64_t size, SizeResult& out);

  // Processes the rail's completions until done() or a failure (error completion, port event,
  // peer failure, lost control connection, no completion for the phase timeout).
  template <class Done, class OnWc>
  // `extra` lengthens the no-completion bound (the bandwidth receiver waits a whole --duration).
  asio::awaitable<Outcome> drive(Rail& rail, Done done, OnWc on_wc, Clock::duration extra = Clock::duration::zero());
  // Sends our PhaseDone and collects the peer's (unless it already came: `peer_already`); a
  // failure on either side fails the phase.
  asio::awaitable<Outcome> finish_phase(const Outcome& mine, const PhaseDone* peer_already);
  // Waits for the PhaseReady of a phase; a PhaseDone instead means the peer failed early.
  asio::awaitable<std::optional<PhaseDone>> await_ready(Clock::time_point deadline, Outcome& failure);

  // Control connection.
  void start_reader();
  asio::awaitable<void> reader();
  asio::awaitable<nccl_ha::Status> send(Msg type, std::span<const std::uint8_t> payload);
  asio::awaitable<nccl_ha::Expected<nccl_ha::net::Frame>> next_frame(Clock::time_point deadline);
  std::optional<PhaseDone> peeked_peer_failure() const;
  template <class Pred>
  asio::awaitable<bool> wait_until(Pred pred, Clock::time_point deadline);
  void close_control();

  Clock::time_point phase_deadline() const { return Clock::now() + params_.timeout; }
  bool is_client() const { return !options_.peer.empty(); }

  nccl_ha::reactor::Reactor& reactor_;
  Options options_;
  std::vector<nccl_ha::net::PortInfo> rails_;
  Params params_;
  nccl_ha::reactor::AsyncSignal wake_;
  std::optional<asio::ip::tcp::socket> control_;
  std::deque<nccl_ha::net::Frame> inbox_;
  std::optional<std::string> control_error_;
  bool reader_running_ = false;
};

// Server: accepts clients one after another (options.count; 0: until killed), each in a fresh
// Session; every client's report (and a fatal one: cannot listen, nobody came within
// --timeout) goes to `on_report`. A failed client does not stop the server.
using ReportSink = std::function<void(const Report&)>;
asio::awaitable<void> serve(nccl_ha::reactor::Reactor& reactor, Options options,
                            std::vector<nccl_ha::net::PortInfo> rails, ReportSink on_report);

}  // namespace ha_ping
