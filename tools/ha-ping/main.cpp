// ha-ping: link check of every rail between two hosts, built on the nccl-ha reactor.
//
//   host B$ ha-ping                 (server)
//   host A$ ha-ping B               (client: checks rail 0, rail 1, ... against B)
//
// This file is also the reference for embedding the reactor: start a Reactor, spawn the
// protocol as a coroutine, wait for it, stop the reactor.
#include <cstdio>
#include <algorithm>
#include <future>

#include "nccl_ha/net/discovery.hpp"
#include "nccl_ha/net/env.hpp"
#include "nccl_ha/reactor/reactor.hpp"
#include "nccl_ha/version.hpp"
#include "options.hpp"
#include "plugin_list.hpp"
#include "report.hpp"
#include "session.hpp"

namespace {

using namespace nccl_ha;

// Keeps the ports of -d DEV / -i PORT, then resolves --rails entries (index, dev or dev:port).
Expected<std::vector<net::PortInfo>> select_rails(const std::vector<net::PortInfo>& discovered, const ha_ping::Options& o) {
  std::vector<net::PortInfo> all;
  for (const auto& p : discovered)
    if ((o.ib_dev.empty() || p.device == o.ib_dev) && (o.ib_port == 0 || p.port == o.ib_port)) all.push_back(p);
  if (all.empty() && (!o.ib_dev.empty() || o.ib_port != 0))
    return make_error(Errc::not_found, "no RDMA port matches" + (o.ib_dev.empty() ? "" : " --ib-dev " + o.ib_dev) +
                                           (o.ib_port ? " --ib-port " + std::to_string(o.ib_port) : ""));
  const auto& wanted = o.rails;
  if (wanted.empty()) return all;
  std::vector<net::PortInfo> out;
  for (const auto& w : wanted) {
    const net::PortInfo* hit = nullptr;
    if (auto idx = net::parse_int(w)) {
      if (*idx >= 0 && static_cast<std::size_t>(*idx) < all.size()) hit = &all[static_cast<std::size_t>(*idx)];
    } else {
      for (const auto& p : all)
        if (p.id() == w || (w.find(':') == std::string::npos && p.device == w)) {
          hit = &p;
          break;
        }
    }
    if (!hit) return make_error(Errc::not_found, "--rails: no port matches '" + w + "'");
    out.push_back(*hit);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  auto opts = ha_ping::parse_options(argc, argv);
  if (!opts) {
    std::fprintf(stderr, "ha-ping: %s\n\n%s", opts.error().message.c_str(), ha_ping::usage());
    return 2;
  }
  if (opts->help) {
    std::fputs(ha_ping::usage(), stdout);
    return 0;
  }
  if (opts->version) {
    std::printf("ha-ping %s\n", NCCL_HA_VERSION_STRING);
    return 0;
  }
  if (opts->list) return ha_ping::run_list(*opts);
  net::DiscoveryOptions disc;
  disc.filter = net::DeviceFilter::from_env();
  disc.include_inactive = true;  // a DOWN port is a rail to report, not to skip
  auto rails = select_rails(net::discover_ports(disc), *opts);
  if (!rails) {
    std::fprintf(stderr, "ha-ping: %s\n", rails.error().message.c_str());
    return 2;
  }
  if (rails->empty()) std::fprintf(stderr, "ha-ping: no RDMA ports found on this host\n");
  for (const auto& p : *rails)
    std::fprintf(stderr, "ha-ping: rail %s %s %s %s mtu %d speed %d Mbps pci %s numa %d\n", p.id().c_str(),
                 p.netdev.c_str(), net::link_layer_name(p.link_layer), net::port_state_name(p.state),
                 net::mtu_bytes(p.active_mtu), p.speed_mbps, p.pci_path.empty() ? "-" : p.pci_path.c_str(), p.numa_node);

  std::FILE* json_file = nullptr;
  if (!opts->json_file.empty() && !(json_file = std::fopen(opts->json_file.c_str(), "w"))) {
    std::fprintf(stderr, "ha-ping: cannot write %s\n", opts->json_file.c_str());
    return 2;
  }
  int worst = 0;
  // Every report (the client's one, or one per served client) as it is complete.
  auto emit = [&](const ha_ping::Report& report) {
    if (opts->json)
      ha_ping::print_json(report, stdout);
    else
      ha_ping::print_text(report, stdout);
    std::fflush(stdout);
    if (json_file) {
      ha_ping::print_json(report, json_file);
      std::fflush(json_file);
    }
    worst = std::max(worst, ha_ping::exit_code(report));
  };

  reactor::Reactor reactor;
  reactor.start();
  std::promise<void> finished;
  if (!opts->peer.empty()) {
    ha_ping::Report report;
    {
      ha_ping::Session session(reactor, *opts, std::move(rails).value());
      reactor.spawn("ha-ping session", session.run(report), [&](std::exception_ptr) { finished.set_value(); });
      finished.get_future().wait();
    }
    reactor.stop();
    emit(report);
  } else {
    reactor.spawn("ha-ping server", ha_ping::serve(reactor, *opts, std::move(rails).value(), emit),
                  [&](std::exception_ptr) { finished.set_value(); });
    finished.get_future().wait();
    reactor.stop();
  }
  if (json_file && std::fclose(json_file) != 0) {
    std::fprintf(stderr, "ha-ping: cannot write %s\n", opts->json_file.c_str());
    return 2;
  }
  return worst;
}
