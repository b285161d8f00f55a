#!/usr/bin/env python3
"""Fault schedule of bench/soak.sh: random, reproducible from the seed (Python's Mersenne Twister
with random.Random(seed).random() only, which is stable across Python versions).

  soak_schedule.py --seed S --minutes M [--min-gap 20] [--max-gap 60] [--quiet 45]
                   [--max-failovers 8] [--window 600]

Prints a header of '# key=value' lines, then one event per line: "<at_ms> <kind> [args]", at_ms from
the start of the stream (the driver's integrity phase). Kinds (faults on one VM, a):

  rail-down            the active rail's link down (held until the next event, a recover)
  flap COUNT MS        the active rail flaps COUNT times, MS ms down / MS ms up (self-healing)
  blackhole            100 % loss on the active rail's egress, port up (held until a recover)
  standby-down         the standby rail's link down while the active one carries the stream (held)
  recover              every fault off: both links up, netem removed

The rails are named by role: the guest resolves "active" and "standby" from the plugin's stats
when the event is due. Rules, so that the stream must survive every event:
  - events are min-gap..max-gap seconds apart, the first min-gap..max-gap s into the stream;
  - a held fault (rail-down, blackhole, standby-down) is always followed by a recover, never by
    another fault: at most one rail is faulted at any time;
  - the fault kinds are drawn from a shuffled deck of the four (refilled when empty), so every kind
    comes up within the first four faults;
  - at most max-failovers failover-causing faults (rail-down, flap, blackhole) in any window of
    `window` seconds: the plugin allows HA_NCCL_MAX_RETRIES (default 10) failovers per connection
    in HA_NCCL_RETRY_WINDOW_MS (600 s) and then fails the connection by design; when the budget
    is used up the deck's next standby-down is taken instead;
  - everything is recovered at least `quiet` seconds before the end, so re-protection (and
    failback) complete before the resources are compared.
"""
import argparse
import random
import sys

FAULTS = ("rail-down", "flap", "blackhole", "standby-down")
HELD = ("rail-down", "blackhole", "standby-down")
CAUSES_FAILOVER = ("rail-down", "flap", "blackhole")


def schedule(seed, minutes, min_gap=20.0, max_gap=60.0, quiet=45.0, max_failovers=8, window=600.0):
    rng = random.Random(seed)
    end = minutes * 60.0
    last_fault_at = end - quiet - min_gap  # a held fault needs room for its recover
    events = []  # (at_s, kind, args)
    deck = []
    failover_times = []
    held = False
    t = 0.0
    while True:
        t += min_gap + (max_gap - min_gap) * rng.random()
        if held:
            if t > end - quiet:
                t = end - quiet
            events.append((t, "recover", ""))
            held = False
            continue
        if t > last_fault_at:
            break
        if not deck:
            deck = list(FAULTS)
            # Fisher-Yates with rng.random() only (random.shuffle's algorithm may change)
            for i in range(len(deck) - 1, 0, -1):
                j = int(rng.random() * (i + 1))
                deck[i], deck[j] = deck[j], deck[i]
        recent = [x for x in failover_times if x > t - window]
        kind = deck.pop()
        if kind in CAUSES_FAILOVER and len(recent) >= max_failovers:
            if "standby-down" in deck:
                deck.remove("standby-down")
                deck.append(kind)  # the displaced kind comes next time
            kind = "standby-down"
        args = ""
        if kind == "flap":
            count = 2 + int(rng.random() * 4)       # 2..5
            ms = 200 + 100 * int(rng.random() * 9)  # 200..1000
            args = f"{count} {ms}"
        if kind in CAUSES_FAILOVER:
            failover_times.append(t)
        events.append((t, kind, args))
        held = kind in HELD
    return events


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--min-gap", type=float, default=20.0)
    ap.add_argument("--max-gap", type=float, default=60.0)
    ap.add_argument("--quiet", type=float, default=45.0)
    ap.add_argument("--max-failovers", type=int, default=8)
    ap.add_argument("--window", type=float, default=600.0)
    a = ap.parse_args(argv)
    if not 0 < a.min_gap <= a.max_gap:
        ap.error("need 0 < --min-gap <= --max-gap")
    events = schedule(a.seed, a.minutes, a.min_gap, a.max_gap, a.quiet, a.max_failovers, a.window)
    print(f"# seed={a.seed}")
    print(f"# minutes={a.minutes:g}")
    print(f"# gap_s={a.min_gap:g}..{a.max_gap:g}")
    print(f"# quiet_s={a.quiet:g}")
    print(f"# max_failovers={a.max_failovers} per {a.window:g} s")
    print(f"# events={len(events)}")
    for t, kind, args in events:
        print(f"{int(t * 1000)} {kind}{' ' + args if args else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
