#!/usr/bin/env python3
"""Where the plugin's threads spend a profile (scale-bench.guest.sh with NCCL_HA_BENCH_PERF=1).

    bench/perf_attribute.py NAME.perf-script.gz [--from S] [--to S] [--top K] [--by-second]

Reads `perf script -F comm,tid,time,ip,sym,dso` with call chains and charges every sample of a
thread to the innermost frame of the plugin (libnccl-net-ha.so) on its stack: the plugin function
that the kernel's, rxe's and libc's time is spent under. Samples with no plugin frame are charged to
their leaf ("[kernel] sym", "[libc] sym"). Times are seconds since the profile's first sample.

    bench/perf_attribute.py NAME.perf-script.gz --inclusive [--thread ncclHaProgress] ...

charges every sample instead to each kernel entry on its stack that says what the thread asked the
kernel for (system calls, uverbs commands, rxe's verbs) and to each plugin function on it (a
sample counts once per entry; the shares add up to more than 100 %). Made for the plugin built
without frame pointers, whose kernel samples end at libc: where the kernel's time goes by verb.
"""
import argparse
import collections
import gzip
import re
import sys

PLUGIN = "libnccl-net-ha"


def short(sym: str) -> str:
    sym = re.sub(r"\(.*", "", sym)  # argument lists
    sym = re.sub(r"<[^<>]*(<[^<>]*>[^<>]*)*>", "<>", sym)  # template arguments
    return sym.replace("nccl_ha::plugin::", "").replace("nccl_ha::", "")


def samples(path):
    opener = gzip.open if path.endswith(".gz") else open
    head, frames = None, []
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if head:
                    yield head, frames
                head, frames = None, []
                continue
            if not line[0].isspace():
                m = re.match(r"\s*(.+?)\s+(\d+)\s+([\d.]+):", line)
                head = (m.group(1), float(m.group(3))) if m else None
                frames = []
                continue
            m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$", line)
            if m:
                frames.append((m.group(2), m.group(3)))
    if head:
        yield head, frames


def charge(frames):
    for sym, dso in frames:
        if PLUGIN in dso:
            return short(sym)
    if not frames:
        return "[?]"
    sym, dso = frames[0]
    where = "kernel" if "kernel" in dso else dso.rsplit("/", 1)[-1].split(".so")[0]
    return f"[{where}] {short(sym)}"


KERNEL_ENTRY = re.compile(r"^(__x64_sys_|ib_uverbs_|rxe_post|rxe_modify|rxe_req_notify|rxe_poll|rxe_create|rxe_destroy)")


def entries(frames):
    """The kernel entries (system calls, verbs) and plugin functions on a sample's stack."""
    out = set()
    for sym, dso in frames:
        if "kernel" in dso and KERNEL_ENTRY.match(sym):
            out.add(f"[kernel] {sym}")
        elif PLUGIN in dso:
            out.add(short(sym))
    return out or {charge(frames)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script")
    ap.add_argument("--from", dest="t_from", type=float, default=0.0)
    ap.add_argument("--to", dest="t_to", type=float, default=1e9)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--by-second", action="store_true", help="a table per second instead of one for the span")
    ap.add_argument("--inclusive", action="store_true", help="charge each kernel entry and plugin function on the stack")
    ap.add_argument("--thread", help="only this thread (its comm name, e.g. ncclHaProgress)")
    a = ap.parse_args()
    t0 = None
    per = collections.defaultdict(collections.Counter)  # (thread, second or span) -> function -> samples
    for (comm, t), frames in samples(a.script):
        t0 = t if t0 is None else t0
        rel = t - t0
        if rel < a.t_from or rel >= a.t_to or (a.thread and comm != a.thread):
            continue
        key = (comm, int(rel) if a.by_second else "span")
        if a.inclusive:
            per[key]["(samples)"] += 1
            for e in entries(frames):
                per[key][e] += 1
        else:
            per[key][charge(frames)] += 1
    if not per:
        sys.exit("perf_attribute: no samples in that span")
    for (comm, when), counts in sorted(per.items(), key=lambda kv: (str(kv[0][1]).zfill(6), kv[0][0])):
        total = counts.pop("(samples)") if a.inclusive else sum(counts.values())
        print(f"== {comm}, {'second ' + str(when) if a.by_second else 'the span'}: {total} samples")
        for fn, n in counts.most_common(a.top):
            print(f"  {n:6d} {100.0 * n / total:5.1f}%  {fn}")


if __name__ == "__main__":
    main()
