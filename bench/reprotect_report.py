#!/usr/bin/env python3
"""Report of bench/reprotect-bench.sh: the delay from a port event to the start of the failover of
every comm on the host of the event, while those comms rebuild their standbys.

  reprotect_report.py LOGDIR META OUT      -> OUT.json, OUT.md

LOGDIR is the run-pair log dir (a/out holds the runs, see reprotect-bench.guest.sh); META the JSON
the host script wrote (revisions, plugins, load, command).

Per run, on VM a (all times wall clock of a):
  kernel   the first IBV_EVENT_PORT_ERR of rxe0 that the independent ibv_asyncwatch read after
           `ip link set eth0 down`
  logged   the plugin's WARN line "rxe0: async event: port error" (written by its event pump, on
           the progress thread): the plugin's own view of the event
  start    per comm on a, from HA_NCCL_STATS_FILE: a "failover" record's time_unix_ms - stall_ms
           (when its failover started), or a "fatal" record's time (the comm had no usable standby
           yet: the decision is made at the start); the first such record after the fault
Delays: logged - kernel (the event waiting for the progress thread), start - logged, start - kernel;
and start - command (from the start of `ip link set eth0 down`: an upper bound that does not rely on
ibv_asyncwatch getting the CPU at once).
"""
import json
import re
import statistics
import sys
from pathlib import Path

EVENT_LINE = re.compile(r"^(\d+) .*PORT_ERR")
LOGGED = re.compile(r"^(\d+\.\d+) .*NCCL WARN .*rxe0: async event: port error")


def quantiles(xs):
    if not xs:
        return None
    s = sorted(xs)
    pick = lambda q: s[min(len(s) - 1, int(round(q * (len(s) - 1))))]
    return {"n": len(s), "min": round(s[0], 1), "median": round(statistics.median(s), 1), "p90": round(pick(0.9), 1),
            "max": round(s[-1], 1)}


def read_faults(path):
    out = {}
    for line in path.read_text().splitlines():
        what, us = line.split()
        out[what] = int(us) / 1000.0  # ms
    return out


def first_after(lines, pattern, t_ms, scale):
    for line in lines:
        m = pattern.match(line)
        if m:
            t = float(m.group(1)) * scale
            if t >= t_ms - 1:
                return t
    return None


def analyse(out, name):
    faults = read_faults(out / f"{name}.faults")
    t_fault = faults["rail0-down"]
    ev = out / f"{name}.events-rxe0"
    kernel = first_after(ev.read_text().splitlines() if ev.exists() else [], EVENT_LINE, t_fault, 1e-3)
    log_lines = (out / f"{name}.log").read_text(errors="replace").splitlines()
    logged = first_after(log_lines, LOGGED, t_fault, 1e3)
    events = []
    for line in (out / f"{name}.stats.jsonl").read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            if e.get("event") != "init":
                events.append(e)
    comms = sorted({(e["pid"], e["comm"]) for e in events})
    starts, outcome = {}, {"failover": 0, "fatal": 0}
    standby_at_fault = {"up": 0, "other": 0}
    rebuilding = 0
    for c in comms:
        mine = [e for e in events if (e["pid"], e["comm"]) == c]
        before = [e for e in mine if e["time_unix_ms"] < t_fault]
        if before:
            standby_at_fault["up" if before[-1]["standby"] == "up" else "other"] += 1
        if any(e["event"] == "standby" and e["state"] == "connecting" and faults["rail1-up"] <= e["time_unix_ms"] < t_fault
               for e in mine):
            rebuilding += 1
        for e in mine:
            if e["event"] == "failover" and e["time_unix_ms"] - e["stall_ms"] >= t_fault - 5:
                starts[c] = e["time_unix_ms"] - e["stall_ms"]
                outcome["failover"] += 1
                break
            if e["event"] == "fatal" and e["time_unix_ms"] >= t_fault - 5:
                starts[c] = e["time_unix_ms"]
                outcome["fatal"] += 1
                break
    s = list(starts.values())
    res = {
        "name": name,
        "comms_on_a": len(comms),
        "standby_at_fault": standby_at_fault,
        "rebuilding_at_fault": rebuilding,
        "outcome": outcome,
        "no_reaction": len(comms) - len(starts),
        "fault_ms": {k: round(v - faults["rail1-down"], 1) for k, v in faults.items()},
        "kernel_to_logged_ms": round(logged - kernel, 1) if kernel and logged else None,
        "logged_to_start_ms": quantiles([x - logged for x in s]) if logged else None,
        "kernel_to_start_ms": quantiles([x - kernel for x in s]) if kernel else None,
        "command_to_start_ms": quantiles([x - t_fault for x in s]),  # from the start of `ip link set eth0 down`
    }
    return res


def main():
    logdir, meta_path, out_prefix = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    meta = json.loads(meta_path.read_text())
    out = logdir / "a" / "out"
    names = sorted({p.name[: -len(".faults")] for p in out.glob("r*-*.faults")},
                   key=lambda n: (int(n.split("-")[0][1:]), n))
    runs = [dict(analyse(out, n), variant=n.split("-")[1]) for n in names]
    summary = {}
    for v in ("before", "after"):
        mine = [r for r in runs if r["variant"] == v]
        pick = lambda key, q: [r[key][q] for r in mine if r[key]]
        summary[v] = {
            "runs": len(mine),
            "kernel_to_logged_ms": [r["kernel_to_logged_ms"] for r in mine],
            "kernel_to_start_median_ms": pick("kernel_to_start_ms", "median"),
            "kernel_to_start_max_ms": pick("kernel_to_start_ms", "max"),
            "logged_to_start_max_ms": pick("logged_to_start_ms", "max"),
            "failovers": [r["outcome"]["failover"] for r in mine],
            "fatal": [r["outcome"]["fatal"] for r in mine],
            "rebuilding_at_fault": [r["rebuilding_at_fault"] for r in mine],
        }
    failed = []
    for side in ("a", "b"):
        tsv = logdir / side / "out" / "failed-runs.tsv"
        for line in tsv.read_text().splitlines() if tsv.exists() else []:
            name, variant, rc, peer_rc, measured, why = (line.split("\t", 5) + [""] * 6)[:6]
            failed.append({"side": side, "run": name, "variant": variant, "exit": rc, "peer_exit": peer_rc,
                           "measured": measured == "1", "why": why})
    report = {"bench": "reprotect", "meta": meta, "runs": runs, "summary": summary, "failed_after_measuring": failed}
    Path(out_prefix + ".json").write_text(json.dumps(report, indent=2) + "\n")

    def fmt(xs):
        nums = [x for x in xs if isinstance(x, (int, float))]
        text = ", ".join(f"{x:.0f}" if isinstance(x, (int, float)) else "-" for x in xs) or "-"
        return f"**{statistics.median(nums):.0f}** ({text})" if nums else text

    env = meta.get("env", {})
    lines = [
        f"# Port event to failover start while comms re-protect ({meta.get('date', '')})",
        "",
        f"`bench/reprotect-bench.sh` (plugin before: `{meta.get('baseline_describe')}`, after: "
        f"`{meta.get('current_describe')}`{' (dirty)' if meta.get('current_dirty') else ''}; both driven by the "
        f"current ha-net-driver); "
        f"{env.get('NCCL_HA_BENCH_COMMS', '128')} comm pairs per run, host load "
        f"{meta.get('host_load_at_start', '?')} at the start, {meta.get('host_load_at_end', '?')} at the end.",
        "",
        "How: both ranks open N comm pairs on rxe0 (standby rxe1) and hold them open untouched. On VM a: rail 1",
        "goes down (every standby on a is lost), comes back 4 s later (PORT_ACTIVE: all comms rebuild their",
        f"standbys at once, each a verbs job), and {env.get('NCCL_HA_BENCH_FAULT_DELAY_MS', '300')} ms after rxe1 is ACTIVE",
        "again, rail 0 goes down. *kernel*: when an independent `ibv_asyncwatch` read rxe0's PORT_ERR; *logged*:",
        "the plugin's WARN line for it (timestamped by the driver, `NCCL_DEBUG_TIMESTAMP_LEVELS=WARN`), written",
        "when its event pump on the progress thread got to it; *start*: per comm on a, its failover record's",
        "time minus its stall, or its fatal record (no standby yet: decided at the start), from",
        "`HA_NCCL_STATS_FILE`. Every comm on a (2N + the driver's ring pair) is counted.",
        "",
        "| run | comms on a | standby up / rebuilding at the fault | kernel -> logged ms | kernel -> start ms (median / p90 / max) | logged -> start max ms | ip link -> start max ms | failovers / fatal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        ks = r["kernel_to_start_ms"] or {}
        ls = r["logged_to_start_ms"] or {}
        cs = r["command_to_start_ms"] or {}
        lines.append(f"| {r['name']} | {r['comms_on_a']} | {r['standby_at_fault']['up']} / {r['rebuilding_at_fault']} | "
                     f"{r['kernel_to_logged_ms'] if r['kernel_to_logged_ms'] is not None else '-'} | "
                     f"{ks.get('median', '-')} / {ks.get('p90', '-')} / {ks.get('max', '-')} | {ls.get('max', '-')} | "
                     f"{cs.get('max', '-')} | {r['outcome']['failover']} / {r['outcome']['fatal']} |")
    lines += ["", "Per variant: the median over its runs in bold, then each run's figure.", "",
              "| | before | after |", "|---|---|---|"]
    for key, label in (("kernel_to_logged_ms", "kernel -> logged (ms, per run)"),
                       ("kernel_to_start_median_ms", "kernel -> start, median over comms (ms, per run)"),
                       ("kernel_to_start_max_ms", "kernel -> start, last comm (ms, per run)"),
                       ("logged_to_start_max_ms", "logged -> start, last comm (ms, per run)"),
                       ("failovers", "comms failed over (per run)"),
                       ("fatal", "comms without a standby yet: fatal (per run)")):
        lines.append(f"| {label} | {fmt(summary['before'][key])} | {fmt(summary['after'][key])} |")
    if failed:
        lines += ["", "Runs whose driver failed after the measurement (their figures are above):", ""]
        lines += [f"- {f['run']} ({f['variant']}), VM {f['side']}: exit {f['exit']} (peer {f['peer_exit']}): "
                  f"`{f['why'][-160:]}`" for f in failed]
    lines.append("")
    Path(out_prefix + ".md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
