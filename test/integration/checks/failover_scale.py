"""failover-scale (issue #21): exactly once under a port fault with 256 comm pairs per rank.

Each rank holds 256 send + 256 receive comms on rxe0 (standby rxe1), every pair moving verified
64-byte messages both ways, round after round (ha-net-driver --comms-rounds: each round's bytes
are its own). During the rounds a's rail 0 goes down. Required:
  * every fd, QP and thread the plugin held given back after the linger (the retired QPs on the
    dead port may still be in the kernel's destruction at finalize);
  * both drivers exit 0 with every check passed: each comm carried each round's message exactly
    once (a copy delivered twice or lost fails it), no crash text;
  * the fault came while the rounds ran, no comm failed over before it (the load of 512 busy comms
    is no fault), every one of the 512 comms on each side failed over after it (stats records),
    none fatal;
  * messages were in flight and replayed (the failovers' replayed_now sum above 0);
  * every failover ended while the rounds still ran (rounds went on over the new paths).
The failover spread (first / median / last resume after the fault) is printed."""
import json
import re

from check import expect, fail
from failover_common import EVENT_KEYS, STATS_KEYS, expect_no_crash, faults

N = 256  # failover-scale.guest.sh
NAME = "scale"
COMMS = 2 * N  # the comms test's (the driver's ring pair closed before it)


def stats(run, role):
    """NAME.stats.jsonl's records, each with the documented keys (failover_common.stats, without
    listing thousands of events). Each gets "conn": its connection, (pid, comm, n): a comm's address
    is reused by a later one once it is closed (the ring's, here), n counts the closes before."""
    events = []
    closes = {}
    for n, line in enumerate(run.text(role, f"{NAME}.stats.jsonl").splitlines(), 1):
        e = json.loads(line)
        if e.get("event") == "init":
            continue
        missing = [k for k in STATS_KEYS + EVENT_KEYS.get(e.get("event"), ()) if k not in e]
        if e.get("event") not in EVENT_KEYS or missing:
            fail(f"{role}: {NAME}.stats.jsonl line {n}: event {e.get('event')!r}, missing keys {missing}")
        key = (e["pid"], e["comm"])
        e["conn"] = key + (closes.get(key, 0),)
        if e["event"] == "close":
            closes[key] = closes.get(key, 0) + 1
        events.append(e)
    print(f"check: info: {role}: {len(events)} stats records")
    return events


def rounds_of(rep):
    m = re.search(r"comms_rounds=(\d+)", rep["params"])
    return int(m.group(1)) if m else 1


def check(run):
    expect_no_crash(run, NAME)
    reps = {role: run.report(role, NAME) for role in ("a", "b")}
    for role, rep in reps.items():
        rc = run.rc(role, NAME)
        bad = [f"{c['name']}: {c['detail']}" for c in rep["checks"] if not c["ok"]]
        ct = rep["comms_test"]
        expect(rc == 0 and not bad and ct and ct["n"] == N,
               f"{role}: driver exit {rc}, {N} pairs, every check passed {bad or ''}")
        linger = [c for c in rep["checks"] if c["name"] == "threads, fds and QPs back after the linger"]
        expect(len(linger) == 1 and linger[0]["ok"],
               f"{role}: every fd, QP and thread the plugin held given back once its reaper was done "
               f"({linger[0]['detail'] if linger else 'no linger check: the driver ran without --linger'})")
        rounds = rounds_of(rep)
        expect(rounds > 1 and ct["messages_ok"] == N * rounds,
               f"{role}: {ct['messages_ok']} messages received and verified = {N} pairs x {rounds} rounds "
               f"(each exactly once)")
    fs = faults(run, "a", NAME)
    expect(len(fs) == 1 and fs[0][2] == "rail-down 0", f"a: one fault, rail 0 down: {fs}")
    t_fault = fs[0][0]
    offset = (reps["b"].get("clock") or {}).get("peer_offset_ms", 0.0)  # b's clock + offset = a's
    total = 0
    for role in ("a", "b"):
        t0, t1 = (int(x) for x in run.text(role, f"{NAME}.rounds_ms").split())
        fault_here = t_fault if role == "a" else t_fault - offset
        expect(t0 < fault_here < t1, f"{role}: the fault came {fault_here - t0:.0f} ms into the rounds, "
                                     f"which ended {t1 - fault_here:.0f} ms after it")
        events = stats(run, role)
        closed = {e["conn"] for e in events if e["event"] == "close" and e["time_unix_ms"] < fault_here}
        comms = {e["conn"] for e in events} - closed
        expect(len(comms) == COMMS, f"{role}: {len(comms)} comms open at the fault ({N} send + {N} receive)")
        fatal = [e for e in events if e["event"] == "fatal"]
        expect(not fatal, f"{role}: no fatal record ({[e['why'] for e in fatal[:3]]})")
        early = [e["cause"] for e in events if e["event"] == "failover" and e["time_unix_ms"] < fault_here]
        expect(not early, f"{role}: no failover before the fault ({len(early)}: {early[:2]})")
        fo = [e for e in events if e["event"] == "failover" and e["time_unix_ms"] >= fault_here]
        moved = {e["conn"] for e in fo}
        expect(moved == comms, f"{role}: every comm failed over after the fault ({len(moved)} of {len(comms)})")
        expect(len(fo) == len(comms), f"{role}: each once ({len(fo)} failovers)")
        replayed = sum(e["replayed_now"] for e in fo)
        total += replayed
        print(f"check: info: {role}: {replayed} message(s) replayed by the failovers")
        times = sorted(e["time_unix_ms"] - fault_here for e in fo)
        first, last = times[0], times[-1]
        print(f"check: info: {role}: failovers resumed {first:.0f} / {times[len(times) // 2]:.0f} / {last:.0f} ms "
              f"(first / median / last) after the fault, last / first {last / max(first, 1):.1f}")
        expect(max(e["time_unix_ms"] for e in fo) < t1,
               f"{role}: the last failover ended {t1 - max(e['time_unix_ms'] for e in fo):.0f} ms before the rounds "
               f"did (traffic went on over the new paths)")
    expect(total > 0, f"messages were in flight at the fault and replayed: {total} in all")
