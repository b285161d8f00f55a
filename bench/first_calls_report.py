#!/usr/bin/env python3
"""Turns a first-calls-bench run (<logdir>/{a,b}/out/rN-vAPI-{on,off,before}.json) into <prefix>.json
and <prefix>.md: per API version and rank, the longest isend / irecv / test / regMr call of each run
right after connect, HA on (a standby pair built meanwhile) against HA off (and, with --baseline,
the baseline plugin with HA on: `before`), and over all runs the worst and the median of each
run's longest call and of its longest regMr. The target (issue #34 item 8): the longest call with
HA on no longer than with HA off, beyond the run-to-run spread of the same boot."""
import json
import re
import statistics
import sys
from pathlib import Path

ENTRIES = ("regMr", "isend", "irecv", "test")
MODE_NAMES = {"on": "with HA on", "off": "with HA off", "before": "of the baseline plugin with HA on"}


def runs(logdir):
    """{(api, mode): [ {rank, round, ok, longest: {entry: ms}} ]}"""
    out = {}
    for role, rank in (("a", 0), ("b", 1)):
        for f in sorted((logdir / role / "out").glob("r*-v*-*.json")):
            m = re.fullmatch(r"r(\d+)-v(\d+)-(on|off|before)\.json", f.name)
            if not m:
                continue
            r = json.loads(f.read_text())
            calls = r.get("calls", {})
            longest = {e: calls[e]["max_us"] / 1000 for e in ENTRIES if e in calls}
            out.setdefault((int(m[2]), m[3]), []).append(
                {"rank": rank, "round": int(m[1]), "ok": bool(r.get("ok")), "longest": longest})
    return out


def summary(samples):
    worst = [max(s["longest"].values(), default=0.0) for s in samples]
    reg = [s["longest"]["regMr"] for s in samples if "regMr" in s["longest"]]
    return {"runs": len(samples), "failed": sum(not s["ok"] for s in samples),
            "max_ms": max(worst, default=0.0), "median_ms": statistics.median(worst) if worst else 0.0,
            "regmr_median_ms": statistics.median(reg) if reg else 0.0,
            "per_entry_max_ms": {e: max((s["longest"].get(e, 0.0) for s in samples), default=0.0) for e in ENTRIES}}


def main(logdir, prefix):
    logdir, prefix = Path(logdir), Path(prefix)
    data = runs(logdir)
    if not data:
        sys.exit(f"first_calls_report: no runs in {logdir}")
    apis = sorted({api for api, _ in data})
    modes = [m for m in ("on", "off", "before") if any(mode == m for _, mode in data)]
    table = {api: {mode: summary(data.get((api, mode), [])) for mode in modes} for api in apis}
    every = {mode: summary([s for (api, m), ss in data.items() if m == mode for s in ss]) for mode in modes}
    result = {"bench": "first-calls", "per_api": {str(a): t for a, t in table.items()}, "all": every,
              "target": "longest call with HA on <= with HA off (same boot)",
              "met": every["on"]["max_ms"] <= every["off"]["max_ms"]}
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    args_file = logdir / "a" / "out" / "args.txt"
    args = args_file.read_text().strip() if args_file.exists() else "?"
    result["driver_args"] = args
    lines = ["# The longest plugin call right after connect: HA on against HA off", "",
             f"Each run: a fresh process, one connection, its buffers registered, then at once a stream "
             f"both ways (`ha-net-driver {args}`; HA on brings the standby pair up meanwhile). Both ranks' runs: "
             + ", ".join(f"{every[m]['runs']} {MODE_NAMES[m]}" for m in modes)
             + ", in one boot, after one warm-up run of each (not counted); times are TCG's.", "",
             "| API | HA | runs | failed | longest call, worst ms | median of the runs' longest | median of the runs' regMr | "
             + " | ".join(f"{e} worst" for e in ENTRIES) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * len(ENTRIES)]

    def row(api, mode, s):
        return (f"| {api} | {mode} | {s['runs']} | {s['failed']} | {s['max_ms']:.1f} | {s['median_ms']:.1f} | "
                f"{s['regmr_median_ms']:.1f} | " + " | ".join(f"{s['per_entry_max_ms'][e]:.1f}" for e in ENTRIES) + " |")
    lines += [row(f"v{api}", mode, table[api][mode]) for api in apis for mode in modes]
    lines += [row("all", mode, every[mode]) for mode in modes]
    lines += ["", f"Target: the longest call with HA on no longer than with HA off: "
              f"{every['on']['max_ms']:.1f} ms against {every['off']['max_ms']:.1f} ms: "
              f"{'met' if result['met'] else 'NOT met'}."]
    if "before" in every:
        lines += ["", f"regMr, the median of the runs' longest: {every['on']['regmr_median_ms']:.1f} ms with HA on "
                  f"against {every['before']['regmr_median_ms']:.1f} ms before (HA on) and "
                  f"{every['off']['regmr_median_ms']:.1f} ms with HA off."]
    prefix.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: first_calls_report.py LOGDIR PREFIX")
    main(sys.argv[1], sys.argv[2])
