"""failover-recovered: rail 0 of b went down and up again before the streams (a flapped link that
recovered); then, as in failover-sender-down, b's rail 0 goes down 5 s into a 20 s --one-way stream
b -> a. Expected exactly as for failover-sender-down: exit 0, every byte verified, one failover per
data comm within the port-down bound, no later stall on the backup.
`readdress`: b's rail 0 changed its address (its GID) under a running plugin; single-path comm
pairs opened on it afterwards connect and carry their messages (endpoints built from the port as
it is now)."""
from check import expect, expect_each
from failover_common import PORT_DOWN_STALL_BOUND_MS, check_failover, expect_no_crash, faults, log_text, stats

MIN_SECONDS = 20  # failover-recovered.guest.sh
CHURN = 8
MOVE_FAILURES = 2  # connects while the address moved (the port has none for a moment), opened again


def check_readdress(run):
    for role in ("a", "b"):
        expect(run.rc(role, "readdress") == 0, f"readdress: rank {'ab'.index(role)} exit {run.rc(role, 'readdress')}")
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


def check(run):
    expect_each("failover-recovered", [
        ("fault", lambda: check_failover(run, "b", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS)),
        ("readdress", lambda: check_readdress(run)),
    ])
