#!/usr/bin/env python3
"""Turns a soak run (bench/soak.sh; <logdir>/{a,b}/out, see soak.guest.sh) into <prefix>.json and
<prefix>.md:

  duration      the integrity phase (the stream) as each rank measured it
  faults        every event of the schedule as injected on VM a (a's clock, from the phase start),
                with the ring's reaction seen in both plugins' stats within the event's window
                (until the next event): failovers, failbacks, standby losses and returns, and the
                longest receive stall of each rank overlapping the window
  plugin stats  failovers, failbacks, re-protections, replayed and duplicate messages of the ring's
                comms (the driver names them: JSON "ring") and, summed, of the churn comms (every
                other comm), from the last record of each comm in HA_NCCL_STATS_FILE; fatal records
  data          bytes and messages received and verified by each rank, mismatches
  churn         pairs opened and closed, verified messages, failed connect attempts (--churn-retry)
  resources     fds, threads, QPs, MRs, RSS after connect vs after the stream (the driver's checks),
                and before init vs after finalize / dlclose
  stall         the longest gap between receive completions of each rank (the driver's timeline)

  soak_report.py LOGDIR PREFIX [--seed S] [--minutes M] [--churn N] [--trial]
"""
import argparse
import collections
import datetime
import json
import os
import platform
import re
import sys
from pathlib import Path

RANKS = (("a", 0), ("b", 1))


def load(path):
    p = Path(path)
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except ValueError:
        return None


def lines(path):
    p = Path(path)
    return p.read_text().splitlines() if p.exists() else []


def stats_records(path):
    out = []
    for line in lines(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def read_int(path):
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def schedule(path):
    events, header = [], {}
    for line in lines(path):
        if line.startswith("#"):
            k, _, v = line[1:].strip().partition("=")
            header[k.strip()] = v.strip()
        elif line.strip():
            at, kind, *args = line.split()
            events.append({"at_ms": int(at), "kind": kind, "args": " ".join(args)})
    return header, events


def injected(path):
    """soak.events: <due_ms> <start_unix_ms> <end_unix_ms> <kind> <rail> <waited_ms> <status> <fault.sh args>"""
    out = []
    for line in lines(path):
        f = line.split(" ", 7)
        if len(f) < 7:
            continue
        out.append({"at_ms": int(f[0]), "start_unix_ms": int(f[1]), "end_unix_ms": int(f[2]), "kind": f[3],
                    "rail": None if f[4] == "-" else int(f[4]), "waited_ms": int(f[5]), "status": f[6],
                    "fault_sh": f[7] if len(f) > 7 else ""})
    return out


def longest_gap(t, lo_ms, hi_ms):
    """Longest run of 10 ms bins without a receive completion that overlaps [lo_ms, hi_ms] (unix ms,
    the timeline's own clock); (length ms, start unix ms)."""
    if not t or not t.get("recv_msgs"):
        return None, None
    bin_ms, msgs, t0 = t["bin_ms"], t["recv_msgs"], t["start_unix_ms"]
    lo, hi = int((lo_ms - t0) // bin_ms), int((hi_ms - t0) // bin_ms)
    best, best_at, i = 0, 0, 0
    while i < len(msgs):
        if msgs[i]:
            i += 1
            continue
        j = i
        while j < len(msgs) and not msgs[j]:
            j += 1
        if j > lo and i <= hi and j - i > best:
            best, best_at = j - i, i
        i = j
    return best * bin_ms, t0 + best_at * bin_ms


COUNTERS = ("failovers", "failbacks", "reprotections", "reprotect_attempts", "replayed", "duplicates_dropped",
            "heartbeat_failures", "messages", "bytes_sent", "bytes_received")


def plugin_stats(records, ring):
    """Per side: the ring comms' counters (summed over its send and recv comm), the churn comms'
    (every other comm, last record each), event counts, the ring's events with times."""
    last = {}
    for r in records:
        if "comm" in r:
            last[r["comm"]] = r
    ring_ids = set(ring.values()) if ring else set()
    ring_sum = {k: sum(last[c].get(k, 0) for c in ring_ids if c in last) for k in COUNTERS}
    ring_sum["comms"] = {kind: {k: last[c].get(k) for k in ("active", "standby", "failovers", "failbacks",
                                                            "reprotections", "replayed")}
                         for kind, c in (ring or {}).items() if c in last}
    churn_comms = [c for c in last if c not in ring_ids]
    churn_sum = {k: sum(last[c].get(k, 0) for c in churn_comms) for k in COUNTERS}
    churn_sum["comms"] = len(churn_comms)
    churn_sum["closed"] = sum(1 for c in churn_comms if last[c].get("event") == "close")
    events = collections.Counter()
    ring_events = []
    for r in records:
        ev = r.get("event")
        if ev in (None, "init"):
            continue
        key = ev if ev != "standby" else f"standby {r.get('state')}"
        events[("ring " if r.get("comm") in ring_ids else "churn ") + key] += 1
        if r.get("comm") in ring_ids:
            ring_events.append(r)
    fatal = [{"comm": r.get("comm"), "ring": r.get("comm") in ring_ids, "why": r.get("why"),
              "time_unix_ms": r.get("time_unix_ms")} for r in records if r.get("event") == "fatal"]
    return ring_sum, churn_sum, dict(sorted(events.items())), ring_events, fatal


def warn_kinds(log_path):
    """Plugin WARN lines by kind (the message with numbers, pointers and ports blanked)."""
    c = collections.Counter()
    for line in lines(log_path):
        if " NCCL WARN " not in line:
            continue
        msg = line.split(" NCCL WARN ", 1)[1]
        msg = re.sub(r"0x[0-9a-f]+", "0x..", msg)
        msg = re.sub(r"\([^()]*\)", "(...)", msg)
        msg = re.sub(r"\d+(\.\d+)?", "N", msg)
        c[msg[:150]] += 1
    return dict(c.most_common())


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("logdir")
    ap.add_argument("prefix")
    ap.add_argument("--seed")
    ap.add_argument("--minutes", type=float)
    ap.add_argument("--churn", type=int)
    ap.add_argument("--trial", action="store_true")
    a = ap.parse_args(argv)
    out = Path(a.logdir)
    header, sched = schedule(out / "schedule.txt")
    events = injected(out / "a" / "out" / "soak.events")
    reps = {side: load(out / side / "out" / "soak.json") for side, _ in RANKS}
    rcs = {side: read_int(out / side / "out" / "soak.rc") for side, _ in RANKS}
    env = {}
    for line in lines(out / "a" / "out" / "soak.env"):
        k, _, v = line.partition("=")
        if k.startswith("HA_NCCL_") or k in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_SOCKET_IFNAME"):
            env[k] = v
    ra = reps["a"] or {}
    phase0 = ra.get("phase_start_unix_ms")
    offset_b = (ra.get("clock") or {}).get("peer_offset_ms", 0.0)  # b's clock = a's + offset

    result = {
        "kind": "soak", "trial": a.trial,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores; two qemu TCG VMs (1 vCPU each), "
                   "Soft-RoCE rxe; ring on rail 0 (rxe0) with its standby on rail 1 (rxe1); churn pairs on rxe1 "
                   "(standby rxe0)",
        "plugin_revision": os.environ.get("NCCL_HA_BENCH_REV", "unknown"),
        "seed": a.seed or header.get("seed"), "minutes": a.minutes or float(header.get("minutes", 0)),
        "schedule_rules": {k: header.get(k) for k in ("gap_s", "quiet_s", "max_failovers")},
        "settings": env, "exit_codes": rcs,
        "host_load": {l.split()[0]: " ".join(l.split()[1:]) for l in lines(out / "loadavg.txt") if l.strip()},
        "summary": (out / "summary.txt").read_text() if (out / "summary.txt").exists() else None,
    }

    # Stream, data, stall, churn, resources per rank.
    ranks = {}
    for side, rank in RANKS:
        r = reps[side]
        if not r:
            ranks[side] = {"report": "missing"}
            continue
        t = r.get("timeline") or {}
        integ = r.get("integrity") or {}
        res = r.get("resources") or {}
        ranks[side] = {
            "rank": rank, "ok": r.get("ok"), "exit_code": r.get("exit_code"), "errors": r.get("errors", []),
            "plugin_error": r.get("plugin_error"),
            "stream_s": (t.get("duration_ms") or 0) / 1000,
            "messages_received": integ.get("messages_received"), "bytes_received": integ.get("bytes_received"),
            "messages_sent": integ.get("messages_sent"), "bytes_sent": integ.get("bytes_sent"),
            "mismatches": integ.get("mismatches"), "size_errors": integ.get("size_errors"),
            "overruns": integ.get("overruns"), "verify": "full" if "verify=sampled" not in r.get("params", "") else "sampled",
            "max_stall_ms": t.get("max_gap_ms"), "max_stall_at_s": (t.get("max_gap_at_ms") or 0) / 1000,
            "send_max_gap_ms": t.get("send_max_gap_ms"),
            "churn": r.get("churn"), "ring": r.get("ring"),
            "resources": {k: res.get(k) for k in ("after_connect", "stream_end_first", "stream_end", "stream_settle_ms",
                                                 "before_init", "after_close", "after_dlclose")},
            "resource_checks": [c for c in r.get("checks", [])
                                if any(w in c["name"] for w in ("after the stream", "after finalize", "dlclose",
                                                                "after close", "MRs released", "QPs destroyed"))],
            "failed_checks": [c for c in r.get("checks", []) if not c["ok"]],
            "plugin_warnings": r.get("plugin_warnings"),
        }
    result["ranks"] = ranks

    # Plugin stats per side.
    plugin, ring_events = {}, {}
    for side, _ in RANKS:
        ring = (reps[side] or {}).get("ring")
        ring_ids = {"send": ring["send_comm"], "recv": ring["recv_comm"]} if ring else {}
        rsum, csum, evc, rev, fatal = plugin_stats(stats_records(out / side / "out" / "soak.stats.jsonl"), ring_ids)
        plugin[side] = {"ring": rsum, "churn_comms": csum, "events": evc, "fatal": fatal,
                        "warn_lines": warn_kinds(out / side / "out" / "soak.log")}
        ring_events[side] = rev
    result["plugin"] = plugin

    # Faults: what was injected and what the ring did in each event's window (a's clock).
    faults = []
    for i, e in enumerate(events):
        lo = e["start_unix_ms"]
        hi = events[i + 1]["start_unix_ms"] if i + 1 < len(events) else lo + 60000
        f = dict(e)
        f["start_s"] = round((lo - phase0) / 1000, 1) if phase0 else None
        f["fault_sh_ms"] = e["end_unix_ms"] - e["start_unix_ms"]
        react = {}
        for side, _ in RANKS:
            shift = offset_b if side == "b" else 0.0
            evs = [r for r in ring_events[side] if lo + shift <= r.get("time_unix_ms", 0) < hi + shift]
            t = (reps[side] or {}).get("timeline")
            stall, stall_at = longest_gap(t, lo + shift, hi + shift)
            react[side] = {
                "failovers": sum(1 for r in evs if r["event"] == "failover"),
                "failbacks": sum(1 for r in evs if r["event"] == "failback"),
                "standby_down": sum(1 for r in evs if r["event"] == "standby" and r.get("state") == "down"),
                "standby_up": sum(1 for r in evs if r["event"] == "standby" and r.get("state") == "up"),
                "failover_stall_ms": max((r.get("stall_ms", 0) for r in evs if r["event"] in ("failover", "failback")),
                                         default=None),
                "recv_stall_ms": stall,
                "recv_stall_after_event_ms": None if stall_at is None else round(stall_at - (lo + shift)),
            }
        f["ring"] = react
        faults.append(f)
    # Failovers no injected fault explains: before the first event, or in the window of an event
    # that takes no active path away (standby-down, recover): the soft RTO of a starved guest
    # (HA_NCCL_RTO_MS below the plugin's advice for rxe) or a bug; their causes are listed.
    unexpected = []
    for side, _ in RANKS:
        shift = offset_b if side == "b" else 0.0
        for rec in ring_events[side]:
            if rec["event"] != "failover":
                continue
            t = rec.get("time_unix_ms", 0) - shift
            owner = None
            for e in events:
                if e["start_unix_ms"] <= t:
                    owner = e
            if owner is None or owner["kind"] not in ("rail-down", "flap", "blackhole"):
                unexpected.append({"side": side, "kind": rec.get("kind"),
                                   "at_s": round((t - phase0) / 1000, 1) if phase0 else None,
                                   "during": owner["kind"] if owner else "before the first event",
                                   "cause": rec.get("cause"), "stall_ms": rec.get("stall_ms")})
    result["unexpected_failovers"] = unexpected
    result["schedule"] = sched
    result["faults"] = faults
    by_kind = collections.Counter(e["kind"] for e in events if e["status"] == "ok")
    result["faults_by_kind"] = dict(sorted(by_kind.items()))
    result["faults_not_injected"] = [e for e in events if e["status"] != "ok"]
    result["scheduled_not_reached"] = [s for s in sched if s["at_ms"] not in {e["at_ms"] for e in events}]

    # Totals.
    ok_ranks = [ranks[s] for s, _ in RANKS if ranks[s].get("report") != "missing"]
    result["bytes_verified"] = sum(r.get("bytes_received") or 0 for r in ok_ranks)
    result["messages_verified"] = sum(r.get("messages_received") or 0 for r in ok_ranks)
    result["max_stall_ms"] = max((r.get("max_stall_ms") or 0 for r in ok_ranks), default=None)
    result["churn_closed"] = {s: (ranks[s].get("churn") or {}).get("closed") for s, _ in RANKS}
    passed = all(rcs[s] == 0 for s, _ in RANKS) and all(r.get("ok") for r in ok_ranks) and len(ok_ranks) == 2
    why = []
    for s, _ in RANKS:
        if rcs[s] != 0:
            why.append(f"{s}: exit {rcs[s]}")
        for err in ranks[s].get("errors", [])[:3]:
            why.append(f"{s}: {err}")
    if result["faults_not_injected"]:
        why.append(f"{len(result['faults_not_injected'])} event(s) not injected")
    result["verdict"] = "passed" if passed and not result["faults_not_injected"] else "FAILED" if not passed else "passed (incomplete)"
    result["verdict_detail"] = why

    prefix = Path(a.prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.json").write_text(json.dumps(result, indent=1) + "\n")
    Path(f"{prefix}.md").write_text(markdown(result, a.churn))
    print(f"soak report: {prefix}.json, {prefix}.md ({result['verdict']})")
    return 0


def fmt_snap(s):
    if not s:
        return "n/a"
    return (f"fds {s.get('fds')}, threads {s.get('threads')}, QPs {s.get('qps')}, MRs {s.get('mrs')}, "
            f"RSS {s.get('rss_kib')} KiB")


def markdown(r, churn_target):
    L = []
    title = "Soak trial" if r["trial"] else "Soak"
    L.append(f"# {title} {r['date']}: {r['verdict']}\n")
    L.append(f"{r['machine']}. Plugin {r['plugin_revision']}. Seed {r['seed']}, {r['minutes']:g} min "
             f"(events every {r['schedule_rules'].get('gap_s')} s, at most "
             f"{str(r['schedule_rules'].get('max_failovers')).replace(' per ', ' failover-causing faults per ')}, all recovered {r['schedule_rules'].get('quiet_s')} s before the end). "
             f"Reproduce: `bench/soak.sh --minutes {r['minutes']:g} --seed {r['seed']}`.\n")
    if r["trial"]:
        L.append("A short trial run of the soak pipeline, not the 30-minute soak.\n")
    if r.get("host_load"):
        L.append("Host load (1/5/15 min): " + ", ".join(f"{k} {v}" for k, v in r["host_load"].items())
                 + " (other VM runs shared the 2 cores).\n")
    if r["verdict_detail"]:
        L.append("Verdict detail: " + "; ".join(r["verdict_detail"]) + "\n")
    ra, rb = r["ranks"].get("a", {}), r["ranks"].get("b", {})
    L.append("## Summary\n")
    L.append("| | a (rank 0) | b (rank 1) |")
    L.append("|---|---|---|")
    def row(name, fn):
        L.append(f"| {name} | {fn(ra)} | {fn(rb)} |")
    row("exit", lambda x: x.get("exit_code"))
    row("stream", lambda x: f"{x.get('stream_s', 0):.0f} s")
    row("received and verified", lambda x: f"{x.get('messages_received')} msgs, {(x.get('bytes_received') or 0) / 2**20:.0f} MiB "
        f"({x.get('verify')}); mismatches {x.get('mismatches')}, size errors {x.get('size_errors')}, overruns {x.get('overruns')}")
    row("longest receive stall", lambda x: f"{x.get('max_stall_ms') or 0:.0f} ms at {x.get('max_stall_at_s', 0):.1f} s")
    row("churn pairs closed", lambda x: (f"{(x.get('churn') or {}).get('closed')} of {(x.get('churn') or {}).get('n')}, "
        f"{(x.get('churn') or {}).get('messages_ok')} verified, {(x.get('churn') or {}).get('connect_failures')} "
        f"failed connect attempts (retried)"))
    row("first failed churn connect", lambda x: "`" + ((x.get('churn') or {}).get('failure_lines') or ['none'])[0] + "`")
    row("churn connect (listen to both comms) avg / max", lambda x: f"{(x.get('churn') or {}).get('connect_ms_avg') or 0:.0f} / "
        f"{(x.get('churn') or {}).get('connect_ms_max') or 0:.0f} ms")
    pa, pb = r["plugin"].get("a", {}), r["plugin"].get("b", {})
    for k in ("failovers", "failbacks", "reprotections", "replayed", "duplicates_dropped"):
        L.append(f"| ring {k} (plugin stats) | {pa.get('ring', {}).get(k)} | {pb.get('ring', {}).get(k)} |")
    L.append(f"| churn comms: failovers / re-protections (plugin stats) | {pa.get('churn_comms', {}).get('failovers')} / "
             f"{pa.get('churn_comms', {}).get('reprotections')} | {pb.get('churn_comms', {}).get('failovers')} / "
             f"{pb.get('churn_comms', {}).get('reprotections')} |")
    L.append(f"| fatal records | {len(pa.get('fatal', []))} | {len(pb.get('fatal', []))} |")
    L.append(f"\nTotal verified: {r['messages_verified']} messages, {r['bytes_verified'] / 2**20:.0f} MiB; longest stall "
             f"{r['max_stall_ms'] or 0:.0f} ms. Events injected by kind: "
             + ", ".join(f"{k} {v}" for k, v in r["faults_by_kind"].items()) + ".\n")
    if r.get("unexpected_failovers"):
        L.append(f"Failovers no injected fault explains ({len(r['unexpected_failovers'])}; a starved guest's soft RTO, "
                 "or a bug):\n")
        for u in r["unexpected_failovers"]:
            L.append(f"- {u['side']} {u['kind']} comm at {u['at_s']} s (during {u['during']}): {u['cause']}, "
                     f"stall {u['stall_ms']} ms")
        L.append("")
    L.append("## Resources (after the ring connected -> after the stream, before closing)\n")
    L.append("| | a | b |")
    L.append("|---|---|---|")
    for k, name in (("after_connect", "after connect"), ("stream_end_first", "stream end (at once)"),
                    ("stream_end", "stream end (settled)")):
        L.append(f"| {name} | {fmt_snap(ra.get('resources', {}).get(k))} | {fmt_snap(rb.get('resources', {}).get(k))} |")
    L.append(f"| settle wait | {ra.get('resources', {}).get('stream_settle_ms')} ms | {rb.get('resources', {}).get('stream_settle_ms')} ms |")
    for k, name in (("before_init", "before init"), ("after_close", "after finalize"), ("after_dlclose", "after dlclose")):
        L.append(f"| {name} | {fmt_snap(ra.get('resources', {}).get(k))} | {fmt_snap(rb.get('resources', {}).get(k))} |")
    L.append("")
    for side, x in (("a", ra), ("b", rb)):
        for c in x.get("resource_checks", []):
            L.append(f"- {side}: {c['name']}: {'ok' if c['ok'] else '**FAILED**'} ({c['detail']})")
    L.append("\n## Events (VM a; times from the stream's start)\n")
    L.append("| due s | injected s | kind | rail | fault.sh | waited for protection | status | ring a: fo/fb/sb-/sb+ | ring b: fo/fb/sb-/sb+ | stall a / b ms |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for f in r["faults"]:
        g = f["ring"]
        def re_(s):
            x = g[s]
            return f"{x['failovers']}/{x['failbacks']}/{x['standby_down']}/{x['standby_up']}"
        L.append(f"| {f['at_ms'] / 1000:.1f} | {f['start_s']} | {f['kind']} | {f['rail'] if f['rail'] is not None else '-'} | "
                 f"`{f['fault_sh']}` ({f['fault_sh_ms']} ms) | {f['waited_ms']} ms | {f['status']} | {re_('a')} | {re_('b')} | "
                 f"{g['a']['recv_stall_ms']} / {g['b']['recv_stall_ms']} |")
    L.append("\nfo/fb/sb-/sb+: the ring's failovers, failbacks, standby losses and returns in the plugin's stats "
             "from the event to the next one; stall: the longest gap between receive completions overlapping that window.\n")
    if r["scheduled_not_reached"]:
        L.append(f"Scheduled but not reached (the stream ended first): {len(r['scheduled_not_reached'])}.\n")
    L.append("## Plugin WARN lines (by kind)\n")
    for side in ("a", "b"):
        w = r["plugin"].get(side, {}).get("warn_lines", {})
        L.append(f"- {side}: " + ("; ".join(f"{n} x `{k}`" for k, n in list(w.items())[:12]) or "none"))
    L.append("\n## Settings\n")
    L.append(", ".join(f"`{k}={v}`" for k, v in r["settings"].items()) + "\n")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
