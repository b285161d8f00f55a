#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <span>

#include "logger.hpp"
#include "report_json.hpp"

namespace hnd {

void Integrity::add(const Integrity& o) {
  static constexpr std::uint64_t Integrity::*kSummed[] = {
      &Integrity::messages_sent,        &Integrity::bytes_sent,     &Integrity::messages_received,
      &Integrity::bytes_received,       &Integrity::mismatches,     &Integrity::mismatched_bytes,
      &Integrity::size_errors,          &Integrity::overruns,       &Integrity::send_size_mismatches,
      &Integrity::optional_size_mismatches, &Integrity::isend_retries, &Integrity::irecv_retries};
  ran = ran || o.ran;
  for (const auto field : kSummed) this->*field += o.*field;
  seconds += o.seconds;
}

void Timeline::reserve(double bound_s) {
  const auto n = std::min<std::size_t>(kMaxBins, static_cast<std::size_t>(bound_s * 1000.0 / kBinMs) + 2);
  for (Dir* d : {&recv, &send}) {
    d->bytes.assign(n, 0);  // written, so resident now
    d->msgs.assign(n, 0);
  }
}

void Timeline::start(double bound_s) {
  reserve(bound_s);  // reuses the bins of an earlier reserve(): no allocation here then
  for (Dir* d : {&recv, &send}) {
    d->total_msgs = d->total_bytes = 0;
    d->first_ns = d->last_ns = d->max_gap_ns = d->max_gap_at_ns = 0;
  }
  truncated = false;
  end_ns = 0;
  start_ns = now_ns();
  start_unix_ms = wall_ms();
  ran = true;
}

void Timeline::add(Dir& d, std::int64_t t_ns, std::uint64_t msgs, std::uint64_t bytes) {
  if (d.last_ns != 0) {
    if (t_ns - d.last_ns > d.max_gap_ns) {
      d.max_gap_ns = t_ns - d.last_ns;
      d.max_gap_at_ns = d.last_ns - start_ns;
    }
  } else {
    d.first_ns = t_ns;
  }
  d.last_ns = t_ns;
  d.total_msgs += msgs;
  d.total_bytes += bytes;
  const auto bin = static_cast<std::size_t>(std::max<std::int64_t>(0, t_ns - start_ns) / (kBinMs * 1000000LL));
  if (bin < d.bytes.size()) {
    d.bytes[bin] += bytes;
    d.msgs[bin] += static_cast<std::uint32_t>(msgs);
  } else {
    truncated = true;
  }
}

void Report::add_failure(Fail kind, const std::string& msg) {
  errors.push_back(msg);
  if (result == Fail::ok || (result == Fail::verify && kind != Fail::verify)) result = kind;
}

void Report::check(const std::string& name, bool ok, const std::string& detail) {
  checks.push_back({name, ok, detail});
  if (!ok) add_failure(Fail::verify, "check failed: " + name + (detail.empty() ? "" : " (" + detail + ")"));
}

namespace {

using Json = nccl_ha::net::JsonWriter;
using ha_tools::members;
using ha_tools::object;
using ha_tools::object_or_null;
using ha_tools::objects;

// ---------------------------------------------------------------- JSON: one to_json per part
// Each writes its part's value (an object, or null for a part that did not run) where the
// writer stands: after a key, or as an array element.

void to_json(Json& j, const Integrity& s) {
  j.open('{');
  members(j, "ran", s.ran, "messages_sent", s.messages_sent, "bytes_sent", s.bytes_sent,
          "messages_received", s.messages_received, "bytes_received", s.bytes_received, "mismatches", s.mismatches,
          "mismatched_bytes", s.mismatched_bytes, "size_errors", s.size_errors, "overruns", s.overruns,
          "send_size_mismatches", s.send_size_mismatches, "optional_size_mismatches", s.optional_size_mismatches,
          "isend_retries", s.isend_retries, "irecv_retries", s.irecv_retries, "flush", s.flush, "flushes", s.flushes,
          "seconds", s.seconds, "ok", !s.failed());
  j.close('}');
}

double ms_of(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

// A direction's members of the timeline object, `prefix` "recv_" or "send_".
void timeline_dir(Json& j, const Timeline& t, const Timeline::Dir& d, const char* prefix, std::size_t bins) {
  std::string p = prefix;
  auto first_bins = [bins](const auto& v) { return std::span(v.data(), std::min(bins, v.size())); };
  j.kv_list(p + "bytes", first_bins(d.bytes));
  j.kv_list(p + "msgs", first_bins(d.msgs));
  const std::string gap = p == "recv_" ? "" : p;  // the receive side's keys carry no prefix
  j.kv(gap + "max_gap_ms", ms_of(d.max_gap_ns));
  j.kv(gap + "max_gap_at_ms", ms_of(d.max_gap_at_ns));
  auto since_start = [&t](std::int64_t ns) {
    return ns ? std::optional<double>(ms_of(ns - t.start_ns)) : std::nullopt;
  };
  j.kv("first_" + p + "ms", since_start(d.first_ns));
  j.kv("last_" + p + "ms", since_start(d.last_ns));
  j.kv(p + "messages", d.total_msgs);
  j.kv(p + "total_bytes", d.total_bytes);
}

void to_json(Json& j, const Timeline& t) {
  ha_tools::object_value(j, t.ran, [&] {
    const std::int64_t end = t.end_ns ? t.end_ns : now_ns();
    const auto bins = static_cast<std::size_t>((end - t.start_ns) / (Timeline::kBinMs * 1000000LL)) + 1;
    j.kv("bin_ms", Timeline::kBinMs);
    j.kv("start_unix_ms", t.start_unix_ms);
    j.kv("duration_ms", ms_of(end - t.start_ns));
    j.kv("truncated", t.truncated);
    timeline_dir(j, t, t.recv, "recv_", bins);
    timeline_dir(j, t, t.send, "send_", bins);
  });
}

// "k":{fds, rss_kib, threads, mrs, qps} or "k":null when not taken.
void snapshot(Json& j, const char* k, const std::optional<Snapshot>& s) {
  object_or_null(j, k, s.has_value(), [&] {
    members(j, "fds", s->fds, "rss_kib", s->rss_kib, "threads", s->threads, "mrs", s->mrs, "qps", s->qps);
  });
}

void to_json(Json& j, const Properties& p) {
  j.open('{');
  members(j, "name", p.name, "pciPath", p.pci_path, "guid", strf("0x%016llx", static_cast<unsigned long long>(p.guid)),
          "ptrSupport", p.ptr_support, "regIsGlobal", p.reg_is_global, "forceFlush", p.force_flush, "speed", p.speed,
          "port", p.port, "latency", p.latency, "maxComms", p.max_comms, "maxRecvs", p.max_recvs,
          "netDeviceType", p.net_device_type, "netDeviceVersion", p.net_device_version);
  object_or_null(j, "vProps", p.vdevs.has_value(), [&] {
    j.kv("ndevs", p.vndevs);
    j.kv_list("devs", *p.vdevs);
  });
  // size_t: as the unsigned 64-bit number JsonWriter writes
  auto bytes = [](const std::optional<std::size_t>& v) { return v ? std::optional<std::uint64_t>(*v) : std::nullopt; };
  members(j, "maxP2pBytes", bytes(p.max_p2p_bytes), "maxCollBytes", bytes(p.max_coll_bytes),
          "maxMultiRequestSize", p.max_multi_request_size, "railId", p.rail_id, "planeId", p.plane_id);
  j.close('}');
}

// "calls":{"<entry>":{...},...}, the entry points called at least once.
void calls(Json& j, const std::array<CallStat, kEntries>& calls) {
  object(j, "calls", [&] {
    for (std::size_t i = 0; i < kEntries; ++i) {
      const CallStat& s = calls[i];
      if (s.count == 0) continue;
      object(j, entry_name(static_cast<Entry>(i)), [&] {
        j.kv("count", s.count);
        j.kv("errors", s.errors);
        j.kv("max_us", s.max_us);
        j.kv("total_us", s.total_us);
      });
    }
  });
}

// One size's latency or bandwidth result: {"size", the result's own members, its data errors}.
template <class Members>
void size_result(Json& j, std::size_t size, const Integrity& counters, Members&& members) {
  j.open('{');
  j.kv("size", static_cast<std::uint64_t>(size));
  members();
  j.kv("mismatches", counters.mismatches);
  j.kv("size_errors", counters.size_errors);
  j.close('}');
}

void to_json(Json& j, const LatResult& l) {
  size_result(j, l.size, l.counters, [&] {
    j.kv("iters", l.iters);
    j.kv("min_us", l.min_us);
    j.kv("median_us", l.median_us);
    j.kv("p99_us", l.p99_us);
  });
}

void to_json(Json& j, const BwResult& b) {
  size_result(j, b.size, b.counters, [&] {
    members(j, "messages", b.messages, "bytes", b.bytes, "seconds", b.seconds, "mib_s", b.mib_s,
            "msgs_per_s", b.msgs_per_s);
  });
}

void to_json(Json& j, const CommsResult& c) {
  ha_tools::object_value(j, c.ran, [&] {
    j.kv("n", c.n);
    j.kv("connect_ms", c.connect_ms);
    j.kv("messages_ok", c.messages_ok);
    j.kv("held_s", c.held_s);
    snapshot(j, "before", c.before);
    snapshot(j, "after_open", c.after_open);
    snapshot(j, "after_close", c.after_close);
    j.kv("rss_per_comm_kib", c.rss_per_comm_kib);
    j.kv("fds_returned", c.fds_returned);
    j.kv("fds_wait_ms", c.fds_wait_ms);
  });
}

void to_json(Json& j, const ChurnStats& c) {
  ha_tools::object_value(j, c.ran, [&] {
    members(j, "n", c.target, "dev", c.dev, "spacing_ms", c.spacing_ms, "opened", c.opened, "closed", c.closed,
            "messages_ok", c.messages_ok, "bad_messages", c.bad_messages, "connect_calls", c.connect_calls,
            "accept_calls", c.accept_calls, "isend_retries", c.isend_retries, "irecv_retries", c.irecv_retries,
            "connect_ms_max", c.connect_ms_max,
            "connect_ms_avg", c.opened ? c.connect_ms_total / static_cast<double>(c.opened) : 0.0,
            "pair_ms_max", c.pair_ms_max, "late_ms_max", c.late_ms_max, "connect_failures", c.connect_failures,
            "drained_connects", c.drained_connects);
    j.kv_list("failure_lines", c.failure_lines);
  });
}

void to_json(Json& j, const FaultStep& st) {
  j.open('{');
  members(j, "name", st.name, "call", st.call, "expect", st.expect, "code", st.code, "result", st.result, "ms", st.ms,
          "calls", st.calls, "comm_null", st.comm_null, "since_peer_gone_ms", st.since_peer_gone_ms, "ok", st.ok,
          "detail", st.detail);
  j.close('}');
}

void to_json(Json& j, const FaultReport& f) {
  ha_tools::object_value(j, !f.name.empty(), [&] {
    j.kv("name", f.name);
    ha_tools::array(j, "steps", f.steps, [&](const FaultStep& st) { to_json(j, st); });
    object(j, "counts", [&] {
      for (const auto& [kind, n] : f.counts) j.kv(kind, n);
    });
  });
}

// "key":[to_json(item),...]
template <class T>
void array_of(Json& j, const char* key, const std::vector<T>& items) {
  ha_tools::array(j, key, items, [&](const T& item) { to_json(j, item); });
}

// The run: who, which plugin, the parameters, the device's properties and the checks.
void run_members(Json& j, const Report& r) {
  members(j, "tool", "ha-net-driver", "schema", 1, "rank", r.rank, "peer", r.peer, "ok", r.result == Fail::ok,
          "exit_code", static_cast<int>(r.result), "result", fail_name(r.result), "phase", r.phase,
          "plugin", r.plugin_path, "api_version", r.api, "net_name", r.table_name);
  j.kv_list("exported_symbols", r.exported);
  j.kv("params", r.params);
  j.kv("ndev", r.ndev);
  j.kv("dev", r.dev);
  j.key("properties");
  if (r.props) to_json(j, *r.props);
  else j.null();
  array_of(j, "all_properties", r.all_props);
  objects(j, "checks", r.checks, [&](const Check& c) {
    j.kv("name", c.name);
    j.kv("ok", c.ok);
    j.kv("detail", c.detail);
  });
  object(j, "connect", [&] {
    j.kv("ms", r.connect.ms);
    j.kv("connect_calls", r.connect.connect_calls);
    j.kv("accept_calls", r.connect.accept_calls);
  });
  calls(j, r.calls);
}

// The integrity phase: counters, timeline, idle windows, and what ended it early.
void integrity_members(Json& j, const Report& r) {
  j.key("integrity");
  to_json(j, r.integrity);
  j.kv("phase_start_unix_ms", r.phase_start_unix_ms);
  j.key("timeline");
  to_json(j, r.timeline);
  objects(j, "idle_windows", r.idle_windows, [&](const IdleTaken& w) {
    members(j, "at_ms", w.at_ms, "duration_ms", w.duration_ms, "start_ms", w.start_ms,
            "start_unix_ms", w.start_unix_ms, "end_unix_ms", w.end_unix_ms);
  });
  object_or_null(j, "clock", r.clock.has_value(), [&] {
    j.kv("peer_offset_ms", r.clock->offset_ms);
    j.kv("rtt_ms", r.clock->rtt_ms);
  });
  const std::optional<PluginCallError>& e = r.plugin_error;
  j.kv("error_unix_ms", e ? std::optional<std::int64_t>(e->unix_ms) : std::nullopt);
  object_or_null(j, "plugin_error", e.has_value(), [&] {
    members(j, "call", e->call, "code", e->code, "result", result_name(static_cast<ncclResult_t>(e->code)),
            "unix_ms", e->unix_ms, "phase", e->phase);
  });
  object_or_null(j, "peer_abort", r.peer_abort.ns != 0, [&] {
    j.kv("unix_ms", r.peer_abort.unix_ms);
    j.kv("reason", r.peer_abort.reason);
  });
}

// The other phases, the resource snapshots and the fault scenario.
void phase_members(Json& j, const Report& r) {
  array_of(j, "latency", r.latency);
  array_of(j, "bandwidth", r.bandwidth);
  j.key("comms_test");
  to_json(j, r.comms);
  j.key("churn");
  to_json(j, r.churn);
  object_or_null(j, "ring", !r.ring_send_comm.empty(), [&] {
    j.kv("send_comm", r.ring_send_comm);
    j.kv("recv_comm", r.ring_recv_comm);
  });
  object(j, "resources", [&] {
    snapshot(j, "before_init", r.before_init);
    snapshot(j, "after_connect", r.after_connect);
    snapshot(j, "stream_end_first", r.stream_end_first);
    snapshot(j, "stream_end", r.stream_end);
    j.kv("stream_settle_ms", r.stream_settle_ms);
    snapshot(j, "after_close", r.after_close);
    snapshot(j, "after_dlclose", r.after_dlclose);
  });
  j.kv("linger_ms", r.linger_ms);
  j.kv("finalize_settle_ms", r.finalize_settle_ms);
  j.key("fault");
  to_json(j, r.fault);
}

namespace {
// "profiler": the stand-in's summary (events by type, open ones, errors).
void profiler_members(Json& j, const prof::Summary& p) {
  j.key("profiler");
  j.open('{');
  j.kv("calls", p.calls);
  j.key("started");
  j.open('{');
  for (int b = 0; b < 6; ++b) j.kv(prof::type_name(b), p.started[b]);
  j.close('}');
  j.kv("stopped", p.stopped);
  j.kv("updates", p.updates);
  j.kv("fatal_updates", p.fatal_updates);
  j.kv("other_plugins", p.other_plugins);
  j.kv("open", p.open);
  j.kv("longest_ms", p.longest_ms);
  j.kv_list("errors", p.errors);
  j.close('}');
}
}  // namespace

void to_json(Json& j, const Report& r) {
  j.open('{');
  run_members(j, r);
  integrity_members(j, r);
  phase_members(j, r);
  j.kv("plugin_warnings", r.plugin_warnings);
  j.kv_list("plugin_warning_lines", r.plugin_warning_lines);
  profiler_members(j, r.profiler);
  j.kv("exit_unix_ms", wall_ms());
  j.kv("peer_ok", r.peer_ok);
  j.kv("peer_detail", r.peer_detail);
  j.kv_list("errors", r.errors);
  j.close('}');
}

// ---------------------------------------------------------------- the human summary, by section

std::string opt_int(const std::optional<int>& v) { return v ? std::to_string(*v) : "n/a"; }

unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }

void print_device(std::FILE* o, const Report& r) {
  if (!r.props) return;
  const Properties& p = *r.props;
  std::fprintf(o, "  device %d of %d: name=%s pciPath=%s guid=0x%llx ptrSupport=0x%x regIsGlobal=%s forceFlush=%s\n",
               r.dev, r.ndev, p.name.c_str(), p.pci_path ? p.pci_path->c_str() : "(null)", ull(p.guid), p.ptr_support,
               opt_int(p.reg_is_global).c_str(), opt_int(p.force_flush).c_str());
  std::fprintf(o, "    speed=%d Mbps port=%d latency=%g us maxComms=%d maxRecvs=%d netDeviceType=%s netDeviceVersion=%s\n",
               p.speed, p.port, static_cast<double>(p.latency), p.max_comms, p.max_recvs,
               opt_int(p.net_device_type).c_str(), opt_int(p.net_device_version).c_str());
  if (p.vdevs) {
    std::string devs;
    for (int d : *p.vdevs) devs += (devs.empty() ? "" : ",") + std::to_string(d);
    std::fprintf(o, "    vProps={%d: %s} maxP2pBytes=%zu maxCollBytes=%zu maxMultiRequestSize=%s railId=%s planeId=%s\n",
                 p.vndevs.value_or(0), devs.c_str(), p.max_p2p_bytes.value_or(0), p.max_coll_bytes.value_or(0),
                 opt_int(p.max_multi_request_size).c_str(), opt_int(p.rail_id).c_str(), opt_int(p.plane_id).c_str());
  }
}

// The checks, the connect, and the integrity phase (counters, timeline, idle windows, clock, error).
void print_integrity(std::FILE* o, const Report& r) {
  for (const auto& c : r.checks)
    std::fprintf(o, "  check %-40s %s%s%s\n", c.name.c_str(), c.ok ? "ok" : "FAILED", c.detail.empty() ? "" : "  ",
                 c.detail.c_str());
  if (r.connect.connect_calls)
    std::fprintf(o, "  connect: %.1f ms, %llu connect + %llu accept calls\n", r.connect.ms,
                 ull(r.connect.connect_calls), ull(r.connect.accept_calls));
  const Integrity& s = r.integrity;
  if (s.ran)
    std::fprintf(o, "  integrity: sent %llu msgs / %llu B, received %llu msgs / %llu B in %.2f s; mismatches %llu "
                 "(%llu B), size errors %llu, overruns %llu, retries isend %llu irecv %llu, iflush %s\n",
                 ull(s.messages_sent), ull(s.bytes_sent), ull(s.messages_received), ull(s.bytes_received), s.seconds,
                 ull(s.mismatches), ull(s.mismatched_bytes), ull(s.size_errors), ull(s.overruns), ull(s.isend_retries),
                 ull(s.irecv_retries), s.flush.c_str());
  if (r.timeline.ran) {
    const Timeline& t = r.timeline;
    const std::int64_t end = t.end_ns ? t.end_ns : now_ns();
    std::fprintf(o, "  timeline: %.0f ms; receives %llu, longest gap %.1f ms at %.0f ms; sends %llu, longest gap %.1f ms "
                 "at %.0f ms\n", ms_of(end - t.start_ns), ull(t.recv.total_msgs), ms_of(t.recv.max_gap_ns),
                 ms_of(t.recv.max_gap_at_ns), ull(t.send.total_msgs), ms_of(t.send.max_gap_ns),
                 ms_of(t.send.max_gap_at_ns));
  }
  for (const IdleTaken& w : r.idle_windows)
    std::fprintf(o, "  idle window %lld:%lld: no plugin call from %lld ms for %lld ms (unix %lld..%lld)\n",
                 static_cast<long long>(w.at_ms), static_cast<long long>(w.duration_ms),
                 static_cast<long long>(w.start_ms), static_cast<long long>(w.end_unix_ms - w.start_unix_ms),
                 static_cast<long long>(w.start_unix_ms), static_cast<long long>(w.end_unix_ms));
  if (r.clock) std::fprintf(o, "  clock: peer = here %+.1f ms (rtt %.1f ms)\n", r.clock->offset_ms, r.clock->rtt_ms);
  if (r.plugin_error)
    std::fprintf(o, "  plugin error: %s returned %s (%d) at unix %lld ms in phase %s\n", r.plugin_error->call.c_str(),
                 result_name(static_cast<ncclResult_t>(r.plugin_error->code)), r.plugin_error->code,
                 static_cast<long long>(r.plugin_error->unix_ms), r.plugin_error->phase.c_str());
}

// Latency, bandwidth, the comms test and the churn.
void print_phases(std::FILE* o, const Report& r) {
  for (const auto& l : r.latency)
    std::fprintf(o, "  latency %9zu B: min/median/p99 %.1f/%.1f/%.1f us (RTT/2, %d round trips)\n", l.size, l.min_us,
                 l.median_us, l.p99_us, l.iters);
  for (const auto& b : r.bandwidth)
    std::fprintf(o, "  bw      %9zu B: %10.1f MiB/s received (%llu msgs, %.0f msgs/s)\n", b.size, b.mib_s,
                 ull(b.messages), b.msgs_per_s);
  const CommsResult& c = r.comms;
  if (c.ran)
    std::fprintf(o, "  comms test: %d pairs in %.1f ms, RSS %+lld KiB total (%.1f KiB per pair), fds %d -> %d -> %d (%s)\n",
                 c.n, c.connect_ms, static_cast<long long>(c.after_open.rss_kib - c.before.rss_kib), c.rss_per_comm_kib,
                 c.before.fds, c.after_open.fds, c.after_close.fds, c.fds_returned ? "returned" : "LEAKED");
  const ChurnStats& h = r.churn;
  if (h.ran)
    std::fprintf(o, "  churn: %llu of %d pairs closed on device %d (every %.0f ms), %llu verified messages received, "
                 "connect max %.1f ms, pair max %.1f ms, started late by up to %.1f ms\n",
                 ull(h.closed), h.target, h.dev, h.spacing_ms, ull(h.messages_ok), h.connect_ms_max, h.pair_ms_max,
                 h.late_ms_max);
  if (h.connect_failures)
    std::fprintf(o, "  churn: %llu failed connect attempts (--churn-retry), first: %s\n", ull(h.connect_failures),
                 h.failure_lines.front().c_str());
}

void print_resources(std::FILE* o, const Report& r) {
  if (r.after_connect && r.stream_end) {
    const Snapshot& b = *r.after_connect;
    const Snapshot& e = *r.stream_end;
    std::fprintf(o, "  stream resources (after connect -> after the stream%s): fds %d -> %d, threads %d -> %d, "
                 "QPs %s -> %s, MRs %s -> %s, RSS %lld -> %lld KiB\n",
                 r.stream_settle_ms > 0 ? strf(", +%.0f ms", r.stream_settle_ms).c_str() : "", b.fds, e.fds, b.threads,
                 e.threads, opt_int(b.qps).c_str(), opt_int(e.qps).c_str(), opt_int(b.mrs).c_str(), opt_int(e.mrs).c_str(),
                 static_cast<long long>(b.rss_kib), static_cast<long long>(e.rss_kib));
  }
  if (r.before_init && r.after_close)
    std::fprintf(o, "  resources: fds %d before init, %d after close%s; threads %d -> %d; MRs %s -> %s; QPs %s -> %s\n",
                 r.before_init->fds, r.after_close->fds,
                 r.after_dlclose ? strf(", %d after dlclose", r.after_dlclose->fds).c_str() : "",
                 r.before_init->threads, r.after_dlclose ? r.after_dlclose->threads : r.after_close->threads,
                 opt_int(r.before_init->mrs).c_str(), opt_int(r.after_close->mrs).c_str(),
                 opt_int(r.before_init->qps).c_str(), opt_int(r.after_close->qps).c_str());
}

// One line per entry point called, under a header line when there is any.
void print_calls(std::FILE* o, const std::array<CallStat, kEntries>& calls) {
  bool any_calls = false;
  for (const auto& c : calls) any_calls = any_calls || c.count > 0;
  if (any_calls) std::fprintf(o, "  %-14s %10s %8s %12s %12s\n", "call", "count", "errors", "max_us", "avg_us");
  for (std::size_t i = 0; i < kEntries; ++i) {
    const CallStat& c = calls[i];
    if (c.count == 0) continue;
    std::fprintf(o, "  %-14s %10llu %8llu %12.1f %12.2f\n", entry_name(static_cast<Entry>(i)), ull(c.count),
                 ull(c.errors), c.max_us, c.total_us / static_cast<double>(c.count));
  }
}

}  // namespace

bool write_json(const Report& r, const std::string& path) {
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    log::warn("cannot write %s", tmp.c_str());
    return false;
  }
  Json j;
  to_json(j, r);
  bool ok = std::fputs(j.str().c_str(), f) >= 0 && std::fputc('\n', f) != EOF;
  ok = std::fclose(f) == 0 && ok;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) ok = false;
  if (!ok) log::warn("cannot write %s", path.c_str());
  return ok;
}

void print_summary(const Report& r) {
  std::FILE* o = stderr;
  std::fprintf(o, "==== ha-net-driver rank %d: %s (api v%d, net \"%s\")\n", r.rank, r.plugin_path.c_str(), r.api,
               r.table_name.c_str());
  print_device(o, r);
  print_integrity(o, r);
  print_phases(o, r);
  print_resources(o, r);
  print_calls(o, r.calls);
  if (r.plugin_warnings) std::fprintf(o, "  plugin logged %llu WARN lines\n", ull(r.plugin_warnings));
  if (r.peer_ok) std::fprintf(o, "  peer: %s%s%s\n", *r.peer_ok ? "ok" : "FAILED", r.peer_detail.empty() ? "" : " - ", r.peer_detail.c_str());
  for (const auto& e : r.errors) std::fprintf(o, "  error: %s\n", e.c_str());
  std::fprintf(o, "==== rank %d: %s (exit %d)\n", r.rank, r.result == Fail::ok ? "PASS" : fail_name(r.result),
               static_cast<int>(r.result));
}

}  // namespace hnd
