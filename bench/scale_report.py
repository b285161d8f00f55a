#!/usr/bin/env python3
"""Report of bench/scale-bench.sh: LOGDIR (run-pair's, with a/out and b/out) META OUT_PREFIX ->
OUT_PREFIX.json, .md, .svg. Per run n<N>-<on|off> and rank (a = rank 0, b = rank 1):
  connect     ms per comm pair to open N pairs (ha-net-driver's comms_test.connect_ms / N)
  cpu         percent of the guest's one vCPU used by the process over the idle sample, per
              thread name and in all (/proc ticks; the guest's busy share beside it)
  resources   RSS, fds, threads, QPs, CQs, MRs of the process during the hold
  failover    (HA on) each comm's failover record after rail 0 went down: first and last resume
              (ms after the fault), the spread last / first, fatal records
  reprotect   (HA on) each comm's first standby "up" record after the fault: when the last comm
              was protected again (ms after the fault and after rail 0 was ACTIVE again), and how
              many never were
"""
import json
import re
import sys
from pathlib import Path

ROLES = ("a", "b")


def read_kv(path):
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            try:
                out[k] = int(v)
            except ValueError:
                out[k] = v
    return out


def read_cpu(path):
    threads, guest = {}, None
    for line in path.read_text().splitlines():
        f = line.split()
        if f[0] == "guest":
            guest = (int(f[1]), int(f[2]))
        else:
            threads[f[0]] = (f[1], int(f[2]))
    return threads, guest


def cpu_use(out, name):
    p0, p1 = out / f"{name}.cpu0", out / f"{name}.cpu1"
    if not (p0.exists() and p1.exists()):
        return None
    (t0, g0), (t1, g1) = read_cpu(p0), read_cpu(p1)
    total = g1[1] - g0[1]
    if total <= 0:
        return None
    by_name = {}
    for tid, (tname, ticks) in t1.items():
        d = ticks - t0.get(tid, (tname, 0))[1]  # a thread born in the sample counts from 0
        by_name[tname] = by_name.get(tname, 0) + d
    pct = {k: round(100.0 * v / total, 2) for k, v in sorted(by_name.items())}
    return {"process_pct": round(sum(pct.values()), 2), "threads_pct": pct,
            "guest_busy_pct": round(100.0 * (g1[0] - g0[0]) / total, 2), "sample_ticks": total}


def stats_records(path):
    recs = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return recs


def fault_times(out, name):
    return {k: int(v) for k, v in read_kv(out / f"{name}.faults").items() if isinstance(v, int)}


def ha_figures(recs, n, t_down, t_active):
    fo = [r for r in recs if r.get("event") == "failover" and r["time_unix_ms"] >= t_down]
    ends = sorted(r["time_unix_ms"] - t_down for r in fo)
    starts = sorted(r["time_unix_ms"] - r.get("stall_ms", 0) - t_down for r in fo)
    up = {}
    for r in recs:
        if r.get("event") == "standby" and r.get("state") == "up" and r["time_unix_ms"] >= t_down:
            up.setdefault(r["comm"], r["time_unix_ms"])
    ups = sorted(up.values())
    fig = {
        "comms": 2 * n,
        "failovers": len(fo),
        "failed_over_comms": len({r["comm"] for r in fo}),
        "fatal": len([r for r in recs if r.get("event") == "fatal"]),
        "rescues": len([r for r in recs if r.get("event") == "rescue"]),
        "first_start_ms": round(starts[0], 1) if starts else None,
        "last_start_ms": round(starts[-1], 1) if starts else None,
        "first_resume_ms": ends[0] if ends else None,
        "median_resume_ms": ends[len(ends) // 2] if ends else None,
        "last_resume_ms": ends[-1] if ends else None,
        "spread_last_over_first": round(ends[-1] / ends[0], 2) if ends and ends[0] > 0 else None,
        "reprotected_comms": len(up),
        "not_reprotected": 2 * n - len(up),
        "last_reprotected_after_fault_ms": ups[-1] - t_down if ups else None,
        "last_reprotected_after_active_ms": (ups[-1] - t_active) if ups and t_active else None,
        "median_reprotected_after_fault_ms": ups[len(ups) // 2] - t_down if ups else None,
        "attempts": sum(r.get("reprotect_attempts", 0) for r in _last_per_comm(recs).values()),
        # attempts given up for want of the peer's answer, and requests written again meanwhile
        "timed_out": len([r for r in recs if r.get("event") == "standby" and "did not answer" in r.get("why", "")]),
        "reminders": sum(r.get("reprotect_reminders", 0) for r in _last_per_comm(recs).values()),
    }
    return fig


def _last_per_comm(recs):
    last = {}
    for r in recs:
        if "comm" in r:
            last[r["comm"]] = r
    return last


def collect(logdir):
    runs = {}
    names = set()
    for role in ROLES:
        for p in (logdir / role / "out").glob("n*-*.rc"):
            names.add(p.name[:-3])
    for name in sorted(names, key=lambda s: (int(re.match(r"n(\d+)-", s).group(1)), s)):
        n, variant = re.match(r"n(\d+)-(\w+)", name).groups()
        n = int(n)
        fa = fault_times(logdir / "a" / "out", name)
        run = {"name": name, "n": n, "ha": variant, "ranks": {}}
        if fa:
            run["faults_unix_ms"] = fa
        for role in ROLES:
            out = logdir / role / "out"
            rep = {}
            if (out / f"{name}.json").exists():
                try:
                    rep = json.loads((out / f"{name}.json").read_text())
                except json.JSONDecodeError:
                    rep = {}
            ct = rep.get("comms_test") or {}
            r = {"rc": int((out / f"{name}.rc").read_text().strip() or -1) if (out / f"{name}.rc").exists() else None,
                 "connect_ms_per_pair": round(ct["connect_ms"] / n, 2) if ct.get("connect_ms") else None,
                 "connect_ms": ct.get("connect_ms"),
                 "rss_per_pair_kib": ct.get("rss_per_comm_kib"),
                 "messages_ok": ct.get("messages_ok"),
                 "resources": read_kv(out / f"{name}.res"),
                 "cpu": cpu_use(out, name)}
            # The fault is timed on a's clock; b's records are on b's: the drivers' measured offset
            # ("peer = here + X" on b) puts the fault on b's clock (guests' clocks drift apart by
            # up to several hundred ms under TCG).
            off = round((rep.get("clock") or {}).get("peer_offset_ms") or 0) if role != "a" else 0
            r["clock_offset_ms"] = off
            if variant == "on" and fa.get("rail0-down"):
                r["ha"] = ha_figures(stats_records(out / f"{name}.stats.jsonl"), n, fa["rail0-down"] - off,
                                     fa["rail0-active"] - off if fa.get("rail0-active") else None)
            run["ranks"][role] = r
        runs[name] = run
    return list(runs.values())


def fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}{unit}"
    return f"{v}{unit}"


def thread_summary(cpu):
    if not cpu:
        return "-"
    top = sorted(cpu["threads_pct"].items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k} {v:.1f}" for k, v in top)


def markdown(runs, meta):
    lines = [f"# Scale benchmark ({meta.get('rails', 2)} rails)", "",
             f"Revision `{meta.get('revision')}`, command `{meta.get('command')}`, host: {meta.get('host_nproc')} cores, "
             f"load at start `{meta.get('host_load_at_start')}`. One emulated vCPU per VM (TCG): absolute figures are "
             "inflated many times; the growth with N is the result. N = comm pairs per rank (each rank N send + "
             "N receive comms); HA on = `HA_NCCL_ENABLE_STANDBY=1` (failback off), off = `0`.", "",
             "## Idle cost (no plugin call; 10 s sample, percent of one vCPU)", "",
             "| N | HA | rank | process CPU % | top threads (%) | guest busy % | RSS MiB | fds | threads | QPs | CQs | MRs | connect ms/pair | RSS KiB/pair |",
             "|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for run in runs:
        for role, r in run["ranks"].items():
            res, cpu = r["resources"], r["cpu"]
            lines.append(f"| {run['n']} | {run['ha']} | {role} | {fmt(cpu and cpu['process_pct'])} | {thread_summary(cpu)} | "
                         f"{fmt(cpu and cpu['guest_busy_pct'])} | {fmt(res.get('rss_kib') and round(res['rss_kib'] / 1024, 1))} | "
                         f"{fmt(res.get('fds'))} | {fmt(res.get('threads'))} | {fmt(res.get('qps'))} | {fmt(res.get('cqs'))} | "
                         f"{fmt(res.get('mrs'))} | {fmt(r['connect_ms_per_pair'])} | {fmt(r['rss_per_pair_kib'])} |")
    lines += ["", "## Failover and re-protection (HA on; a's rail 0 down 5 s)", "",
              "Times in ms after the fault. Resume = the failover record (the comm carries traffic again); "
              "protected = the comm's first standby \"up\" record after the fault.", "",
              "| N | rank | comms | failed over | fatal | first resume | median | last resume | last / first | "
              "protected | last protected | after ACTIVE | attempts | timed out | reminders |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for run in runs:
        for role, r in run["ranks"].items():
            h = r.get("ha")
            if not h:
                continue
            lines.append(f"| {run['n']} | {role} | {h['comms']} | {h['failed_over_comms']} | {h['fatal']} | "
                         f"{fmt(h['first_resume_ms'])} | {fmt(h['median_resume_ms'])} | {fmt(h['last_resume_ms'])} | "
                         f"{fmt(h['spread_last_over_first'])} | {h['reprotected_comms']} | "
                         f"{fmt(h['last_reprotected_after_fault_ms'])} | {fmt(h['last_reprotected_after_active_ms'])} | "
                         f"{h['attempts']} | {h.get('timed_out', '-')} | {h.get('reminders', '-')} |")
    failed = [f"{run['name']} {role}: exit {r['rc']}" for run in runs for role, r in run["ranks"].items() if r["rc"] != 0]
    lines += ["", "Driver exits other than 0: " + (", ".join(failed) if failed else "none") + ".", ""]
    return "\n".join(lines) + "\n"


def series(runs, pick):
    """{(ha, role): [(n, value)]} for the plot."""
    out = {}
    for run in runs:
        for role, r in run["ranks"].items():
            v = pick(run, r)
            if v is not None:
                out.setdefault((run["ha"], role), []).append((run["n"], v))
    return out


def svg(runs, w=720, ph=200, m=60):
    import math
    panels = [
        ("Idle process CPU (% of one vCPU)", series(runs, lambda run, r: r["cpu"] and r["cpu"]["process_pct"])),
        ("RSS (MiB)", series(runs, lambda run, r: r["resources"].get("rss_kib") and r["resources"]["rss_kib"] / 1024)),
        ("Last comm resumed after the fault (ms)", series(runs, lambda run, r: r.get("ha") and r["ha"]["last_resume_ms"])),
        ("Last comm protected again after the fault (ms)",
         series(runs, lambda run, r: r.get("ha") and r["ha"]["last_reprotected_after_fault_ms"])),
    ]
    ns = sorted({run["n"] for run in runs}) or [1]
    lx0, lx1 = math.log2(ns[0]) - 0.3, math.log2(ns[-1]) + 0.3
    colors = {("on", "a"): "#1f77b4", ("on", "b"): "#6baed6", ("off", "a"): "#d62728", ("off", "b"): "#fc9272"}
    h = len(panels) * ph + 50
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='11'>",
             "<rect width='100%' height='100%' fill='white'/>",
             f"<text x='{w / 2}' y='18' text-anchor='middle' font-size='14'>Scale: cost and recovery against N comm pairs per rank (log2 x)</text>"]
    for i, (key, col) in enumerate(colors.items()):
        parts.append(f"<text x='{m + i * 150}' y='36' fill='{col}'>HA {key[0]}, rank {key[1]}</text>")

    def px(n):
        return m + (math.log2(n) - lx0) / (lx1 - lx0) * (w - 2 * m)

    for k, (title, data) in enumerate(panels):
        top = 45 + k * ph
        bottom = top + ph - 35
        ymax = max([v for pts in data.values() for _, v in pts] + [1]) * 1.15

        def py(v):
            return bottom - v / ymax * (bottom - top - 15)

        parts += [f"<text x='{m}' y='{top + 10}' font-size='12'>{title}</text>",
                  f"<line x1='{m}' y1='{bottom}' x2='{w - m}' y2='{bottom}' stroke='black'/>",
                  f"<line x1='{m}' y1='{top + 15}' x2='{m}' y2='{bottom}' stroke='black'/>",
                  f"<text x='{m - 5}' y='{py(ymax / 1.15) + 4:.1f}' text-anchor='end'>{ymax / 1.15:.0f}</text>",
                  f"<text x='{m - 5}' y='{bottom + 4}' text-anchor='end'>0</text>"]
        for n in ns:
            parts.append(f"<text x='{px(n):.1f}' y='{bottom + 14}' text-anchor='middle'>{n}</text>")
        for key, pts in sorted(data.items()):
            pts = sorted(pts)
            parts.append(f"<polyline fill='none' stroke='{colors.get(key, 'black')}' stroke-width='1.5' points='" +
                         " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in pts) + "'/>")
            parts += [f"<circle cx='{px(n):.1f}' cy='{py(v):.1f}' r='2.5' fill='{colors.get(key, 'black')}'/>" for n, v in pts]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv):
    if len(argv) != 4:
        print("usage: scale_report.py LOGDIR META OUT_PREFIX", file=sys.stderr)
        return 2
    logdir, meta_path, prefix = Path(argv[1]), Path(argv[2]), argv[3]
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    runs = collect(logdir)
    if not runs:
        print(f"scale_report: no runs in {logdir}", file=sys.stderr)
        return 1
    Path(prefix + ".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
    md = markdown(runs, meta) + f"\nPlot: `{Path(prefix).name}.svg`.\n"
    Path(prefix + ".md").write_text(md)
    Path(prefix + ".svg").write_text(svg(runs))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
