// ha-net-driver: drives an NCCL net plugin between two ranks the way NCCL's proxy does and
// verifies what it does. See README.md in this directory for the call sequence and the report.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <chrono>
#include <thread>

#include <nccl_ha/version.hpp>

#include "churn.hpp"
#include "fault.hpp"
#include "logger.hpp"
#include "mgmt.hpp"
#include "options.hpp"
#include "plugin.hpp"
#include "report.hpp"
#include "session.hpp"
#include "sysinfo.hpp"
#include "traffic.hpp"

namespace hnd {
namespace {

// For the watchdog, which runs while the main thread is stuck inside the plugin.
Report* g_report = nullptr;
std::string g_json;

[[noreturn]] void hang_exit(const char* entry, double timeout_s) {
  std::string msg = strf("timeout: plugin call %s did not return within %g s (phase '%s')", entry, timeout_s,
                         g_report ? g_report->phase.c_str() : "?");
  log::warn("%s", msg.c_str());
  if (!g_json.empty()) {
    if (std::FILE* f = std::fopen(g_json.c_str(), "w")) {
      std::fprintf(f, "{\"tool\":\"ha-net-driver\",\"schema\":1,\"rank\":%d,\"ok\":false,\"exit_code\":%d,"
                   "\"result\":\"timeout\",\"errors\":[\"plugin call %s did not return within %g s\"]}\n",
                   g_report ? g_report->rank : -1, static_cast<int>(Fail::timeout), entry, timeout_s);
      std::fclose(f);
    }
  }
  std::_Exit(static_cast<int>(Fail::timeout));
}

double g_timeout = 60;
void watchdog_fired(const char* entry) { hang_exit(entry, g_timeout); }

using wire::field;

// The peer's wall clock relative to ours, NTP-style over the management connection: rank 0 sends
// probes, rank 1 answers each with its wall clock; the round trip with the least delay gives the
// offset (peer - here, +- rtt/2). Rank 0 then tells rank 1 the result.
ClockSync sync_clocks(Mgmt& mgmt, int rank, double timeout_s) {
  constexpr int kProbes = 8;
  ClockSync best{0, -1};
  if (rank == 0) {
    for (int i = 0; i < kProbes; ++i) {
      std::int64_t t0 = wall_us();
      mgmt.send(MsgType::clock, "probe");
      std::string r = mgmt.recv(MsgType::clock, Deadline(timeout_s), "a clock probe reply");
      std::int64_t t2 = wall_us();
      const auto t1_or = wire::parse_clock_reply(r);
      if (!t1_or) fail(Fail::peer, "management protocol: bad clock reply '" + r + "'");
      const std::int64_t t1 = *t1_or;
      double rtt = static_cast<double>(t2 - t0) / 1e3;
      if (best.rtt_ms < 0 || rtt < best.rtt_ms) best = {static_cast<double>(t1 - (t0 + t2) / 2) / 1e3, rtt};
    }
    mgmt.send(MsgType::clock, strf("result %.3f %.3f", -best.offset_ms, best.rtt_ms));
    return best;
  }
  for (;;) {
    std::string m = mgmt.recv(MsgType::clock, Deadline(timeout_s), "a clock probe");
    if (m == "probe") {
      mgmt.send(MsgType::clock, std::to_string(wall_us()));
      continue;
    }
    const auto result = wire::parse_clock_result(m);
    if (!result) fail(Fail::peer, "management protocol: bad clock message '" + m + "'");
    return ClockSync{result->offset_ms, result->rtt_ms};
  }
}

// NCCL-relevant sanity of one device's properties: (check name, ok, detail) triples.
std::vector<Check> property_checks(const Properties& p, int version) {
  std::vector<Check> c;
  c.push_back({"name is non-empty", !p.name.empty(), ""});
  c.push_back({"speed > 0", p.speed > 0, strf("speed=%d", p.speed)});
  c.push_back({"maxComms > 0", p.max_comms > 0, strf("maxComms=%d", p.max_comms)});
  c.push_back({"maxRecvs >= 1", p.max_recvs >= 1, strf("maxRecvs=%d", p.max_recvs)});
  c.push_back({"ptrSupport has NCCL_PTR_HOST", (p.ptr_support & NCCL_PTR_HOST) != 0, strf("ptrSupport=0x%x", p.ptr_support)});
  if (p.net_device_type) {
    bool ok = *p.net_device_type == NCCL_NET_DEVICE_HOST ||
              (*p.net_device_type == NCCL_NET_DEVICE_UNPACK && p.net_device_version == NCCL_NET_DEVICE_UNPACK_VERSION);
    c.push_back({"netDeviceType HOST or UNPACK/0x7", ok,
                 strf("netDeviceType=%d netDeviceVersion=%d", *p.net_device_type, p.net_device_version.value_or(-1))});
  }
  if (p.max_p2p_bytes) {
    auto in_range = [](std::size_t v) { return v > 0 && v <= static_cast<std::size_t>(NCCL_MAX_NET_SIZE_BYTES); };
    c.push_back({"maxP2pBytes in (0, 1 TiB]", in_range(*p.max_p2p_bytes), strf("maxP2pBytes=%zu", *p.max_p2p_bytes)});
    c.push_back({"maxCollBytes in (0, 1 TiB]", in_range(p.max_coll_bytes.value_or(0)),
                 strf("maxCollBytes=%zu", p.max_coll_bytes.value_or(0))});
  }
  if (p.vndevs) {
    int cap = version >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12 : NCCL_NET_MAX_DEVS_PER_NIC_V11;
    c.push_back({"vProps.ndevs in [1, max devs per NIC]", *p.vndevs >= 1 && *p.vndevs <= cap, strf("ndevs=%d", *p.vndevs)});
  }
  return c;
}

// --fault dead-rail / finalize-open leave QPs that may still be destroyed long after finalize;
// so may a port fault from outside (the test bed's), for which a test gives --linger: then the
// checks of what the plugin released apply after the linger, not at finalize.
bool destruction_may_outlive_finalize(const Options& o) {
  const FaultScenario* f = find_fault(o.fault);
  return (f && f->background) || o.linger_s > 0;
}
constexpr int kBackgroundBoundS = 60;  // a QP on a dead Soft-RoCE port: up to ~30 s seen (rxe, link down)

// Like NCCL at the end: finalize (v11+), then check that the plugin released what it held, then
// dlclose and give a leftover plugin thread the chance to crash here rather than inside NCCL.
void finish(const Options& o, Report& rep, Plugin& net) {
  note_phase(o, rep, "finalize");
  if (net.has_finalize()) check(net.finalize(), "finalize");
  // finalize returns within its bound; QPs on a dead port that the kernel is slow to destroy are
  // destroyed in the background after it (the plugin WARNs how many): their devices' fds close
  // then. Wait for that (bounded) so that the check below tells a slow kernel from a leak.
  // Only while the plugin still has threads (its background reaper): fds held without any are a leak.
  // Without finalize (API < 11) the plugin keeps its devices and progress thread until the process
  // ends: nothing to wait for (the check is informational then).
  const std::int64_t finalized_at = now_ns();
  wait_fds_at_most(rep.before_init->fds, 1000);
  if (net.has_finalize() && !destruction_may_outlive_finalize(o) && o.release_checks)
    for (Deadline d(kBackgroundBoundS); count_fds() > rep.before_init->fds && count_threads() > rep.before_init->threads &&
                                        !d.expired();)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  rep.finalize_settle_ms = static_cast<double>(now_ns() - finalized_at) / 1e6;
  rep.after_close = snapshot(true);
  rep.calls = net.stats();
  if (o.dlclose) {
    rep.phase = "dlclose";
    net.unload();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (o.linger_s > 0 && rep.before_init) {  // the plugin's background threads may still run
      note_phase(o, rep, "linger");
      const std::int64_t t0 = now_ns();
      for (Deadline d(o.linger_s); count_threads() > rep.before_init->threads && !d.expired();)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      rep.linger_ms = static_cast<double>(now_ns() - t0) / 1e6;
    }
    rep.after_dlclose = snapshot(o.linger_s > 0);
  }
  note_phase(o, rep, "done");
}

// 1. Management connection, then the plugin (so a load failure reaches the peer as an abort).
void connect_and_load(const Options& o, Report& rep, std::optional<Mgmt>& mgmt, std::unique_ptr<Plugin>& net) {
  rep.phase = "management connect";
  if (o.rank == 0) {
    log::info("waiting for rank 1 on port %u", static_cast<unsigned>(o.listen_port));
    if (o.token.empty())
      log::warn("no --token (nor %s): any process that reaches port %u first can be rank 1", kTokenEnv,
                static_cast<unsigned>(o.listen_port));
    mgmt.emplace(Mgmt::accept_peer(o.bind, o.listen_port, o.port_file, o.timeout_s, o.token));
    rep.peer = mgmt->peer_address();
  } else {
    mgmt.emplace(Mgmt::connect_peer(o.peer_host, o.peer_port, o.timeout_s, o.token));
    rep.peer = strf("%s:%u", o.peer_host.c_str(), static_cast<unsigned>(o.peer_port));
  }
  rep.phase = "load";
  net = Plugin::load(o.plugin, o.api);
  rep.plugin_path = net->path();
  rep.api = net->version();
  rep.table_name = net->table_name();
  rep.exported = net->exported_versions();
  log::info("loaded %s: using ncclNetPlugin_v%d (net \"%s\")", rep.plugin_path.c_str(), rep.api, rep.table_name.c_str());
}

// 2. Hello: both ranks must run the same test; rank 0 chooses the commId (v11+ init), returned.
std::uint64_t hello(const Options& o, Report& rep, Mgmt& mgmt) {
  rep.phase = "hello";
  std::uint64_t comm_id = std::random_device{}();
  comm_id = (comm_id << 32) ^ std::random_device{}();
  mgmt.send(MsgType::hello, strf("rank=%d\napi=%d\nname=%s\ncommid=%llu\nparams=%s\n", o.rank, rep.api,
                                 rep.table_name.c_str(), static_cast<unsigned long long>(comm_id), rep.params.c_str()));
  std::string hello = mgmt.recv(MsgType::hello, Deadline(o.timeout_s), "hello");
  if (field(hello, "rank") != std::to_string(1 - o.rank))
    fail(Fail::usage, "both processes use --rank " + std::to_string(o.rank));
  if (field(hello, "params") != rep.params)
    fail(Fail::usage, "ranks disagree on the test parameters: here '" + rep.params + "', peer '" + field(hello, "params") + "'");
  if (field(hello, "api") != std::to_string(rep.api) || field(hello, "name") != rep.table_name)
    log::warn("peer uses api v%s net \"%s\", we use v%d \"%s\"", field(hello, "api").c_str(), field(hello, "name").c_str(),
              rep.api, rep.table_name.c_str());
  if (o.rank == 1) comm_id = std::strtoull(field(hello, "commid").c_str(), nullptr, 10);
  rep.clock = sync_clocks(mgmt, o.rank, o.timeout_s);
  return comm_id;
}

// 3. init and devices; the number of devices.
int init_devices(const Options& o, Report& rep, Plugin& net, std::uint64_t comm_id) {
  Plugin::start_watchdog(o.timeout_s, &watchdog_fired);
  const bool verbs = true;
  rep.before_init = snapshot(verbs);
  rep.phase = "init";
  InitArgs ia{log::logger(), prof::callback(), comm_id, o.traffic_class};
  check(net.init(ia), "init");
  rep.phase = "devices";
  int ndev = 0;
  check(net.devices(&ndev), "devices");
  rep.ndev = ndev;
  if (ndev <= 0) {
    if (net.has_finalize()) check(net.finalize(), "finalize");  // NCCL finalizes a rejected plugin
    fail(Fail::plugin, strf("devices() reported %d devices (NCCL disables such a plugin)", ndev));
  }
  return ndev;
}

// Like NCCL's topology detection, read every device; the --dev one is checked item by item and
// returned.
Properties read_properties(const Options& o, Report& rep, Plugin& net, int ndev) {
  Properties props;
  for (int d = 0; d < ndev; ++d) {
    Properties p;
    check(net.getProperties(d, &p), strf("getProperties(%d)", d).c_str());
    rep.all_props.push_back(p);
    std::vector<Check> checks = property_checks(p, rep.api);
    if (d == o.dev) {
      props = p;
      for (const auto& c : checks) rep.check(c.name, c.ok, c.detail);
    } else {
      std::string bad;
      for (const auto& c : checks)
        if (!c.ok) bad += (bad.empty() ? "" : "; ") + c.name + " (" + c.detail + ")";
      rep.check(strf("device %d properties sane", d), bad.empty(), bad);
    }
  }
  return props;
}

// --fuse: the virtual device of those devices (makeVDevice, as NCCL asks for the ports it merges),
// checked as net_ib reports one - its vProps name the members in order, its speed is theirs
// summed - and the usual property checks. Its number; a refusal ends the run (exit 3).
int fuse_devices(const Options& o, Report& rep, Plugin& net, int ndev) {
  auto joined = [](const std::vector<int>& devs) {
    std::string s;
    for (int d : devs) s += (s.empty() ? "" : ",") + std::to_string(d);
    return s;
  };
  const std::string list = joined(o.fuse);
  for (int d : o.fuse)
    if (d >= ndev) fail(Fail::usage, strf("--fuse: device %d but the plugin has %d device(s)", d, ndev));
  if (!net.has_makeVDevice()) fail(Fail::usage, strf("--fuse %s: the v%d table has no makeVDevice", list.c_str(), rep.api));
  int vd = -1;
  check(net.makeVDevice(o.fuse, &vd), strf("makeVDevice(%s)", list.c_str()).c_str());
  Properties p;
  check(net.getProperties(vd, &p), strf("getProperties(%d) of the virtual device", vd).c_str());
  for (const auto& c : property_checks(p, rep.api)) rep.check("virtual device: " + c.name, c.ok, c.detail);
  rep.check("virtual device: vProps are the fused devices", p.vdevs && *p.vdevs == o.fuse,
            strf("device %d: vProps.devs [%s], fused [%s]", vd, joined(p.vdevs.value_or(std::vector<int>{})).c_str(),
                 list.c_str()));
  int sum = 0;
  for (int d : o.fuse) sum += rep.all_props[static_cast<std::size_t>(d)].speed;
  rep.check("virtual device: speed is the members' sum", p.speed == sum,
            strf("device %d (%s): %d Mbps, members %d", vd, p.name.c_str(), p.speed, sum));
  log::info("fused devices %s into device %d (%s, %d Mbps)", list.c_str(), vd, p.name.c_str(), p.speed);
  rep.props = p;
  rep.dev = vd;
  return vd;
}

// Limits the traffic must respect; the largest message.
std::size_t check_limits(const Options& o, const Report& rep, const Properties& props) {
  std::size_t max_size = 0;
  for (auto s : o.sizes) max_size = std::max(max_size, s);
  std::size_t limit = props.max_p2p_bytes ? *props.max_p2p_bytes : static_cast<std::size_t>(NCCL_HA_NET_LEGACY_MAX_P2P_BYTES);
  if (max_size > limit) fail(Fail::usage, strf("largest --sizes entry %zu exceeds the plugin's limit %zu", max_size, limit));
  if (o.group > std::max(1, props.max_recvs))
    fail(Fail::usage, strf("--group %d exceeds the plugin's maxRecvs %d", o.group, props.max_recvs));
  if (o.optional_recv && rep.api < 9)
    log::info("--optional-recv ignored: v%d predates NCCL_NET_OPTIONAL_RECV_COMPLETION (NCCL's shim clears it)", rep.api);
  if (o.inflight > NCCL_NET_MAX_REQUESTS * std::max(1, o.group))
    log::warn("--inflight %d exceeds what NCCL keeps in flight per comm (%d)", o.inflight, NCCL_NET_MAX_REQUESTS * o.group);
  return max_size;
}

// --check-resources, the end of the comparison: the stream is over, the ring still open. Verbs
// objects of closed churn comms may be destroyed asynchronously: re-sampled until the counts are
// back, at most 60 s (and a third of --timeout, which bounds the peer's wait at the next barrier).
void resources_after_stream(const Options& o, Report& rep) {
  rep.phase = "resources after the stream";
  rep.stream_end_first = snapshot(true);
  rep.stream_end = rep.stream_end_first;
  if (!same_counts(*rep.stream_end, *rep.after_connect))
    rep.stream_end = snapshot_until_same(*rep.after_connect, static_cast<int>(std::min(60.0, o.timeout_s / 3) * 1000),
                                         &rep.stream_settle_ms);
}

// 5. The data phases on the ring: integrity (with the churn and the resource snapshots around it),
// ping-pong, bandwidth.
void data_phases(const Options& o, Report& rep, Mgmt& mgmt, DataCtx& dc) {
  if (o.messages > 0) {
    rep.phase = "integrity";
    mgmt.barrier("integrity", o.timeout_s);
    rep.timeline.start(o.timeout_s);
    rep.phase_start_unix_ms = rep.timeline.start_unix_ms;
    note_phase(o, rep, "integrity", *rep.phase_start_unix_ms);
    run_integrity(dc, rep.integrity);
  }
  if (rep.after_connect) resources_after_stream(o, rep);
  if (o.pingpong) {
    note_phase(o, rep, "pingpong");
    rep.latency = run_pingpong(dc);
  }
  if (o.bw) {
    note_phase(o, rep, "bandwidth");
    rep.bandwidth = run_bw(dc);
  }
}

// --dmabuf: the ring's memfd buffers registered as NCCL registers GPU memory on a dma-buf node
// (regMrDmaBuf, NCCL_PTR_CUDA, offset 0), where the device offers NCCL_PTR_DMABUF.
void register_dmabuf(Plugin& net, int dev, const Link& link, const Buffers& buf, void** smh, void** rmh) {
  Properties p;
  check(net.getProperties(dev, &p), strf("getProperties(%d)", dev).c_str());
  if (!(p.ptr_support & NCCL_PTR_DMABUF) || !net.has_regMrDmaBuf())
    fail(Fail::usage, strf("--dmabuf: device %d does not offer NCCL_PTR_DMABUF (ptrSupport 0x%x%s)", dev, p.ptr_support,
                           net.has_regMrDmaBuf() ? "" : ", no regMrDmaBuf"));
  check(net.regMrDmaBuf(link.send, buf.send_base(), buf.region_bytes(), NCCL_PTR_CUDA, 0, buf.send_fd(), smh),
        "regMrDmaBuf(send comm)");
  check(net.regMrDmaBuf(link.recv, buf.recv_base(), buf.region_bytes(), NCCL_PTR_CUDA, 0, buf.recv_fd(), rmh),
        "regMrDmaBuf(recv comm)");
  log::info("ring: buffers registered with regMrDmaBuf (memfds %d, %d, NCCL_PTR_CUDA)", buf.send_fd(), buf.recv_fd());
}

// 4.-6. The ring (one send comm to the peer, one recv comm from it), its buffers (--inflight
// slots of the largest size, registered on their comm), the data phases, and the clean close.
void run_ring(const Options& o, Report& rep, Mgmt& mgmt, Plugin& net, std::size_t max_size) {
  note_phase(o, rep, "connect");
  mgmt.barrier("connect", o.timeout_s);
  std::vector<Link> ring = open_links(net, mgmt, o.dev, 1, o.timeout_s, &rep.connect);
  Link& link = ring[0];

  rep.phase = "regMr";
  Buffers buf(max_size, std::max(o.inflight, o.lat_ahead + 1), o.dmabuf);
  if (rep.api <= 7 && buf.region_bytes() > static_cast<std::size_t>(INT32_MAX))
    fail(Fail::usage, strf("v%d regMr takes an int size; %zu bytes of buffers do not fit (lower --inflight or --sizes)",
                           rep.api, buf.region_bytes()));
  void* smh = nullptr;
  void* rmh = nullptr;
  if (o.dmabuf) {
    register_dmabuf(net, o.dev, link, buf, &smh, &rmh);
  } else {
    check(net.regMr(link.send, buf.send_base(), buf.region_bytes(), NCCL_PTR_HOST, &smh), "regMr(send comm)");
    check(net.regMr(link.recv, buf.recv_base(), buf.region_bytes(), NCCL_PTR_HOST, &rmh), "regMr(recv comm)");
  }

  rep.ring_send_comm = strf("%p", link.send);
  rep.ring_recv_comm = strf("%p", link.recv);
  log::info("ring: send comm %s, recv comm %s on device %d", rep.ring_send_comm.c_str(), rep.ring_recv_comm.c_str(), o.dev);
  std::unique_ptr<Churn> churn;
  if (o.churn > 0) churn = std::make_unique<Churn>(net, mgmt, o, o.rank, rep.churn);
  if (o.check_resources) {
    // The start of the comparison: the ring connected and registered, its background setup done
    // (counts unchanged for 1 s), everything the phase will hold allocated (timeline bins, churn pages).
    rep.phase = "resources after connect";
    rep.timeline.reserve(o.timeout_s);
    rep.after_connect = settled_snapshot(1000, 15000);
  }

  DataCtx dc{net, mgmt, link.send, link.recv, buf, smh, rmh, o.rank, o, true, nullptr, {}, &rep.timeline,
             &rep.peer_abort, &rep.idle_windows, churn.get()};
  data_phases(o, rep, mgmt, dc);

  // 6. Clean close, like NCCL's free path: deregMr, then closeSend/closeRecv.
  note_phase(o, rep, "close");
  mgmt.barrier("close", o.timeout_s);
  if (o.close_late_s > 0) {  // the peer closes now; this rank makes no call until its own close
    log::info("closing %.1f s after the peer", o.close_late_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(o.close_late_s));
  }
  check(net.deregMr(link.send, smh), "deregMr(send comm)");
  check(net.deregMr(link.recv, rmh), "deregMr(recv comm)");
  close_link(net, link);
}

// A --fault scenario instead of the ring and the data phases, then the usual end.
void fault_phase(const Options& o, Report& rep, Mgmt& mgmt, Plugin& net) {
  rep.phase = "fault " + o.fault;
  run_fault(o, net, mgmt, rep);
  finish(o, rep, net);
}

void run(const Options& given, Report& rep, std::optional<Mgmt>& mgmt, std::unique_ptr<Plugin>& net) {
  Options o = given;  // --fuse: the run's device becomes the virtual one
  connect_and_load(o, rep, mgmt, net);
  const std::uint64_t comm_id = hello(o, rep, *mgmt);
  const int ndev = init_devices(o, rep, *net, comm_id);

  rep.phase = "getProperties";
  const FaultScenario* fault = find_fault(o.fault);
  const bool bad_dev = fault && fault->bad_dev;
  if (bad_dev && o.dev < ndev)
    fail(Fail::usage, strf("--fault %s needs an out-of-range --dev (the plugin has %d device(s))", fault->name, ndev));
  if (o.dev >= ndev && !bad_dev) fail(Fail::usage, strf("--dev %d but the plugin has %d device(s)", o.dev, ndev));
  if (o.churn_dev >= ndev) fail(Fail::usage, strf("--churn-dev %d but the plugin has %d device(s)", o.churn_dev, ndev));
  Properties props = read_properties(o, rep, *net, ndev);
  if (!bad_dev) rep.props = props;
  if (net->has_setNetAttr()) check(net->setNetAttr(), "setNetAttr");
  if (bad_dev) return fault_phase(o, rep, *mgmt, *net);  // no limits from a --dev that does not exist
  if (!o.fuse.empty()) {
    if (!o.fault.empty()) fail(Fail::usage, "--fuse and --fault: a fault scenario runs on --dev");
    o.dev = fuse_devices(o, rep, *net, ndev);
    props = *rep.props;
  }
  const std::size_t max_size = check_limits(o, rep, props);
  if (!o.fault.empty()) return fault_phase(o, rep, *mgmt, *net);

  run_ring(o, rep, *mgmt, *net, max_size);
  if (o.comms > 0) {
    note_phase(o, rep, "comms test");
    rep.comms = run_comms_test(*net, *mgmt, o, o.rank, [&](const char* phase) { note_phase(o, rep, phase); });
  }
  finish(o, rep, *net);
}

// Local verdict from everything measured (fatal errors were recorded already).
void evaluate(const Options& o, Report& rep) {
  Integrity all = rep.integrity;
  for (const auto& l : rep.latency) all.add(l.counters);
  for (const auto& b : rep.bandwidth) all.add(b.counters);
  if (all.ran)
    rep.check("received data and sizes verified", !all.failed(),
              strf("%llu mismatched messages (%llu bytes), %llu size errors, %llu overruns",
                   static_cast<unsigned long long>(all.mismatches), static_cast<unsigned long long>(all.mismatched_bytes),
                   static_cast<unsigned long long>(all.size_errors), static_cast<unsigned long long>(all.overruns)));
  if (rep.comms.ran) {
    const auto want = static_cast<std::uint64_t>(rep.comms.n) * static_cast<std::uint64_t>(o.comms_rounds);
    rep.check(o.comms_rounds > 1 ? strf("comms test: every comm carried its %d verified messages", o.comms_rounds)
                                 : std::string("comms test: every comm carried a verified message"),
              rep.comms.messages_ok == want,
              strf("%llu of %llu", static_cast<unsigned long long>(rep.comms.messages_ok),
                   static_cast<unsigned long long>(want)));
    rep.check("comms test: fd count returned after closing", rep.comms.fds_returned,
              strf("%d before, %d after close (waited %.0f ms, bound 10 s)", rep.comms.before.fds,
                   rep.comms.after_close.fds, rep.comms.fds_wait_ms));
  }
  // --fault dead-rail / finalize-open, or --linger: QPs on a dead port, or whose peer vanished
  // with writes in flight, may still be destroyed in the background after finalize (their
  // device's fd stays open, the plugin's reaper threads run): informational here; with --linger
  // the same checks apply after the linger instead.
  const bool background = destruction_may_outlive_finalize(o);
  auto resource_check = [&rep, &o, background](const std::string& name, bool ok, const std::string& detail) {
    if (background) rep.checks.push_back({name + " (informational: QPs on the dead port are destroyed in the background)", true, detail});
    else if (!o.release_checks) rep.checks.push_back({name + " (informational: --no-release-checks)", true, detail});
    else rep.check(name, ok, detail);
  };
  if (rep.before_init && rep.after_close) {
    const Snapshot& b = *rep.before_init;
    const Snapshot& a = *rep.after_close;
    std::string detail = strf("%d before init, %d after close%s", b.fds, a.fds, rep.api >= 11 ? " and finalize" : "");
    if (rep.finalize_settle_ms > 1000)
      detail += strf(" (%.0f ms after finalize returned: its QPs were destroyed in the background)", rep.finalize_settle_ms);
    if (rep.api >= 11) resource_check("fds returned after finalize", a.fds == b.fds, detail);
    else rep.checks.push_back({"fds after close (v<11 has no finalize: informational)", true, detail});
    if (b.mrs && a.mrs) {
      std::string md = strf("%d before init, %d after close", *b.mrs, *a.mrs);
      if (rep.api >= 11) rep.check("MRs released after finalize", *a.mrs <= *b.mrs, md);
      else rep.check("MRs released after deregMr and close", *a.mrs <= *b.mrs, md);
    }
    if (b.qps && a.qps && rep.api >= 11) resource_check("QPs destroyed after finalize", *a.qps <= *b.qps, strf("%d -> %d", *b.qps, *a.qps));
  }
  if (rep.churn.ran) {
    rep.check("churn: every pair opened, carried a verified message and closed",
              rep.churn.closed == static_cast<std::uint64_t>(rep.churn.target) &&
                  rep.churn.messages_ok == static_cast<std::uint64_t>(rep.churn.target),
              strf("%llu of %d pairs closed, %llu verified messages received, %llu bad",
                   static_cast<unsigned long long>(rep.churn.closed), rep.churn.target,
                   static_cast<unsigned long long>(rep.churn.messages_ok),
                   static_cast<unsigned long long>(rep.churn.bad_messages)));
  }
  if (rep.after_connect && rep.stream_end) {
    const Snapshot& b = *rep.after_connect;
    const Snapshot& e = *rep.stream_end;
    const std::string when = strf(" after connect, %s after the stream", rep.stream_settle_ms > 0
                                      ? strf("%.0f ms", rep.stream_settle_ms).c_str() : "at once");
    rep.check("fds after the stream equal the start", e.fds == b.fds, strf("%d -> %d", b.fds, e.fds) + when);
    rep.check("threads after the stream equal the start", e.threads == b.threads,
              strf("%d -> %d", b.threads, e.threads) + when);
    if (b.qps && e.qps) rep.check("QPs after the stream equal the start", *e.qps == *b.qps, strf("%d -> %d", *b.qps, *e.qps) + when);
    if (b.mrs && e.mrs) rep.check("MRs after the stream equal the start", *e.mrs == *b.mrs, strf("%d -> %d", *b.mrs, *e.mrs) + when);
    rep.checks.push_back({"RSS after the stream (informational)", true,
                          strf("%lld KiB -> %lld KiB (%+lld KiB)", static_cast<long long>(b.rss_kib),
                               static_cast<long long>(e.rss_kib), static_cast<long long>(e.rss_kib - b.rss_kib))});
  }
  if (rep.before_init && rep.after_dlclose)
    resource_check("no plugin threads left after dlclose", rep.after_dlclose->threads <= rep.before_init->threads,
                   strf("%d threads before init, %d after dlclose", rep.before_init->threads, rep.after_dlclose->threads));
  if (rep.linger_ms && rep.before_init && rep.after_dlclose) {
    const Snapshot& b = *rep.before_init;
    const Snapshot& a = *rep.after_dlclose;
    const bool qps_ok = !b.qps || !a.qps || *a.qps <= *b.qps;
    rep.check("threads, fds and QPs back after the linger", a.threads <= b.threads && a.fds <= b.fds && qps_ok,
              strf("after %.0f ms: threads %d -> %d, fds %d -> %d, QPs %d -> %d", *rep.linger_ms, b.threads, a.threads,
                   b.fds, a.fds, b.qps.value_or(-1), a.qps.value_or(-1)));
  }
}

}  // namespace
}  // namespace hnd

int main(int argc, char** argv) {
  using namespace hnd;
  Options o;
  try {
    o = parse_options(argc, argv);
    if (!o.help && !o.version) check_fault_options(o);
  } catch (const DriverError& e) {
    std::fprintf(stderr, "ha-net-driver: %s\n", e.what());
    return static_cast<int>(Fail::usage);
  }
  if (o.help) {
    std::fputs(usage(fault_usage()).c_str(), stdout);
    return 0;
  }
  if (o.version) {
    std::printf("ha-net-driver %s\n", NCCL_HA_VERSION_STRING);
    return 0;
  }
  log::configure(o.rank);
  ::signal(SIGPIPE, SIG_IGN);  // a peer that went away must show up as an error, not kill us
  Report rep;
  rep.rank = o.rank;
  rep.dev = o.dev;
  rep.plugin_path = o.plugin;
  rep.params = shared_params(o);
  g_report = &rep;
  g_json = o.json;
  g_timeout = o.timeout_s;

  std::optional<Mgmt> mgmt;
  std::unique_ptr<Plugin> net;
  bool aborted = false;
  try {
    run(o, rep, mgmt, net);
  } catch (const DriverError& e) {
    rep.timeline.finish(now_ns());
    if (e.code >= 0) rep.plugin_error = PluginCallError{e.call, e.code, e.unix_ms, rep.phase};
    rep.add_failure(e.kind, strf("%s: %s", rep.phase.c_str(), e.what()));
    log::warn("%s: %s", fail_name(e.kind), e.what());
    if (mgmt && !rep.peer_gone) mgmt->send_abort(strf("rank %d: %s", o.rank, e.what()));
    aborted = true;
  }
  if (net && !rep.after_close) rep.calls = net->stats();
  rep.plugin_warnings = log::plugin_warnings();
  rep.plugin_warning_lines = log::plugin_warning_lines();
  rep.profiler = prof::summary();
  evaluate(o, rep);

  // Exchange verdicts so each rank's exit status covers both directions.
  if (!aborted && mgmt && !rep.peer_gone) {
    try {
      std::string mine = strf("ok=%d\nresult=%s\n", rep.result == Fail::ok ? 1 : 0, fail_name(rep.result));
      if (!rep.errors.empty()) mine += "error=" + rep.errors.front() + "\n";
      mgmt->send(MsgType::result, mine);
      std::string theirs = mgmt->recv(MsgType::result, Deadline(o.timeout_s), "the peer's result");
      rep.peer_ok = field(theirs, "ok") == "1";
      rep.peer_detail = field(theirs, "result");
      if (!field(theirs, "error").empty()) rep.peer_detail += ": " + field(theirs, "error");
      if (!*rep.peer_ok) rep.add_failure(Fail::verify, "peer reported failure: " + rep.peer_detail);
    } catch (const DriverError& e) {
      rep.add_failure(e.kind, strf("result exchange: %s", e.what()));
    }
  }
  print_summary(rep);
  if (!o.json.empty()) write_json(rep, o.json);
  if (!o.phase_file.empty()) note_phase(o, rep, strf("exit-%d", static_cast<int>(rep.result)));
  std::fflush(stdout);
  std::fflush(stderr);
  int code = static_cast<int>(rep.result);
  // A plugin left loaded may own threads; do not run its static destructors racing them.
  if (net && net->loaded()) std::_Exit(code);
  return code;
}
