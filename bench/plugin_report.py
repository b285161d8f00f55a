#!/usr/bin/env python3
"""Turns a plugin-bench run (<logdir>/{a,b}/out) into <prefix>.json, <prefix>.md and <prefix>.svg.

Bandwidth: ib_write_bw -b (both directions, 8 in flight) against ha-net-driver --bw (both
directions, 8 in flight, MiB/s received by each rank, summed). Latency: ib_write_lat typical
(median one-way) against ha-net-driver --pingpong median RTT/2. MB in perftest is 2^20 bytes.
"""
import datetime
import json
import platform
import statistics
import sys
from pathlib import Path

TARGETS = {"bw_ratio_min": 0.95, "bw_from_bytes": 1 << 20, "lat_ratio_max": 1.2, "mem_per_comm_kib_max": 1024}


def perftest_rows(path):
    rows = []
    lines = Path(path).read_text().splitlines() if Path(path).exists() else []
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            for data in lines[i + 1:]:
                parts = data.split()
                if len(parts) >= 5 and parts[0].isdigit():
                    rows.append([float(p) for p in parts[:9] if p.replace(".", "", 1).isdigit()])
                else:
                    break
    return rows


def spread(runs):
    """Run-to-run spread of one figure: (max - min) / mean over the rounds."""
    return (max(runs) - min(runs)) / statistics.mean(runs) if len(runs) > 1 and statistics.mean(runs) else 0.0


def before_after(a, rounds, base_pre, cur_pre, names):
    """Two variants' runs of the same boot, base_pre-rN-* against cur_pre-rN-* (the baseline's
    "before-" against this tree's ""; with HA off "off-" against ""; one port "" against a fused
    device's "fused-"; the sharp plugin's "sharp-fused-" against this tree's "fused-"): per size the
    means, cur/base, and the larger of the two spreads; a ratio beyond the spread (worse) is flagged."""
    base, cur = names
    order = (("before", base_pre), ("after", cur_pre))
    rows = []
    for kind, key, field, higher in (("bandwidth MiB/s", "plugin-bw", "bandwidth", True),
                                     ("latency RTT/2 us, ahead 2", "plugin-lat", "latency", False),
                                     ("latency RTT/2 us, just in time", "plugin-lat-jit", "latency", False)):
        table = {}
        for r in rounds:
            for which, p in order:
                fa = a / f"{p}{r}-{key}.json"
                if not fa.exists():
                    continue
                ja = json.loads(fa.read_text())
                if field == "bandwidth":
                    jb = json.loads((a.parent.parent / "b" / "out" / fa.name).read_text())
                    vals = [(x["size"], x["mib_s"] + y["mib_s"]) for x, y in zip(ja.get("bandwidth", []), jb.get("bandwidth", []))]
                else:
                    vals = [(x["size"], x["median_us"]) for x in ja.get("latency", [])]
                for size, v in vals:
                    table.setdefault(size, {"before": [], "after": []})[which].append(v)
        for size in sorted(table):
            b, f = table[size]["before"], table[size]["after"]
            if not b or not f:
                continue
            ratio = statistics.mean(f) / statistics.mean(b)
            sp = max(spread(b), spread(f))
            worse = (1 - ratio) if higher else (ratio - 1)
            rows.append({"figure": kind, "size": size, base: statistics.mean(b), cur: statistics.mean(f),
                         f"{cur}_over_{base}": ratio, "spread": sp, "worse_beyond_spread": worse > sp,
                         f"{base}_runs": b, f"{cur}_runs": f})
    return rows


def member_shares(out):
    """{side: {member: (port, bytes sent)}} over the fused runs' stats records (close events of the
    fused send comms' members, the "member" key)."""
    shares = {}
    for side in ("a", "b"):
        per = shares.setdefault(side, {})
        for f in sorted((out / side / "out").glob("fused-*.stats.jsonl")):
            for line in f.read_text().splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "close" and e.get("kind") == "send" and e.get("member"):
                    port, n = per.get(e["member"], (e["primary"], 0))
                    per[e["member"]] = (port, n + e["bytes_sent"])
    return shares


def comparison_md(rows, names, bad, bad_text, ok_text):
    """One comparison's table (rows of before_after with these names) and its verdict line."""
    base, cur = names
    title = {"before": "before", "after": "after", "off": "HA off", "on": "HA on", "port": "one port",
             "fused": "fused rxe0+rxe1", "sharp": "sharp plugin, one port", "sharp_fused": "sharp plugin, fused rxe0+rxe1"}
    md = [f"| figure | size | {title[base]} | {title[cur]} | {cur} / {base} | spread | |", "|---|---:|---:|---:|---:|---:|---|"]
    md += [f"| {r['figure']} | {r['size']} | {r[base]:.1f} | {r[cur]:.1f} | {r[f'{cur}_over_{base}']:.3f} | "
           f"{r['spread']:.3f} | {'**worse beyond spread**' if r['worse_beyond_spread'] else 'within spread'} |"
           for r in rows]
    return md + ["", f"Verdict: {bad_text + ', '.join(bad) if bad else ok_text}"]


def main(logdir, prefix, meta_path=None):
    out = Path(logdir)
    a, b = out / "a" / "out", out / "b" / "out"
    rounds = sorted({p.name.split("-")[0] for p in a.glob("r*-plugin-bw.json")})
    meta = json.loads(Path(meta_path).read_text()) if meta_path else None
    ba = before_after(a, rounds, "before-", "", ("before", "after")) if meta else []
    ha = before_after(a, rounds, "off-", "", ("off", "on")) if any(a.glob("off-r*-plugin-bw.json")) else []
    fu = before_after(a, rounds, "", "fused-", ("port", "fused")) if any(a.glob("fused-r*-plugin-bw.json")) else []
    # NVIDIA's nccl-rdma-sharp-plugins (its IB transport) on the same fused device and on one port
    sf = before_after(a, rounds, "sharp-fused-", "fused-", ("sharp_fused", "fused")) \
        if any(a.glob("sharp-fused-r*-plugin-bw.json")) else []
    sp = before_after(a, rounds, "sharp-", "", ("sharp", "port")) if any(a.glob("sharp-r*-plugin-bw.json")) else []
    sharp = json.loads((out / "sharp.json").read_text()) if (out / "sharp.json").exists() else {}
    shares = member_shares(out) if fu else {}
    bw, lat, jit = {}, {}, {}
    for r in rounds:
        for side in (a,):
            for f in side.glob(f"{r}-write_bw-*.log"):
                size = int(f.stem.split("-")[-1])
                rows = perftest_rows(f)
                if rows:
                    bw.setdefault(size, {"perftest": [], "plugin": []})["perftest"].append(rows[0][3])
            for f in side.glob(f"{r}-write_lat-*.log"):
                size = int(f.stem.split("-")[-1])
                rows = perftest_rows(f)
                if rows:
                    lat.setdefault(size, {"perftest": [], "plugin": []})["perftest"].append(rows[0][4])
        ra, rb = (json.loads((s / f"{r}-plugin-bw.json").read_text()) for s in (a, b))
        for xa, xb in zip(ra.get("bandwidth", []), rb.get("bandwidth", [])):
            bw.setdefault(xa["size"], {"perftest": [], "plugin": []})["plugin"].append(xa["mib_s"] + xb["mib_s"])
        rl = json.loads((a / f"{r}-plugin-lat.json").read_text())
        for x in rl.get("latency", []):
            lat.setdefault(x["size"], {"perftest": [], "plugin": []})["plugin"].append(x["median_us"])
        jit_file = a / f"{r}-plugin-lat-jit.json"
        for x in json.loads(jit_file.read_text()).get("latency", []) if jit_file.exists() else []:
            jit.setdefault(x["size"], []).append(x["median_us"])
    comms = json.loads((a / "plugin-comms.json").read_text()).get("comms_test", {}) if (a / "plugin-comms.json").exists() else {}

    def summarize(table, higher_is_better):
        rows = []
        for size in sorted(table):
            p, q = table[size]["perftest"], table[size]["plugin"]
            if not p or not q:
                continue
            pm, qm = statistics.mean(p), statistics.mean(q)
            rows.append({"size": size, "perftest": pm, "plugin": qm, "ratio": qm / pm if pm else None,
                         "perftest_runs": p, "plugin_runs": q})
        return rows

    bw_rows, lat_rows = summarize(bw, True), summarize(lat, False)
    for r in lat_rows:  # the receive posted just in time (--lat-ahead 1): its clear-to-send leads the message
        runs = jit.get(r["size"], [])
        r["plugin_jit"] = statistics.mean(runs) if runs else None
        r["ratio_jit"] = r["plugin_jit"] / r["perftest"] if runs and r["perftest"] else None
        r["plugin_jit_runs"] = runs
    big = [r for r in bw_rows if r["size"] >= TARGETS["bw_from_bytes"]]
    result = {
        "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()} {platform.machine()}, two qemu TCG VMs (1 vCPU each), Soft-RoCE rxe, rail 0",
        "rounds": len(rounds),
        "environment": {k: v for k, v in __import__("os").environ.items() if k.startswith("HA_NCCL_")},
        "bandwidth_mib_s": bw_rows,
        "latency_us": lat_rows,
        "memory": {"comms": comms.get("n"), "rss_per_comm_kib": comms.get("rss_per_comm_kib")},
        "targets": TARGETS,
        "verdict": {
            "bw_ratio_ge_1MiB_min": min((r["ratio"] for r in big), default=None),
            "lat_ratio_median": statistics.median([r["ratio"] for r in lat_rows]) if lat_rows else None,
            "lat_ratio_median_jit": statistics.median([r["ratio_jit"] for r in lat_rows])
            if lat_rows and all(r["ratio_jit"] is not None for r in lat_rows) else None,
            "mem_per_comm_kib": comms.get("rss_per_comm_kib"),
        },
    }
    if meta:
        result["baseline"] = meta
        result["before_after"] = ba
        result["verdict"]["after_worse_beyond_spread"] = [f"{r['figure']} {r['size']}" for r in ba if r["worse_beyond_spread"]]
    if ha:
        result["ha_on_off"] = ha
        result["verdict"]["ha_on_worse_beyond_spread"] = [f"{r['figure']} {r['size']}" for r in ha if r["worse_beyond_spread"]]
    if fu:
        result["fused_one_port"] = fu
        result["member_shares"] = shares
        result["verdict"]["fused_worse_beyond_spread"] = [f"{r['figure']} {r['size']}" for r in fu if r["worse_beyond_spread"]]
    if sf or sp:
        result["sharp_plugin"] = sharp
        result["fused_vs_sharp_fused"] = sf
        result["port_vs_sharp_port"] = sp
        result["verdict"]["fused_worse_than_sharp_beyond_spread"] = [f"{r['figure']} {r['size']}" for r in sf if r["worse_beyond_spread"]]
        result["verdict"]["port_worse_than_sharp_beyond_spread"] = [f"{r['figure']} {r['size']}" for r in sp if r["worse_beyond_spread"]]
    v = result["verdict"]
    Path(prefix + ".json").write_text(json.dumps(result, indent=2) + "\n")

    def ok(flag):
        return "met" if flag else "**not met**"

    md = [f"# Plugin benchmark, {result['date']}", "", f"Machine: {result['machine']}; {len(rounds)} interleaved rounds.",
          "Absolute figures are emulation artefacts; compare the ratios (plugin / perftest, same boot).",
          f"Environment: {' '.join(f'{k}={v}' for k, v in result['environment'].items()) or 'defaults'}.", "",
          "## Bandwidth (both directions, 8 in flight)", "", "| size | ib_write_bw -b MiB/s | plugin MiB/s | ratio |",
          "|---:|---:|---:|---:|"]
    md += [f"| {r['size']} | {r['perftest']:.1f} | {r['plugin']:.1f} | {r['ratio']:.2f} |" for r in bw_rows]
    md += ["", "## Latency (one way, median)", "",
           "plugin: receives posted two rounds ahead (`--lat-ahead 2`, NCCL's proxy posts its steps ahead);",
           "just in time: each receive posted right before the message it takes (`--lat-ahead 1`).", "",
           "| size | ib_write_lat typical us | plugin RTT/2 median us | ratio | just in time us | ratio |",
           "|---:|---:|---:|---:|---:|---:|"]

    def opt(x, f):
        return f.format(x) if x is not None else "-"
    md += [f"| {r['size']} | {r['perftest']:.1f} | {r['plugin']:.1f} | {r['ratio']:.2f} | "
           f"{opt(r['plugin_jit'], '{:.1f}')} | {opt(r['ratio_jit'], '{:.2f}')} |" for r in lat_rows]
    md += ["", "## Against the targets", "", "| figure | measured | target | |", "|---|---:|---:|---|"]
    if v["bw_ratio_ge_1MiB_min"] is not None:
        md.append(f"| bandwidth ratio, >= 1 MiB (worst size) | {v['bw_ratio_ge_1MiB_min']:.2f} | >= 0.95 | "
                  f"{ok(v['bw_ratio_ge_1MiB_min'] >= 0.95)} |")
    if v["lat_ratio_median"] is not None:
        md.append(f"| small-message latency ratio (median over sizes) | {v['lat_ratio_median']:.2f} | <= 1.2 | "
                  f"{ok(v['lat_ratio_median'] <= 1.2)} |")
    if v["lat_ratio_median_jit"] is not None:
        md.append(f"| the same, receives posted just in time | {v['lat_ratio_median_jit']:.2f} | <= 1.2 | "
                  f"{ok(v['lat_ratio_median_jit'] <= 1.2)} |")
    if v["mem_per_comm_kib"] is not None:
        md.append(f"| host memory per comm ({comms.get('n')} comms open) | {v['mem_per_comm_kib']:.0f} KiB | "
                  f"<= 1024 KiB | {ok(v['mem_per_comm_kib'] <= 1024)} |")
    if meta:
        md += ["", "## Before and after (same boot, same driver)", "",
               f"before: `{meta['baseline_describe']}` ({meta['baseline_hash'][:12]}); after: `{meta['current_describe']}`"
               f"{' (uncommitted changes)' if meta['current_dirty'] else ''}. Runs interleaved (the order turns each round).",
               "spread: (max - min) / mean over the rounds, the larger of before's and after's; a ratio worse than",
               "1 by more than the spread is flagged.", ""]
        md += comparison_md(ba, ("before", "after"), result["verdict"]["after_worse_beyond_spread"],
                            "after is worse than before beyond the spread at: ",
                            "after is as fast as before (every figure within the run-to-run spread or better).")
        md += ["", f"Host load at start: {meta.get('host_load_at_start', '-')}; at end: {meta.get('host_load_at_end', '-')}."]
    if ha:
        md += ["", "## HA on against HA off (same boot, same plugin)", "",
               "off: `HA_NCCL_ENABLE_STANDBY=0` (one path per comm, no standby pair, no heartbeats); on: the default.",
               "Runs interleaved (the order turns each round); spread as above; a ratio worse than 1 by more than",
               "the spread is flagged.", ""]
        md += comparison_md(ha, ("off", "on"), result["verdict"]["ha_on_worse_beyond_spread"],
                            "HA on is slower than HA off beyond the spread at: ",
                            "HA on is as fast as HA off (every figure within the run-to-run spread or better).")
    if fu:
        md += ["", "## A fused device of two ports against one port (same boot, same plugin)", "",
               "fused: `--fuse 0,1` with rxe0 and rxe1 visible (makeVDevice; each message split over a connection on",
               "each port by their weights, equal speeds here); one port: rxe0 alone (`HA_NCCL_IB_HCA==rxe0`). Runs",
               "interleaved (the order turns each round); spread as above. Both rails are emulated by the same host",
               "(TCG, one vCPU per guest, rxe in the guest kernel): what a second port adds or costs here is the",
               "emulator's (its per-NIC queues, the guest's CPU per work request), not what two real ports give.", ""]
        md += comparison_md(fu, ("port", "fused"), result["verdict"]["fused_worse_beyond_spread"],
                            "fused is slower than one port beyond the spread at: ",
                            "fused is as fast as one port or faster (every figure within the spread or better).")
        md += ["", "Each member's share of the bytes its side's fused send comms sent (the members' close records in",
               "the stats file, every fused run summed; weights 1:1):", "", "| side | member | port | bytes sent | share |",
               "|---|---|---|---:|---:|"]
        for side, per in sorted(shares.items()):
            total = sum(n for _, n in per.values()) or 1
            md += [f"| {side} | {m} | {port} | {n} | {n / total:.1%} |" for m, (port, n) in sorted(per.items())]
    if sf or sp:
        md += ["", "## Against NVIDIA's nccl-rdma-sharp-plugins (same boot, same driver)", "",
               f"The sharp plugin's IB transport (`{sharp.get('describe', 'unknown')}`, built by bench/sharp-lib.sh without",
               "SHARP and UCX, against a stand-in for the CUDA runtime that its IB transport does not call), driven by",
               "the same ha-net-driver: on the fused device of rxe0 and rxe1 (its makeVDevice, `NCCL_IB_HCA==rxe0,rxe1`)",
               "and on rxe0 alone, with its defaults. Runs interleaved with this tree's (the order turns each round);",
               "spread as above; a figure where this plugin is worse than the sharp plugin's by more than the spread",
               "is flagged.", ""]
        if sf:
            md += comparison_md(sf, ("sharp_fused", "fused"), result["verdict"]["fused_worse_than_sharp_beyond_spread"],
                                "this plugin's fused device is slower than the sharp plugin's beyond the spread at: ",
                                "this plugin's fused device is as fast as the sharp plugin's or faster "
                                "(every figure within the spread or better).")
        if sp:
            md += [""] + comparison_md(sp, ("sharp", "port"), result["verdict"]["port_worse_than_sharp_beyond_spread"],
                                       "this plugin on one port is slower than the sharp plugin beyond the spread at: ",
                                       "this plugin on one port is as fast as the sharp plugin or faster "
                                       "(every figure within the spread or better).")
    md += ["", f"Plot: `{Path(prefix).name}.svg`.", ""]
    Path(prefix + ".md").write_text("\n".join(md))
    Path(prefix + ".svg").write_text(svg(bw_rows))
    print("\n".join(md))


def svg(rows, w=640, h=400, m=60):
    """A dependency-free log-x line plot of bandwidth versus size."""
    import math
    if not rows:
        return "<svg xmlns='http://www.w3.org/2000/svg'/>"
    xs = [math.log2(r["size"]) for r in rows]
    ymax = max(max(r["perftest"], r["plugin"]) for r in rows) * 1.15
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1

    def px(x):
        return m + (x - x0) / (x1 - x0) * (w - 2 * m)

    def py(y):
        return h - m - y / ymax * (h - 2 * m)

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>",
             "<rect width='100%' height='100%' fill='white'/>",
             f"<text x='{w / 2}' y='20' text-anchor='middle' font-size='14'>Bandwidth vs message size (rail 0, Soft-RoCE)</text>",
             f"<line x1='{m}' y1='{h - m}' x2='{w - m}' y2='{h - m}' stroke='black'/>",
             f"<line x1='{m}' y1='{m}' x2='{m}' y2='{h - m}' stroke='black'/>",
             f"<text x='{w / 2}' y='{h - 15}' text-anchor='middle'>message size (bytes)</text>",
             f"<text x='15' y='{h / 2}' transform='rotate(-90 15 {h / 2})' text-anchor='middle'>MiB/s</text>"]
    for r, x in zip(rows, xs):
        parts.append(f"<text x='{px(x)}' y='{h - m + 15}' text-anchor='middle'>{r['size'] // 1024}K</text>")
    for i in range(5):
        y = ymax * i / 4
        parts.append(f"<text x='{m - 5}' y='{py(y) + 4}' text-anchor='end'>{y:.0f}</text>")
    for key, color in (("perftest", "#1f77b4"), ("plugin", "#d62728")):
        pts = " ".join(f"{px(x):.1f},{py(r[key]):.1f}" for r, x in zip(rows, xs))
        parts.append(f"<polyline points='{pts}' fill='none' stroke='{color}' stroke-width='2'/>")
        parts += [f"<circle cx='{px(x):.1f}' cy='{py(r[key]):.1f}' r='3' fill='{color}'/>" for r, x in zip(rows, xs)]
    parts += ["<text x='{}' y='{}' fill='#1f77b4'>ib_write_bw -b</text>".format(w - m - 120, m + 10),
              "<text x='{}' y='{}' fill='#d62728'>nccl-ha plugin</text>".format(w - m - 120, m + 28), "</svg>"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
