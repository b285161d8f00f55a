"""failover-standby-first: rail 1 (every comm's standby) pulled on VM a ~4 s into the stream: both
sides must report the standby down (stats 'standby' event, state 'down', and the INFO line) within
3 heartbeat intervals + slack, without a failover and without stopping the stream. Then rail 0 on
a ~12 s in: no path left -> ncclSystemError on both sides within the bound (as failover-both-down).
Before it, `slow`: a standby down only for unanswered heartbeats is still tried by a failover."""
from check import expect, expect_each
from failover_common import (STANDBY_DOWN_BOUND_MS, STANDBY_INFO, STANDBY_PORT, DATA_KIND, PRIMARY, check_fatal, data_comm,
                             expect_counters, expect_no_crash, expect_stream_ok, faults, log_text, on_a_clock,
                             received_between, stats)

MIN_SECONDS = 20  # failover-standby-first.guest.sh: the fault stream
SLOW_SECONDS = 12  # and the slow one


def check_slow(run):
    """A standby down only for unanswered heartbeats (rail 1 delayed by 6 s) is tried when the
    primary fails, and carries the stream (issue #19, item 4)."""
    a, b = expect_stream_ok(run, "slow", SLOW_SECONDS)
    fs = faults(run, "a", "slow")
    expect([f[2] for f in fs] == ["delay 1 6000", "rail-down 0", "clear 1"],
           f"slow: rail 1 delayed, rail 0 down, then rail 1's delay ended on a: {fs}")
    for role, rep in (("a", a), ("b", b)):
        kind = DATA_KIND[role]
        mine, last = data_comm(run, role, "slow", stats(run, role, "slow"))
        fo = [i for i, e in enumerate(mine) if e["event"] == "failover"]
        expect(len(fo) == 1 and mine[fo[0]]["from"] == PRIMARY and mine[fo[0]]["to"] == STANDBY_PORT,
               f"{role} slow: one failover of the {kind} comm, {PRIMARY} -> {STANDBY_PORT} "
               f"({[(mine[i]['from'], mine[i]['to'], mine[i]['cause']) for i in fo]})")
        if role == "a":  # a's own port event started it: its standby was down, for silence alone
            # (the switch itself writes the path it left as the standby, "failed, ...": not that one)
            before = [e for e in mine[:fo[0]] if e["event"] == "standby" and not e["why"].startswith("failed")] if fo else []
            expect(before and before[-1]["state"] == "down" and "no heartbeat answered" in before[-1]["why"],
                   f"a slow: the standby was down for unanswered heartbeats when the failover began "
                   f"({[(e['state'], e['why']) for e in before[-2:]]})")
        expect(not [e for e in mine if e["event"] == "fatal"], f"{role} slow: no fatal record")
        expect_counters(role, "slow", last, rep, 1)
    expect_no_crash(run, "slow")


def check(run):
    expect_each("failover-standby-first", [("slow", lambda: check_slow(run)), ("fault", lambda: check_fault(run))])


def check_fault(run):
    a, b = run.report("a", "fault"), run.report("b", "fault")
    fs = faults(run, "a", "fault")
    expect([f[2] for f in fs] == ["rail-down 1", "rail-down 0"], f"fault: rail 1 then rail 0 down on a: {fs}")
    (t1, t1_end, _), (t0, t0_end, _) = fs  # rail 1 fault.sh start/end, rail 0 fault.sh start/end
    seen = []
    for role in ("a", "b"):
        mine, _ = data_comm(run, role, "fault", stats(run, role, "fault"))
        kind = DATA_KIND[role]
        down = [e for e in mine if e["event"] == "standby" and e["state"] == "down"]
        expect(down, f"{role} fault: a 'standby down' stats event for the {kind} comm")
        at = on_a_clock(role, b, down[0]["time_unix_ms"])
        seen.append(at)
        expect(t1 - 50 <= at <= t1_end + STANDBY_DOWN_BOUND_MS,
               f"{role} fault: standby down {at - t1_end:.0f} ms after rail 1 went down (bound {STANDBY_DOWN_BOUND_MS} ms): "
               f"{down[0]['why']}")
        fo = [e for e in mine if e["event"] == "failover"]
        expect(not fo, f"{role} fault: no failover of the {kind} comm ({[e['cause'] for e in fo]})")
        info = [m for m in STANDBY_INFO.finditer(log_text(run, role, "fault"))
                if m.group(1) == STANDBY_PORT and m.group(2) == kind and m.group(4) == "down"]
        expect(info, f"{role} fault: INFO 'standby {STANDBY_PORT} of {kind} comm ... is down (...)'")
    t = a["timeline"]
    # Between both sides knowing the standby is down and the second fault, rail 0 alone carries on.
    lo, hi = max(seen), t0 - 100
    expect(hi - lo >= 1000, f"fault: {hi - lo:.0f} ms between 'standby down' on both sides and the second fault "
                            f"(the script leaves room for >= 1000 ms)")
    n = received_between(t, lo, hi)
    expect(n > 0, f"fault: the stream went on on rail 0 with its standby down: {n} messages in those {hi - lo:.0f} ms")
    check_fatal(run, "fault", t0_end, a, b, first_fault=t0)
