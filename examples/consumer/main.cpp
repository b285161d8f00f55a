// Example embedder: lists the RDMA ports nccl-ha sees, and shows the reactor pattern
// (start, spawn a coroutine with a timer, wait for it, stop).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <future>

#include <nccl_ha/net/discovery.hpp>
#include <nccl_ha/reactor/reactor.hpp>

namespace asio = boost::asio;

int main() {
  nccl_ha::reactor::Reactor reactor;
  reactor.start();
  std::promise<int> ticks;
  reactor.spawn("example", [&]() -> asio::awaitable<void> {
    asio::steady_timer t(co_await asio::this_coro::executor);
    int n = 0;
    for (; n < 3; ++n) {
      t.expires_after(std::chrono::milliseconds(10));
      co_await t.async_wait(asio::use_awaitable);
    }
    ticks.set_value(n);
  }());
  int n = ticks.get_future().get();
  reactor.stop();

  nccl_ha::net::DiscoveryOptions opts;
  opts.include_inactive = true;
  auto ports = nccl_ha::net::discover_ports(opts);
  std::printf("reactor ticked %d times; %zu RDMA port(s)\n", n, ports.size());
  for (const auto& p : ports)
    std::printf("  %s %s %s %d Mbps\n", p.id().c_str(), nccl_ha::net::link_layer_name(p.link_layer),
                nccl_ha::net::port_state_name(p.state), p.speed_mbps);
  return n == 3 ? 0 : 1;
}
