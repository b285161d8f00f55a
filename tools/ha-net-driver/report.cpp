#include "report.hpp"

#include <algorithm>
#include <cstdio>

#include "logger.hpp"
#include "nccl_ha/net/json.hpp"

namespace hnd {

void Integrity::add(const Integrity& o) {
  ran = ran || o.ran;
  messages_sent += o.messages_sent;
  bytes_sent += o.bytes_sent;
  messages_received += o.messages_received;
  bytes_received += o.bytes_received;
  mismatches += o.mismatches;
  mismatched_bytes += o.mismatched_bytes;
  size_errors += o.size_errors;
  overruns += o.overruns;
  send_size_mismatches += o.send_size_mismatches;
  optional_size_mismatches += o.optional_size_mismatches;
  isend_retries += o.isend_retries;
  irecv_retries += o.irecv_retries;
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

void json_integrity(Json& j, const Integrity& s) {
  j.open('{');
  j.kv("ran", s.ran);
  j.kv("messages_sent", s.messages_sent);
  j.kv("bytes_sent", s.bytes_sent);
  j.kv("messages_received", s.messages_received);
  j.kv("bytes_received", s.bytes_received);
  j.kv("mismatches", s.mismatches);
  j.kv("mismatched_bytes", s.mismatched_bytes);
  j.kv("size_errors", s.size_errors);
  j.kv("overruns", s.overruns);
  j.kv("send_size_mismatches", s.send_size_mismatches);
  j.kv("optional_size_mismatches", s.optional_size_mismatches);
  j.kv("isend_retries", s.isend_retries);
  j.kv("irecv_retries", s.irecv_retries);
  j.kv("flush", s.flush);
  j.kv("flushes", s.flushes);
  j.kv("seconds", s.seconds);
  j.kv("ok", !s.failed());
  j.close('}');
}

double ms_of(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

void json_timeline_dir(Json& j, const Timeline& t, const Timeline::Dir& d, const char* prefix, std::size_t bins) {
  std::string p = prefix;
  j.key((p + "bytes").c_str());
  j.open('[');
  for (std::size_t i = 0; i < bins && i < d.bytes.size(); ++i) j.num(d.bytes[i]);
  j.close(']');
  j.key((p + "msgs").c_str());
  j.open('[');
  for (std::size_t i = 0; i < bins && i < d.msgs.size(); ++i) j.num(static_cast<std::uint64_t>(d.msgs[i]));
  j.close(']');
  const std::string gap = p == "recv_" ? "" : p;  // the receive side's keys carry no prefix
  j.kv((gap + "max_gap_ms").c_str(), ms_of(d.max_gap_ns));
  j.kv((gap + "max_gap_at_ms").c_str(), ms_of(d.max_gap_at_ns));
  j.key(("first_" + p + "ms").c_str());
  if (d.first_ns) j.num(ms_of(d.first_ns - t.start_ns));
  else j.null();
  j.key(("last_" + p + "ms").c_str());
  if (d.last_ns) j.num(ms_of(d.last_ns - t.start_ns));
  else j.null();
  j.kv((p + "messages").c_str(), d.total_msgs);
  j.kv((p + "total_bytes").c_str(), d.total_bytes);
}

void json_timeline(Json& j, const Timeline& t) {
  if (!t.ran) {
    j.null();
    return;
  }
  const std::int64_t end = t.end_ns ? t.end_ns : now_ns();
  const auto bins = static_cast<std::size_t>((end - t.start_ns) / (Timeline::kBinMs * 1000000LL)) + 1;
  j.open('{');
  j.kv("bin_ms", Timeline::kBinMs);
  j.kv("start_unix_ms", t.start_unix_ms);
  j.kv("duration_ms", ms_of(end - t.start_ns));
  j.kv("truncated", t.truncated);
  json_timeline_dir(j, t, t.recv, "recv_", bins);
  json_timeline_dir(j, t, t.send, "send_", bins);
  j.close('}');
}

void json_snapshot(Json& j, const char* k, const std::optional<Snapshot>& s) {
  j.key(k);
  if (!s) {
    j.null();
    return;
  }
  j.open('{');
  j.kv("fds", s->fds);
  j.kv("rss_kib", s->rss_kib);
  j.kv("threads", s->threads);
  j.kv("mrs", s->mrs);
  j.kv("qps", s->qps);
  j.close('}');
}

void json_props(Json& j, const Properties& p) {
  j.open('{');
  j.kv("name", p.name);
  j.kv("pciPath", p.pci_path);
  j.kv("guid", strf("0x%016llx", static_cast<unsigned long long>(p.guid)));
  j.kv("ptrSupport", p.ptr_support);
  j.kv("regIsGlobal", p.reg_is_global);
  j.kv("forceFlush", p.force_flush);
  j.kv("speed", p.speed);
  j.kv("port", p.port);
  j.kv("latency", p.latency);
  j.kv("maxComms", p.max_comms);
  j.kv("maxRecvs", p.max_recvs);
  j.kv("netDeviceType", p.net_device_type);
  j.kv("netDeviceVersion", p.net_device_version);
  j.key("vProps");
  if (p.vdevs) {
    j.open('{');
    j.kv("ndevs", p.vndevs);
    j.key("devs");
    j.open('[');
    for (int d : *p.vdevs) j.num(d);
    j.close(']');
    j.close('}');
  } else {
    j.null();
  }
  j.key("maxP2pBytes");
  if (p.max_p2p_bytes) j.num(static_cast<std::uint64_t>(*p.max_p2p_bytes));
  else j.null();
  j.key("maxCollBytes");
  if (p.max_coll_bytes) j.num(static_cast<std::uint64_t>(*p.max_coll_bytes));
  else j.null();
  j.kv("maxMultiRequestSize", p.max_multi_request_size);
  j.kv("railId", p.rail_id);
  j.kv("planeId", p.plane_id);
  j.close('}');
}

std::string opt_int(const std::optional<int>& v) { return v ? std::to_string(*v) : "n/a"; }

}  // namespace

bool write_json(const Report& r, const std::string& path) {
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    log::warn("cannot write %s", tmp.c_str());
    return false;
  }
  Json j;
  j.open('{');
  j.kv("tool", "ha-net-driver");
  j.kv("schema", 1);
  j.kv("rank", r.rank);
  j.kv("peer", r.peer);
  j.kv("ok", r.result == Fail::ok);
  j.kv("exit_code", static_cast<int>(r.result));
  j.kv("result", fail_name(r.result));
  j.kv("phase", r.phase);
  j.kv("plugin", r.plugin_path);
  j.kv("api_version", r.api);
  j.kv("net_name", r.table_name);
  j.key("exported_symbols");
  j.open('[');
  for (const auto& s : r.exported) j.str(s);
  j.close(']');
  j.kv("params", r.params);
  j.kv("ndev", r.ndev);
  j.kv("dev", r.dev);
  j.key("properties");
  if (r.props) json_props(j, *r.props);
  else j.null();
  j.key("all_properties");
  j.open('[');
  for (const auto& p : r.all_props) json_props(j, p);
  j.close(']');
  j.key("checks");
  j.open('[');
  for (const auto& c : r.checks) {
    j.open('{');
    j.kv("name", c.name);
    j.kv("ok", c.ok);
    j.kv("detail", c.detail);
    j.close('}');
  }
  j.close(']');
  j.key("connect");
  j.open('{');
  j.kv("ms", r.connect.ms);
  j.kv("connect_calls", r.connect.connect_calls);
  j.kv("accept_calls", r.connect.accept_calls);
  j.close('}');
  j.key("calls");
  j.open('{');
  for (std::size_t i = 0; i < kEntries; ++i) {
    const CallStat& s = r.calls[i];
    if (s.count == 0) continue;
    j.key(entry_name(static_cast<Entry>(i)));
    j.open('{');
    j.kv("count", s.count);
    j.kv("errors", s.errors);
    j.kv("max_us", s.max_us);
    j.kv("total_us", s.total_us);
    j.close('}');
  }
  j.close('}');
  j.key("integrity");
  json_integrity(j, r.integrity);
  j.kv("phase_start_unix_ms", r.phase_start_unix_ms);
  j.key("timeline");
  json_timeline(j, r.timeline);
  j.key("idle_windows");
  j.open('[');
  for (const IdleTaken& w : r.idle_windows) {
    j.open('{');
    j.kv("at_ms", w.at_ms);
    j.kv("duration_ms", w.duration_ms);
    j.kv("start_ms", w.start_ms);
    j.kv("start_unix_ms", w.start_unix_ms);
    j.kv("end_unix_ms", w.end_unix_ms);
    j.close('}');
  }
  j.close(']');
  j.key("clock");
  if (r.clock) {
    j.open('{');
    j.kv("peer_offset_ms", r.clock->offset_ms);
    j.kv("rtt_ms", r.clock->rtt_ms);
    j.close('}');
  } else {
    j.null();
  }
  j.key("error_unix_ms");
  if (r.plugin_error) j.num(r.plugin_error->unix_ms);
  else j.null();
  j.key("plugin_error");
  if (r.plugin_error) {
    j.open('{');
    j.kv("call", r.plugin_error->call);
    j.kv("code", r.plugin_error->code);
    j.kv("result", result_name(static_cast<ncclResult_t>(r.plugin_error->code)));
    j.kv("unix_ms", r.plugin_error->unix_ms);
    j.kv("phase", r.plugin_error->phase);
    j.close('}');
  } else {
    j.null();
  }
  j.key("peer_abort");
  if (r.peer_abort.ns) {
    j.open('{');
    j.kv("unix_ms", r.peer_abort.unix_ms);
    j.kv("reason", r.peer_abort.reason);
    j.close('}');
  } else {
    j.null();
  }
  j.key("latency");
  j.open('[');
  for (const auto& l : r.latency) {
    j.open('{');
    j.kv("size", static_cast<std::uint64_t>(l.size));
    j.kv("iters", l.iters);
    j.kv("min_us", l.min_us);
    j.kv("median_us", l.median_us);
    j.kv("p99_us", l.p99_us);
    j.kv("mismatches", l.counters.mismatches);
    j.kv("size_errors", l.counters.size_errors);
    j.close('}');
  }
  j.close(']');
  j.key("bandwidth");
  j.open('[');
  for (const auto& b : r.bandwidth) {
    j.open('{');
    j.kv("size", static_cast<std::uint64_t>(b.size));
    j.kv("messages", b.messages);
    j.kv("bytes", b.bytes);
    j.kv("seconds", b.seconds);
    j.kv("mib_s", b.mib_s);
    j.kv("msgs_per_s", b.msgs_per_s);
    j.kv("mismatches", b.counters.mismatches);
    j.kv("size_errors", b.counters.size_errors);
    j.close('}');
  }
  j.close(']');
  j.key("comms_test");
  if (r.comms.ran) {
    j.open('{');
    j.kv("n", r.comms.n);
    j.kv("connect_ms", r.comms.connect_ms);
    j.kv("messages_ok", r.comms.messages_ok);
    j.kv("held_s", r.comms.held_s);
    json_snapshot(j, "before", r.comms.before);
    json_snapshot(j, "after_open", r.comms.after_open);
    json_snapshot(j, "after_close", r.comms.after_close);
    j.kv("rss_per_comm_kib", r.comms.rss_per_comm_kib);
    j.kv("fds_returned", r.comms.fds_returned);
    j.kv("fds_wait_ms", r.comms.fds_wait_ms);
    j.close('}');
  } else {
    j.null();
  }
  j.key("churn");
  if (r.churn.ran) {
    const ChurnStats& c = r.churn;
    j.open('{');
    j.kv("n", c.target);
    j.kv("dev", c.dev);
    j.kv("spacing_ms", c.spacing_ms);
    j.kv("opened", c.opened);
    j.kv("closed", c.closed);
    j.kv("messages_ok", c.messages_ok);
    j.kv("bad_messages", c.bad_messages);
    j.kv("connect_calls", c.connect_calls);
    j.kv("accept_calls", c.accept_calls);
    j.kv("isend_retries", c.isend_retries);
    j.kv("irecv_retries", c.irecv_retries);
    j.kv("connect_ms_max", c.connect_ms_max);
    j.kv("connect_ms_avg", c.opened ? c.connect_ms_total / static_cast<double>(c.opened) : 0.0);
    j.kv("pair_ms_max", c.pair_ms_max);
    j.kv("late_ms_max", c.late_ms_max);
    j.kv("connect_failures", c.connect_failures);
    j.kv("drained_connects", c.drained_connects);
    j.key("failure_lines");
    j.open('[');
    for (const auto& l : c.failure_lines) j.str(l);
    j.close(']');
    j.close('}');
  } else {
    j.null();
  }
  j.key("ring");
  if (!r.ring_send_comm.empty()) {
    j.open('{');
    j.kv("send_comm", r.ring_send_comm);
    j.kv("recv_comm", r.ring_recv_comm);
    j.close('}');
  } else {
    j.null();
  }
  j.key("resources");
  j.open('{');
  json_snapshot(j, "before_init", r.before_init);
  json_snapshot(j, "after_connect", r.after_connect);
  json_snapshot(j, "stream_end_first", r.stream_end_first);
  json_snapshot(j, "stream_end", r.stream_end);
  j.kv("stream_settle_ms", r.stream_settle_ms);
  json_snapshot(j, "after_close", r.after_close);
  json_snapshot(j, "after_dlclose", r.after_dlclose);
  j.close('}');
  j.kv("linger_ms", r.linger_ms);
  j.kv("finalize_settle_ms", r.finalize_settle_ms);
  j.key("fault");
  if (!r.fault.name.empty()) {
    j.open('{');
    j.kv("name", r.fault.name);
    j.key("steps");
    j.open('[');
    for (const auto& st : r.fault.steps) {
      j.open('{');
      j.kv("name", st.name);
      j.kv("call", st.call);
      j.kv("expect", st.expect);
      j.kv("code", st.code);
      j.kv("result", st.result);
      j.kv("ms", st.ms);
      j.kv("calls", st.calls);
      j.kv("comm_null", st.comm_null);
      j.kv("since_peer_gone_ms", st.since_peer_gone_ms);
      j.kv("ok", st.ok);
      j.kv("detail", st.detail);
      j.close('}');
    }
    j.close(']');
    j.key("counts");
    j.open('{');
    for (const auto& [kind, n] : r.fault.counts) j.kv(kind, n);
    j.close('}');
    j.close('}');
  } else {
    j.null();
  }
  j.kv("plugin_warnings", r.plugin_warnings);
  j.key("plugin_warning_lines");
  j.open('[');
  for (const auto& l : r.plugin_warning_lines) j.str(l);
  j.close(']');
  j.kv("profiler_events", r.profiler_events);
  j.kv("exit_unix_ms", wall_ms());
  j.kv("peer_ok", r.peer_ok);
  j.kv("peer_detail", r.peer_detail);
  j.key("errors");
  j.open('[');
  for (const auto& e : r.errors) j.str(e);
  j.close(']');
  j.close('}');
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
  if (r.props) {
    const Properties& p = *r.props;
    std::fprintf(o, "  device %d of %d: name=%s pciPath=%s guid=0x%llx ptrSupport=0x%x regIsGlobal=%s forceFlush=%s\n",
                 r.dev, r.ndev, p.name.c_str(), p.pci_path ? p.pci_path->c_str() : "(null)",
                 static_cast<unsigned long long>(p.guid), p.ptr_support, opt_int(p.reg_is_global).c_str(),
                 opt_int(p.force_flush).c_str());
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
  for (const auto& c : r.checks)
    std::fprintf(o, "  check %-40s %s%s%s\n", c.name.c_str(), c.ok ? "ok" : "FAILED", c.detail.empty() ? "" : "  ",
                 c.detail.c_str());
  if (r.connect.connect_calls)
    std::fprintf(o, "  connect: %.1f ms, %llu connect + %llu accept calls\n", r.connect.ms,
                 static_cast<unsigned long long>(r.connect.connect_calls),
                 static_cast<unsigned long long>(r.connect.accept_calls));
  const Integrity& s = r.integrity;
  if (s.ran)
    std::fprintf(o, "  integrity: sent %llu msgs / %llu B, received %llu msgs / %llu B in %.2f s; mismatches %llu "
                 "(%llu B), size errors %llu, overruns %llu, retries isend %llu irecv %llu, iflush %s\n",
                 static_cast<unsigned long long>(s.messages_sent), static_cast<unsigned long long>(s.bytes_sent),
                 static_cast<unsigned long long>(s.messages_received), static_cast<unsigned long long>(s.bytes_received),
                 s.seconds, static_cast<unsigned long long>(s.mismatches),
                 static_cast<unsigned long long>(s.mismatched_bytes), static_cast<unsigned long long>(s.size_errors),
                 static_cast<unsigned long long>(s.overruns), static_cast<unsigned long long>(s.isend_retries),
                 static_cast<unsigned long long>(s.irecv_retries), s.flush.c_str());
  if (r.timeline.ran) {
    const Timeline& t = r.timeline;
    const std::int64_t end = t.end_ns ? t.end_ns : now_ns();
    std::fprintf(o, "  timeline: %.0f ms; receives %llu, longest gap %.1f ms at %.0f ms; sends %llu, longest gap %.1f ms "
                 "at %.0f ms\n", ms_of(end - t.start_ns), static_cast<unsigned long long>(t.recv.total_msgs),
                 ms_of(t.recv.max_gap_ns), ms_of(t.recv.max_gap_at_ns), static_cast<unsigned long long>(t.send.total_msgs),
                 ms_of(t.send.max_gap_ns), ms_of(t.send.max_gap_at_ns));
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
  for (const auto& l : r.latency)
    std::fprintf(o, "  latency %9zu B: min/median/p99 %.1f/%.1f/%.1f us (RTT/2, %d round trips)\n", l.size, l.min_us,
                 l.median_us, l.p99_us, l.iters);
  for (const auto& b : r.bandwidth)
    std::fprintf(o, "  bw      %9zu B: %10.1f MiB/s received (%llu msgs, %.0f msgs/s)\n", b.size, b.mib_s,
                 static_cast<unsigned long long>(b.messages), b.msgs_per_s);
  if (r.comms.ran)
    std::fprintf(o, "  comms test: %d pairs in %.1f ms, RSS %+lld KiB total (%.1f KiB per pair), fds %d -> %d -> %d (%s)\n",
                 r.comms.n, r.comms.connect_ms, static_cast<long long>(r.comms.after_open.rss_kib - r.comms.before.rss_kib),
                 r.comms.rss_per_comm_kib, r.comms.before.fds, r.comms.after_open.fds, r.comms.after_close.fds,
                 r.comms.fds_returned ? "returned" : "LEAKED");
  if (r.churn.ran)
    std::fprintf(o, "  churn: %llu of %d pairs closed on device %d (every %.0f ms), %llu verified messages received, "
                 "connect max %.1f ms, pair max %.1f ms, started late by up to %.1f ms\n",
                 static_cast<unsigned long long>(r.churn.closed), r.churn.target, r.churn.dev, r.churn.spacing_ms,
                 static_cast<unsigned long long>(r.churn.messages_ok), r.churn.connect_ms_max, r.churn.pair_ms_max,
                 r.churn.late_ms_max);
  if (r.churn.connect_failures)
    std::fprintf(o, "  churn: %llu failed connect attempts (--churn-retry), first: %s\n",
                 static_cast<unsigned long long>(r.churn.connect_failures), r.churn.failure_lines.front().c_str());
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
  bool any_calls = false;
  for (const auto& c : r.calls) any_calls = any_calls || c.count > 0;
  if (any_calls) std::fprintf(o, "  %-14s %10s %8s %12s %12s\n", "call", "count", "errors", "max_us", "avg_us");
  for (std::size_t i = 0; i < kEntries; ++i) {
    const CallStat& c = r.calls[i];
    if (c.count == 0) continue;
    std::fprintf(o, "  %-14s %10llu %8llu %12.1f %12.2f\n", entry_name(static_cast<Entry>(i)),
                 static_cast<unsigned long long>(c.count), static_cast<unsigned long long>(c.errors), c.max_us,
                 c.total_us / static_cast<double>(c.count));
  }
  if (r.plugin_warnings) std::fprintf(o, "  plugin logged %llu WARN lines\n", static_cast<unsigned long long>(r.plugin_warnings));
  if (r.peer_ok) std::fprintf(o, "  peer: %s%s%s\n", *r.peer_ok ? "ok" : "FAILED", r.peer_detail.empty() ? "" : " - ", r.peer_detail.c_str());
  for (const auto& e : r.errors) std::fprintf(o, "  error: %s\n", e.c_str());
  std::fprintf(o, "==== rank %d: %s (exit %d)\n", r.rank, r.result == Fail::ok ? "PASS" : fail_name(r.result),
               static_cast<int>(r.result));
}

}  // namespace hnd
