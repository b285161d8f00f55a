"""failover-recovered: rail 0 of b went down and up again before the streams (a flapped link that
recovered); then, as in failover-sender-down, b's rail 0 goes down 5 s into a 15 s --one-way stream
b -> a. Expected exactly as for failover-sender-down: exit 0, every byte verified, one failover per
data comm within the port-down bound, no later stall on the standby.
`readdress`: b's rail 0 changed its address (its GID) under a running plugin; single-path comm
pairs opened on it afterwards connect and carry their messages (endpoints built from the port as
it is now).
`home-down` (issue #19 item 1): a's rail 0 is down before the stream; every comm on rail 0 (the
stream's both ways, churn pairs both ways) connects on the pair that is up, the stream verifies
every byte, and when a's rail 0 returns the stream's comms are re-protected at home and fail back
there, on both sides, without any failover or fatal record."""
from check import expect, expect_each, expect_exit
from failover_common import (STANDBY_PORT, PRIMARY, PORT_DOWN_STALL_BOUND_MS, SLACK_MS, check_failover, expect_no_crash,
                             expect_stream_ok, faults, log_text, on_a_clock, stats)

MIN_SECONDS = 15  # failover-recovered.guest.sh
CHURN = 8
MOVE_FAILURES = 2  # connects while the address moved (the port has none for a moment), opened again


def check_readdress(run):
    expect_exit(run, "readdress")
    fs = faults(run, "b", "readdress")
    expect([f[2] for f in fs] == ["readdress 0"], f"readdress: b's rail 0 readdressed once: {fs}")
    changed = fs[0][1]  # fault.sh returned: the new GID is listed
    expect("GID change" in log_text(run, "b", "readdress"), "readdress: b's plugin saw the GID change event (INFO)")
    for role in ("a", "b"):
        h = run.report(role, "readdress")["churn"]
        expect(h["closed"] == CHURN and h["messages_ok"] == CHURN and h["bad_messages"] == 0 and
               h["connect_failures"] <= MOVE_FAILURES,
               f"{role} readdress: {h['closed']} of {CHURN} churn pairs done, {h['messages_ok']} messages verified, "
               f"{h['connect_failures']} failed connects (at most {MOVE_FAILURES}, while the address moved: "
               f"{h['failure_lines'][:2]})")
    # b's churn comms on rxe0 that were opened after the change (b's clock, as fault_ms)
    events = stats(run, "b", "readdress")
    closes = [e for e in events if e["event"] == "close" and e["active"] == "rxe0:1"]
    after = [e for e in closes if e["time_unix_ms"] > changed]
    expect(len(after) >= 3 * 2, f"readdress: {len(after) // 2} churn pair(s) on rxe0:1 opened and closed after the "
                                f"address changed (at least 3)")
    expect(not [e for e in events if e["event"] in ("failover", "fatal")],
           "readdress: b: no failover or fatal record")
    expect_no_crash(run, "readdress")


HOME_DOWN_SECONDS = 14  # failover-recovered.guest.sh
HOME_DOWN_CHURN = 6
HOLD_MS = 1000  # HA_NCCL_FAILBACK_HOLD_MS of the home-down stream
STARTED = "started on " + STANDBY_PORT


def comms_of(events):
    """{(pid, comm): [events]} in record order."""
    out = {}
    for e in events:
        out.setdefault((e["pid"], e["comm"]), []).append(e)
    return out


def expect_churn_connected(run, role, name, n, where):
    """All N churn pairs of the stream connected, each carried its message, verified, no failed connect."""
    h = run.report(role, name)["churn"]
    expect(h["closed"] == n and h["messages_ok"] == n and h["bad_messages"] == 0 and h["connect_failures"] == 0,
           f"{role} {name}: {h['closed']} of {n} churn pairs on {where} connected, carried and verified their "
           f"message ({h['messages_ok']}), no failed connect ({h['connect_failures']})")


def check_home_down(run):
    name = "home-down"
    expect_stream_ok(run, name, HOME_DOWN_SECONDS)
    fs = faults(run, "a", name)
    expect([f[2] for f in fs] == ["rail-up 0"], f"{name}: a's rail 0 came back once during the stream: {fs}")
    back_ms = fs[0][0]  # a's clock
    rep_b = run.report("b", name)
    for role in ("a", "b"):
        expect_churn_connected(run, role, name, HOME_DOWN_CHURN, "rail 0")
        events = stats(run, role, name)
        bad = [e for e in events if e["event"] in ("failover", "fatal")]
        expect(not bad, f"{role} {name}: no failover or fatal record: {[(e['event'], e.get('why', e.get('cause'))) for e in bad]}")
        comms = comms_of(events)
        started = [k for k, es in comms.items() if es[0]["event"] == "standby" and es[0]["state"] == "down" and
                   STARTED in es[0]["why"] and "is down" in es[0]["why"]]
        expect(len(started) >= 4, f"{role} {name}: {len(started)} comms started on {STANDBY_PORT} with their own pair down "
                                  f"(the stream's two and the churn pairs' before the rail came back: at least 4)")
        for kind in ("send", "recv"):  # the stream's comm of each kind closes last
            mine = [es for es in comms.values() if es[0]["kind"] == kind and es[-1]["event"] == "close"]
            expect(mine, f"{role} {name}: a closed {kind} comm")
            if not mine:
                continue
            es = max(mine, key=lambda x: x[-1]["time_unix_ms"])
            expect(es[0]["event"] == "standby" and STARTED in es[0].get("why", ""),
                   f"{role} {name}: the stream's {kind} comm started on {STANDBY_PORT}: {es[0]['event']} {es[0].get('why')}")
            fb = [e for e in es if e["event"] == "failback"]
            expect(len(fb) == 1 and fb[0]["to"] == PRIMARY and fb[0]["from"] == STANDBY_PORT,
                   f"{role} {name}: the stream's {kind} comm failed back to {PRIMARY} once: "
                   f"{[(e['from'], e['to']) for e in fb]}")
            if fb:
                at = on_a_clock(role, rep_b, fb[0]["time_unix_ms"])
                expect(back_ms + HOLD_MS - SLACK_MS <= at <= back_ms + HOLD_MS + 10 * SLACK_MS,
                       f"{role} {name}: {kind} comm home {at - back_ms} ms after a's rail 0 came back "
                       f"(hold {HOLD_MS} ms)")
            expect(es[-1]["active"] == PRIMARY, f"{role} {name}: the stream's {kind} comm ends on {PRIMARY} "
                                                f"({es[-1]['active']})")
    expect_no_crash(run, name)


BLACKHOLE_CHURN = 4


def check_blackhole_connect(run):
    name = "blackhole-connect"
    expect_exit(run, name)
    for role in ("a", "b"):
        expect_churn_connected(run, role, name, BLACKHOLE_CHURN, "the black-holed rail 0")
        events = stats(run, role, name)
        # The side whose primary failed: "... did not connect (...)"; its peer: "the peer could not connect its end".
        # One record per comm (counted as records: a closed churn comm's address may be reused).
        started = [e for e in events if e["event"] == "standby" and e["state"] == "down" and
                   ("did not connect" in e["why"] or "could not connect its end" in e["why"]) and
                   "started on " + STANDBY_PORT in e["why"]]
        expect(len(started) >= 2 * BLACKHOLE_CHURN,
               f"{role} {name}: {len(started)} churn comms started on {STANDBY_PORT} because their own pair did not "
               f"connect (at least {2 * BLACKHOLE_CHURN})")
        expect(not [e for e in events if e["event"] == "fatal"], f"{role} {name}: no fatal record")
    expect_no_crash(run, name)


def check(run):
    expect_each("failover-recovered", [
        ("fault", lambda: check_failover(run, "b", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS)),
        ("readdress", lambda: check_readdress(run)),
        ("home-down", lambda: check_home_down(run)),
        ("blackhole-connect", lambda: check_blackhole_connect(run)),
    ])
