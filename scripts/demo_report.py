#!/usr/bin/env python3
"""Report of the demo's failover stream (scripts/demo.sh): what NCCL-style traffic saw when rail 0
was pulled mid-run, and the throughput timeline around the fault as an SVG.

  demo_report.py LOGDIR OUT.svg     (LOGDIR: build/vm-logs/demo; a = receiver, b = sender)
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from failover_report import series, svg  # noqa: E402  (the benchmark's plot, one panel here)

NAME = "plugin-failover"


def events(out, role):
    p = out / role / "out" / f"{NAME}.stats.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


def main(logdir, svg_path):
    out = Path(logdir)
    a = json.loads((out / "a" / "out" / f"{NAME}.json").read_text())
    b = json.loads((out / "b" / "out" / f"{NAME}.json").read_text())
    fault_line = (out / "b" / "out" / f"{NAME}.fault_ms").read_text().split()
    t_fault = int(fault_line[0]) + b["clock"]["peer_offset_ms"]  # b's clock -> a's
    t = a["timeline"]
    ia, ib = a["integrity"], b["integrity"]
    print(f"stream b -> a: {ib['messages_sent']} messages sent, {ia['messages_received']} received and verified "
          f"byte for byte ({ia['bytes_received'] / 2**20:.0f} MiB, mismatches {ia['mismatches']}), "
          f"driver exit codes a={a['exit_code']} b={b['exit_code']}")
    print(f"fault: '{' '.join(fault_line[2:])}' on b at +{(t_fault - t['start_unix_ms']) / 1000:.1f} s of "
          f"{t['duration_ms'] / 1000:.1f} s")
    for role, kind in (("b", "send"), ("a", "recv")):
        for e in events(out, role):
            if e.get("kind") == kind and e["event"] in ("failover", "failback", "fatal"):  # not the init record
                what = e.get("cause") or e.get("why")
                print(f"  {role} {kind} comm: {e['event']} {e.get('from', '')} -> {e.get('to', '')}: {what}; "
                      f"replayed {e.get('replayed_now', 0)}, plugin stall {e.get('stall_ms', 0):.1f} ms, "
                      f"duplicates dropped {e['duplicates_dropped']}")
    before = [y for x, y in series(t, t_fault) if -3000 <= x < 0]
    after = [y for x, y in series(t, t_fault) if 1000 <= x]
    print(f"throughput: {sum(before) / max(1, len(before)):.1f} MiB/s on rail 0 before, "
          f"{sum(after) / max(1, len(after)):.1f} MiB/s on rail 1 after; longest gap between receives "
          f"{t['max_gap_ms']:.0f} ms at +{t['max_gap_at_ms'] / 1000:.1f} s")
    Path(svg_path).write_text(svg([("NCCL traffic b -> a through libnccl-net-ha.so; rail 0 pulled on b at t = 0",
                                    series(t, t_fault), None)], x0=-4000, x1=8000))
    print(f"timeline plot: {svg_path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
