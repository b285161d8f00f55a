"""plugin-fused (issue #33): --one-way streams b -> a on a fused device of rails 0 and 1
(ha-net-driver --fuse 0,1) on the four-rail bed.

Expected in every case: every byte verified, each message counted once; both sides made the
fused device as net_ib merges it and said so; each side's fused comm stripes over two
connections, rxe0 and rxe1, equal weights, each protected by a standby on the next member's port
(the other one: the members' preferred standby port, before rails 2 and 3).
calm: no failover; on both hosts each of rails 0 and 1 carries within 10 % of half the packets
(their rxe counters over the stream), rails 2 and 3 next to nothing; every received group was
flushed (HA_NCCL_FORCE_FLUSH=1, --flush-each) and each member's receive comm read through its own
loopback QP.
weights: b's HA_NCCL_STRIPE_WEIGHTS_FILE says rxe0 3, rxe1 1, then (6 s in) rxe0 1, rxe1 3: b's
INFO lines name both; rail 0 carries 75 % of rails 0+1's packets before the change and 25 % after
it (each within 10 % of its weight), on both hosts.
member: b pulls rail 1 at 4 s, restores it at 9 s (failback on, 2 s hold). The member on rail 1
fails over to rail 0 on both sides, once, its parts in flight replayed exactly once (no duplicate
dropped, every byte verified), the member on rail 0 never switches; while rail 1 is down, rail 0
carries (almost) all the packets; the member is re-protected on rail 1 and fails back after the
hold, and from then on both rails carry their half again (within 10 %).
both: b pulls rail 1, then, once both members' send comms have a standby on rail 2 or 3 again,
rail 0: every member ends on rail 2 or 3 at both ends after one failover more than it had (member
1: rxe0 -> rail 2/3; member 2: rxe1 -> rxe0 -> rail 2/3), no duplicate dropped, every byte
verified, and from a second after rail 0 went, rails 2 and 3 carry the stream."""
import re

from check import expect
from failover_common import (PORT_DOWN_STALL_BOUND_MS, counters, expect_no_crash, expect_stream_ok, faults, log_text,
                             stall_around, stats)

SHARE_TOLERANCE = 0.10   # of each member's weight (issue #33: rxe counters within 10 % of the weights)
HOLD_MS = 2000           # HA_NCCL_FAILBACK_HOLD_MS of the member case
STRIPES = re.compile(r"NET/HA: fused (send|recv) comm \S+ \((\S+)\) stripes each message over (\d+) connections: (.*)")
MEMBER = re.compile(r"(send|recv) comm (\S+) on (\S+) \(weight (\d+)\)")
MADE = re.compile(r"NET/HA: makeVDevice (\S+) is device (\d+) \(speed (\d+), rail (-?\d+), plane (\d+)\): each "
                  r"connection on it stripes over its (\d+) ports")
KIND = {"a": "recv", "b": "send"}


def members(run, role, name):
    """{comm id: port} of the members of this side's fused comm of the stream, from its INFO line (the
    driver opens both kinds; the stream runs b -> a)."""
    lines = [x for x in STRIPES.findall(log_text(run, role, name)) if x[0] == KIND[role]]
    expect(len(lines) == 1, f"{role} {name}: one fused {KIND[role]} comm said it stripes ({len(lines)})")
    if not lines:
        return {}
    kind, ports, count, text = lines[0]
    found = MEMBER.findall(text)
    expect(kind == KIND[role] and ports == "rxe0+rxe1" and count == "2" and [m[2] for m in found] == ["rxe0:1", "rxe1:1"]
           and len({m[3] for m in found}) == 1,
           f"{role} {name}: the {KIND[role]} comm stripes over rxe0 and rxe1, equal weights: {lines[0]}")
    made = MADE.findall(log_text(run, role, name))
    expect(len(made) == 1 and made[0][0] == "rxe0+rxe1" and made[0][1] == "4" and made[0][5] == "2",
           f"{role} {name}: makeVDevice rxe0+rxe1 is device 4 ({made})")
    return {m[1]: m[2] for m in found}


def member_events(run, role, name):
    """{port: [events of the member comm on that port]} from NAME.stats.jsonl."""
    ids = members(run, role, name)
    events = stats(run, role, name)
    out = {}
    for i, (comm, port) in enumerate(ids.items()):
        mine = [e for e in events if e["kind"] == KIND[role] and e["comm"].endswith(comm.removeprefix("0x"))]
        want = f"rxe0+rxe1 {i + 1}/2"
        expect(mine and all(e.get("member") == want for e in mine),
               f"{role} {name}: stats events of the member on {port} ({comm}), each saying \"member\": \"{want}\"")
        out[port] = mine
    return out


def rail_share(samples, t0, t1):
    """Packets of rails 0..3 between the samples closest inside [t0, t1], and rail 0's share of rails 0+1."""
    s = [x for x in samples if t0 <= x[0] <= t1]
    if len(s) < 2:
        return None, None
    delta = [b - a for a, b in zip(s[0][1], s[-1][1])]
    return delta, delta[0] / max(1, delta[0] + delta[1])


def expect_halves(run, role, name, t0, t1, what, want=0.5):
    """Rail 0's share of rails 0+1's packets in [t0, t1] within SHARE_TOLERANCE of its weight `want`."""
    delta, share = rail_share(counters(run, role, name), t0, t1)
    expect(delta is not None, f"{role} {name}: counter samples {what}")
    if delta is None:
        return
    lo, hi = want * (1 - SHARE_TOLERANCE), want * (1 + SHARE_TOLERANCE)
    expect(lo <= share <= hi,
           f"{role} {name}: rail 0 carried {share:.1%} of rails 0+1's {delta[0] + delta[1]} packets {what} "
           f"(its weight {want:.0%}, within {SHARE_TOLERANCE:.0%}: {lo:.1%}-{hi:.1%}; per rail {delta})")
    expect(delta[2] + delta[3] <= 0.02 * max(1, delta[0] + delta[1]),
           f"{role} {name}: rails 2 and 3 carried no stream ({delta})")


def check_calm(run):
    a, b = expect_stream_ok(run, "calm", 8)
    for role in ("a", "b"):
        per = member_events(run, role, "calm")
        for port, events in per.items():
            expect(not [e for e in events if e["event"] in ("failover", "fatal")], f"{role} calm: member on {port}: no "
                                                                                   f"failover")
            up = [e for e in events if e["event"] == "standby" and e["state"] == "up"]
            want = "rxe1:1" if port == "rxe0:1" else "rxe0:1"
            expect(up and all(e["standby_port"] == want for e in up),
                   f"{role} calm: member on {port} protected by a standby on {want}: {[e['standby_port'] for e in up]}")
        samples = counters(run, role, "calm")
        expect_halves(run, role, "calm", samples[0][0] if samples else 0, samples[-1][0] if samples else 0,
                      "over the stream")
        if role == "a":  # the receiver's members: each flushed through its own port's loopback QP
            for port, events in per.items():
                reads = events[-1]["flush_reads"]
                expect(reads[0] > 0 and reads[1] == 0,
                       f"a calm: member on {port}: flush READs through its own port (per slot {reads})")
    flushes = a["integrity"].get("flushes", None)
    print(f"check: info: calm: rank 0's flushes: {flushes}")
    expect_no_crash(run, "calm")
    return a["timeline"]["max_gap_ms"]


def check_member(run, calm_gap_ms):
    a, _ = expect_stream_ok(run, "member", 20)
    fs = faults(run, "b", "member")
    downs = [f for f in fs if f[2] == "rail-down 1"]
    ups = [f for f in fs if f[2] == "rail-up 1"]
    expect(len(downs) == 1 and len(ups) == 1, f"b member: rail 1 pulled and restored once: {fs}")
    if not downs or not ups:
        return
    offset = run.report("b", "member")["clock"]["peer_offset_ms"]  # b's clock + offset = a's
    for role in ("a", "b"):
        per = member_events(run, role, "member")
        to_a = offset if role == "b" else 0
        for port, events in per.items():
            fo = [e for e in events if e["event"] == "failover"]
            fb = [e for e in events if e["event"] == "failback"]
            last = events[-1]
            expect(last["duplicates_dropped"] == 0, f"{role} member: member on {port}: no duplicate dropped")
            if port == "rxe0:1":
                expect(not fo and not fb, f"{role} member: the member on rail 0 never switched ({len(fo)}, {len(fb)})")
                continue
            expect(len(fo) == 1 and fo[0]["from"] == "rxe1:1" and fo[0]["to"] == "rxe0:1",
                   f"{role} member: the member on rail 1 failed over to rail 0 once: "
                   f"{[(e['from'], e['to'], e['cause']) for e in fo]}")
            warn = re.compile(rf"NET/HA: failover of {KIND[role]} comm \S+ \(member 2/2 of rxe0\+rxe1\) rxe1:1 -> rxe0:1")
            expect(len(warn.findall(log_text(run, role, "member"))) == 1,
                   f"{role} member: one WARN 'failover of {KIND[role]} comm ... (member 2/2 of rxe0+rxe1) rxe1:1 -> rxe0:1'")
            if fo:  # on a's clock
                at, t0, t1 = fo[0]["time_unix_ms"] + to_a, downs[0][0] + offset, downs[0][1] + offset
                expect(t0 - 50 <= at <= t1 + PORT_DOWN_STALL_BOUND_MS,
                       f"{role} member: failover {at - t1:.0f} ms after the fault (bound {PORT_DOWN_STALL_BOUND_MS} "
                       f"ms); plugin stall {fo[0]['stall_ms']} ms, replayed {fo[0]['replayed_now']}")
            expect(len(fb) == 1 and fb[0]["from"] == "rxe0:1" and fb[0]["to"] == "rxe1:1",
                   f"{role} member: the member on rail 1 failed back once the rail was back: "
                   f"{[(e['from'], e['to'], e['cause']) for e in fb]}")
            expect(last["active"] == "rxe1:1", f"{role} member: the member on rail 1 ended there ({last['active']})")
        # While rail 1 was down (from 1 s after the fault to the rail's return): rail 0 carried it all.
        down_t0 = downs[0][1] + 1000 + (0 if role == "b" else offset)
        down_t1 = ups[0][0] + (0 if role == "b" else offset)
        delta, share = rail_share(counters(run, role, "member"), down_t0, down_t1)
        expect(delta is not None, f"{role} member: counter samples while rail 1 was down (from 1 s after the "
                                  f"fault, {down_t1 - down_t0:.0f} ms)")
        expect(delta is None or share >= 0.95,
               f"{role} member: while rail 1 was down, rail 0 carried the stream ({delta}, share {share})")
        # After the failback (the sender's, on its clock): both halves again.
        fb_b = [e for e in member_events(run, "b", "member").get("rxe1:1", []) if e["event"] == "failback"]
        if fb_b:
            since = fb_b[0]["time_unix_ms"] + 1000 + (0 if role == "b" else offset)
            samples = counters(run, role, "member")
            expect(samples and samples[-1][0] - since >= 2000,
                   f"{role} member: at least 2 s of stream after the failback to judge the split")
            if samples:
                expect_halves(run, role, "member", since, samples[-1][0], "after the failback")
    t = a["timeline"]
    t_start, t_fault = downs[0][0] + offset, downs[0][1] + offset
    stall, stall_at = stall_around(t, t_start, t_fault - t_start + PORT_DOWN_STALL_BOUND_MS)
    print(f"check: info: member: receive stall around the member's loss {stall} ms (bins) at +{stall_at} ms; "
          f"unfaulted longest gap {calm_gap_ms:.0f} ms -> excess {stall - calm_gap_ms:.0f} ms")
    expect(stall <= PORT_DOWN_STALL_BOUND_MS,
           f"member: receives stalled {stall} ms around the member's loss (bound {PORT_DOWN_STALL_BOUND_MS} ms)")
    expect_no_crash(run, "member")


WEIGHTS_INFO = re.compile(r"NET/HA: stripe weights from \S+: rxe0:1 (\d+), rxe1:1 (\d+),")


def check_weights(run):
    a, b = expect_stream_ok(run, "weights", 12)
    seen = [tuple(int(x) for x in m) for m in WEIGHTS_INFO.findall(log_text(run, "b", "weights"))]
    expect(seen == [(3, 1), (1, 3)], f"b weights: the weights file read twice, 3:1 then 1:3 ({seen})")
    changed = run.text("b", "weights.changed_ms").strip()
    expect(changed.isdigit(), f"b weights: the file was rewritten ({changed!r})")
    if not changed.isdigit():
        return
    offset = b["clock"]["peer_offset_ms"]
    for role in ("a", "b"):
        at = int(changed) + (offset if role == "a" else 0)  # on role's clock
        samples = counters(run, role, "weights")
        start = a["timeline"]["start_unix_ms"] - (0 if role == "a" else offset)  # rank 0's phase, on role's clock
        expect_halves(run, role, "weights", start + 1000, at, "under rxe0 3, rxe1 1", 0.75)
        end = samples[-1][0] if samples else 0
        expect(end - at >= 3000, f"{role} weights: {end - at} ms of stream after the change (at least 3 s)")
        expect_halves(run, role, "weights", at + 1000, end, "under rxe0 1, rxe1 3", 0.25)
    expect_no_crash(run, "weights")


def check_both(run):
    a, b = expect_stream_ok(run, "both", 16)
    fs = faults(run, "b", "both")
    downs = {f[2]: f for f in fs}
    expect(set(downs) == {"rail-down 1", "rail-down 0"}, f"b both: rails 1 and 0 pulled: {fs}")
    if set(downs) != {"rail-down 1", "rail-down 0"}:
        return
    offset = b["clock"]["peer_offset_ms"]
    far = ("rxe2:1", "rxe3:1")
    for role in ("a", "b"):
        for port, events in member_events(run, role, "both").items():
            fo = [(e["from"], e["to"]) for e in events if e["event"] == "failover"]
            last = events[-1]
            want_first = [] if port == "rxe0:1" else [("rxe1:1", "rxe0:1")]
            expect(len(fo) == len(want_first) + 1 and fo[:-1] == want_first and fo[-1][0] == "rxe0:1"
                   and fo[-1][1] in far,
                   f"{role} both: member on {port}: {want_first + [('rxe0:1', 'rxe2|3:1')]} ({fo})")
            expect(last["active"] in far and last["duplicates_dropped"] == 0,
                   f"{role} both: member on {port} ended on {last['active']}, duplicates dropped "
                   f"{last['duplicates_dropped']}")
        since = downs["rail-down 0"][1] + 1000 + (0 if role == "b" else offset)
        samples = counters(run, role, "both")
        s = [x for x in samples if x[0] >= since]
        expect(len(s) >= 4, f"{role} both: {len(s)} counter samples after rail 0 went (at least 4: 2 s)")
        if len(s) >= 2:
            delta = [y - x for x, y in zip(s[0][1], s[-1][1])]
            far_share = (delta[2] + delta[3]) / max(1, sum(delta))
            expect(far_share >= 0.95, f"{role} both: rails 2 and 3 carried {far_share:.1%} of the packets after "
                                      f"rails 1 and 0 went ({delta})")
    expect_no_crash(run, "both")


def check(run):
    check_member(run, check_calm(run))
    check_weights(run)
    check_both(run)
