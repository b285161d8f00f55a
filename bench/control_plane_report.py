#!/usr/bin/env python3
"""Turns a control-plane-bench run into <prefix>.json and <prefix>.md: the plugin's data path
before and after a change, measured in the same two-VM boot (see control-plane-bench.sh).

  control_plane_report.py LOGDIR META.json PREFIX

LOGDIR is run-pair's log dir ({a,b}/out/r<round>-<before|after>-<k>-{bw,lat}.json, written by
control-plane-bench.guest.sh), META the host script's record (revisions, binaries, host load).

Bandwidth: ha-net-driver --bw, both directions at once, MiB/s received by rank 0 plus rank 1.
Latency: ha-net-driver --pingpong, rank 0's median RTT/2 of the run. For each figure: the median
over all runs of each plugin, the ratio after / before, the spread (min..max) over the runs, the
ratio per round (mean of that round's two after runs / mean of its two before runs), and a verdict:
  no slower (..)                     the after median is at least as good as the before median
                                     ("beyond the spread" if every after run beats every before run)
  slower by X % (beyond the spread)  worse, and every after run is worse than every before run
  within the noise (..)              worse in the medians, but the runs of the two overlap
Any missing or failed driver run is an error (exit 1): no figure is made up from a partial run.
"""
import datetime
import json
import math
import re
import statistics
import sys
from pathlib import Path

BW_SIZES = (65536, 1 << 20, 4 << 20)
LAT_SIZES = (8, 65536)
VARIANTS = ("before", "after")


def fail(msg):
    print(f"control_plane_report: {msg}", file=sys.stderr)
    sys.exit(1)


def load_run(out, side, name, plugin):
    p = out / side / "out" / f"{name}.json"
    if not p.exists():
        fail(f"{p} is missing (the driver run did not finish)")
    j = json.loads(p.read_text())
    if not j.get("ok") or j.get("exit_code") != 0:
        fail(f"{p}: the driver run failed: {j.get('result')} {j.get('errors')}")
    if j.get("plugin") != plugin:
        fail(f"{p}: ran {j.get('plugin')}, expected {plugin}")
    return j


def size_name(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def figure(kind, size, runs, per_round):
    """runs: {variant: [values]}, per_round: {round: {variant: [values]}}."""
    higher_better = kind == "bw"
    b, a = runs["before"], runs["after"]
    bm, am = statistics.median(b), statistics.median(a)
    ratio = am / bm
    slower_pct = (1 - ratio) * 100 if higher_better else (ratio - 1) * 100
    worst_after = min(a) if higher_better else max(a)
    after_all_worse = (max(a) < min(b)) if higher_better else (min(a) > max(b))
    after_all_better = (min(a) > max(b)) if higher_better else (max(a) < min(b))
    if slower_pct <= 0:
        verdict = (f"no slower ({-slower_pct:.1f} % faster, beyond the spread)" if after_all_better else
                   f"no slower ({-slower_pct:.1f} % faster in the medians, within the noise)")
    elif after_all_worse:
        verdict = f"slower by {slower_pct:.1f} % (beyond the spread)"
    else:
        verdict = f"within the noise ({slower_pct:.1f} % slower in the medians, the runs overlap)"
    # Chance that every after run is worse (or better) than every before run if both were the same.
    chance = 1 / math.comb(len(a) + len(b), len(a))
    if "beyond the spread" in verdict and chance > 0.01:
        verdict += f"; but with {len(b)} / {len(a)} runs that happens by chance with p = {chance:.2f}"
    rounds = {}
    for r, v in sorted(per_round.items()):
        if v["before"] and v["after"]:
            rounds[r] = statistics.mean(v["after"]) / statistics.mean(v["before"])
    return {
        "figure": kind, "size": size, "unit": "MiB/s" if higher_better else "us",
        "before_median": bm, "after_median": am, "ratio_after_before": ratio,
        "slower_pct": slower_pct, "verdict": verdict, "chance_all_runs_ordered": chance,
        "before_min": min(b), "before_max": max(b), "after_min": min(a), "after_max": max(a),
        "before_spread_pct": (max(b) - min(b)) / bm * 100, "after_spread_pct": (max(a) - min(a)) / am * 100,
        "worst_after": worst_after, "ratio_per_round": rounds, "before_runs": b, "after_runs": a,
    }


def main(logdir, meta_path, prefix):
    out = Path(logdir)
    meta = json.loads(Path(meta_path).read_text())
    a = out / "a" / "out"
    names = sorted(p.name[:-len("-bw.json")] for p in a.glob("r*-*-*-bw.json"))
    if not names:
        fail(f"no runs in {a}")
    rounds = sorted({int(re.match(r"r(\d+)-", n).group(1)) for n in names})
    bw = {s: {v: [] for v in VARIANTS} for s in BW_SIZES}
    lat = {s: {v: [] for v in VARIANTS} for s in LAT_SIZES}
    bw_r = {s: {r: {v: [] for v in VARIANTS} for r in rounds} for s in BW_SIZES}
    lat_r = {s: {r: {v: [] for v in VARIANTS} for r in rounds} for s in LAT_SIZES}
    ha_confirmed, run_ms = {v: True for v in VARIANTS}, 0
    for r in rounds:
        for v in VARIANTS:
            for k in (1, 2):
                name = f"r{r}-{v}-{k}"
                plugin = meta[f"{v}_plugin"]
                ja, jb = (load_run(out, side, f"{name}-bw", plugin) for side in ("a", "b"))
                for xa, xb in zip(ja["bandwidth"], jb["bandwidth"]):
                    if xa["size"] != xb["size"]:
                        fail(f"{name}-bw: the ranks report different sizes")
                    if xa["size"] in bw:
                        bw[xa["size"]][v].append(xa["mib_s"] + xb["mib_s"])
                        bw_r[xa["size"]][r][v].append(xa["mib_s"] + xb["mib_s"])
                jl = load_run(out, "a", f"{name}-lat", plugin)
                load_run(out, "b", f"{name}-lat", plugin)
                for x in jl["latency"]:
                    if x["size"] in lat:
                        lat[x["size"]][v].append(x["median_us"])
                        lat_r[x["size"]][r][v].append(x["median_us"])
                for kind in ("bw", "lat"):
                    ms = a / f"{name}-{kind}.ms"
                    run_ms += int(ms.read_text()) if ms.exists() else 0
                    log = a / f"{name}-{kind}.log"
                    # The plugin logs its standby port at INFO (NET): "NET/HA: standby port of rxe0:1 is rxe1:1 ..."
                    if not (log.exists() and re.search(r"standby port of rxe0\S* is rxe1", log.read_text(errors="replace"))):
                        ha_confirmed[v] = False
    for table, kind in ((bw, "bw"), (lat, "lat")):
        for s, runs in table.items():
            for v in VARIANTS:
                if len(runs[v]) != 2 * len(rounds):
                    fail(f"{kind} {s}: {len(runs[v])} {v} runs, expected {2 * len(rounds)}")
    figures = [figure("bw", s, bw[s], bw_r[s]) for s in BW_SIZES] + [figure("lat", s, lat[s], lat_r[s]) for s in LAT_SIZES]
    commands = (a / "commands.txt").read_text().splitlines() if (a / "commands.txt").exists() else []
    failed = []  # attempts retried under NCCL_HA_BENCH_RETRIES (guest: failed-runs.tsv on each side)
    for side in ("a", "b"):
        tsv = out / side / "out" / "failed-runs.tsv"
        for line in tsv.read_text().splitlines() if tsv.exists() else []:
            name, variant, rc, peer_rc, why = (line.split("\t", 4) + [""] * 5)[:5]
            failed.append({"side": side, "run": name, "variant": variant, "exit": rc, "peer_exit": peer_rc, "why": why})
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": "two qemu TCG VMs (1 vCPU each), Soft-RoCE rxe; --dev 0 = rxe0, standby rxe1",
        "rounds": len(rounds), "runs_per_variant": 2 * len(rounds), "order": "before, after, after, before per round",
        "meta": meta, "ha_backup_logged": ha_confirmed, "timed_runs_ms_rank0": run_ms,
        "figures": figures, "failed_attempts": failed, "guest_commands": commands,
    }
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    Path(prefix + ".json").write_text(json.dumps(result, indent=2) + "\n")

    m = meta
    la = re.search(r"load average: ([0-9.]+)", m.get("host_load_at_start", ""))
    load1 = float(la.group(1)) if la else None
    changed = m.get("current_changed_files", [])
    dirty = (f" + uncommitted changes to {', '.join(f'`{x}`' for x in changed[:12])}{' ...' if len(changed) > 12 else ''}"
             if m["current_dirty"] else "")
    md = [f"# Control plane on the progress thread: data path before / after, {result['date']}", "",
          f"- before: `{m['baseline_rev']}` = {m['baseline_describe']} ({m['baseline_hash']}), "
          f"`{m['before_plugin']}` (sha256 {m['before_sha256'][:12]})",
          f"- after: {m['current_describe']} ({m['current_hash']}){dirty}, `{m['after_plugin']}` "
          f"(sha256 {m['after_sha256'][:12]})",
          f"- both driven by the current `ha-net-driver` (`{m['driver']}`); build type {m['build_type'] or '-'}",
          f"- machine: {result['machine']}; host {m['host_nproc']} cores, load at start: `{m['host_load_at_start']}`"
          + (f", at the end: `{m['host_load_at_end']}`" if m.get("host_load_at_end") else ""),
          f"- {len(rounds)} round(s) of before, after, after, before: {2 * len(rounds)} runs of each; "
          f"timed runs took {run_ms / 60000:.1f} min on rank 0",
          f"- HA on (`HA_NCCL_ENABLE_STANDBY=1`), standby port rxe0 -> rxe1 logged by the plugin in every run: "
          f"before {'yes' if ha_confirmed['before'] else '**no**'}, after {'yes' if ha_confirmed['after'] else '**no**'}",
          f"- failed driver attempts (retried): {len({(x['run'], x['variant']) for x in failed})}" + (" (listed below)" if failed else ""),
          "", *([f"**The host was loaded** (1-minute load {load1:.1f} at the start): under TCG every figure then moves "
                 "by tens of percent between runs; rerun on a quiet host before concluding anything.", ""]
                if load1 is not None and load1 > 1.0 else []),
          "Absolute figures are emulation artefacts (TCG); what counts is before against after in the same boot.",
          "Verdicts: *no slower* = the after median is at least as good (*beyond the spread* if every after run "
          "beats every before run, else *within the noise*); *slower by X % (beyond the spread)* = "
          "worse and every after run is worse than every before run; *within the noise* = worse in the medians "
          "but the runs overlap. If the two plugins were the same, all after runs would be worse than all before "
          f"runs by chance with p = 1 / C({4 * len(rounds)}, {2 * len(rounds)}) = {1 / math.comb(4 * len(rounds), 2 * len(rounds)):.3g}.", "",
          "## Bandwidth (`--bw`, both directions, 8 in flight, MiB/s received by both ranks)", "",
          "| size | before median | after median | after / before | before min..max | after min..max | per round | verdict |",
          "|---:|---:|---:|---:|---:|---:|---|---|"]

    def row(f, fmt):
        pr = ", ".join(f"{x:.2f}" for x in f["ratio_per_round"].values())
        return (f"| {size_name(f['size'])} | {fmt.format(f['before_median'])} | {fmt.format(f['after_median'])} | "
                f"{f['ratio_after_before']:.3f} | {fmt.format(f['before_min'])}..{fmt.format(f['before_max'])} "
                f"({f['before_spread_pct']:.0f} %) | {fmt.format(f['after_min'])}..{fmt.format(f['after_max'])} "
                f"({f['after_spread_pct']:.0f} %) | {pr} | {f['verdict']} |")
    md += [row(f, "{:.1f}") for f in figures if f["figure"] == "bw"]
    md += ["", "## Latency (`--pingpong`, one way = median RTT/2 of a run, us; lower is better)", "",
           "| size | before median | after median | after / before | before min..max | after min..max | per round | verdict |",
           "|---:|---:|---:|---:|---:|---:|---|---|"]
    md += [row(f, "{:.1f}") for f in figures if f["figure"] == "lat"]
    md += ["", "Spread: (max - min) / median over the runs of one plugin. Per round: mean of the round's two "
           "after runs / mean of its two before runs (bandwidth: above 1 is faster; latency: below 1 is faster).", "",
           "## Runs per figure", ""]
    for f in figures:
        md.append(f"- {f['figure']} {size_name(f['size'])}: before {', '.join(f'{x:.1f}' for x in f['before_runs'])}; "
                  f"after {', '.join(f'{x:.1f}' for x in f['after_runs'])}")
    md += ["", "## Failed attempts (retried, `NCCL_HA_BENCH_RETRIES`)", ""]
    md += [f"- {x['run']} ({x['variant']}), VM {x['side']}: exit {x['exit']} (peer {x['peer_exit']}): `{x['why']}`"
           for x in failed] or ["none"]
    md += ["", "## Commands", "", "Host:", "", "```sh"]
    md += [f"{k}={v} \\" for k, v in m["env"].items() if k != "NCCL_HA_BUILD_DIR"]
    md += [m["command"], "```", "", "Guest, rank 0 (rank 1 the same with `--rank 1 --peer a:PORT`), first round:", "", "```"]
    first = {c.split(":", 1)[0]: c for c in commands if c.startswith(("r1-before-1-", "r1-after-1-"))}  # last attempt
    md += list(first.values()) or ["(commands.txt missing)"]
    md += ["```", ""]
    Path(prefix + ".md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail("usage: control_plane_report.py LOGDIR META.json PREFIX")
    main(*sys.argv[1:])
