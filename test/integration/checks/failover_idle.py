"""failover-idle: the HA control plane runs while a rank makes no plugin call. Each case is a
--one-way stream b -> a (rxe0, standby rxe1) in which one side idles (ha-net-driver --idle: no
plugin call at all from IDLE_AT for IDLE_MS of the integrity phase) while a rail goes down:

  idle-sender    b idle, b's rail 0 down: both sides fail over rxe0:1 -> rxe1:1; b's failover
                 (its port event) is written inside b's idle window, a's before that window ends
  idle-receiver  a idle, a's rail 0 down: the same, mirrored
  busy-fault     b idle, a's rail 0 down (a keeps calling): both fail over; b's failover (the
                 confirmation of a's notice) inside b's idle window
  idle-standby   b idle, b's rail 1 (the standby) down: no failover, no fatal, the stream goes on;
                 b's 'standby down' event inside b's idle window, a notices too
  stopped-peer   b's driver stopped (SIGSTOP) for 4 s, a's rail 0 down meanwhile: a's notice is
                 acknowledged by b's kernel (the new path is proven), so a waits for b's answer
                 longer than HA_NCCL_FAILOVER_TIMEOUT_MS without giving up; b confirms once it runs

Every case: both drivers exit 0, every byte verified and every message counted once, no fatal
event, no 'no usable path' WARN (before the fix, the idle side never confirmed and the busy side
gave up after HA_NCCL_FAILOVER_TIMEOUT_MS). Times: an idle window comes from the idle side's own
report and is compared with that side's own stats events (same clock); the other side's events
are moved to that clock with the offset the drivers measured (+- rtt/2, allowed for).
Each case is checked on its own; the test fails at the end naming every case that failed."""
from check import expect, expect_each
from failover_common import (STANDBY_PORT, DATA_KIND, FAILOVER_INFO, FAILOVER_TIMEOUT_MS, NO_PATH_WARN, PRIMARY,
                             STANDBY_INFO, data_comm,
                             expect_counters, expect_no_crash, expect_stream_ok, faults, log_text, stats)

MIN_SECONDS = 13             # failover-idle.guest.sh: MIN
IDLE_AT, IDLE_MS = 3000, 8000  # failover-idle.guest.sh: IDLE
# Tolerance for times compared across the VMs (the measured offset is good to rtt/2; a few ms
# more for the ms rounding of both clocks).
CROSS_CLOCK_SLACK_MS = 20


def other(role):
    return "b" if role == "a" else "a"


def to_clock_of(role, reps, from_role, t_ms):
    """A wall-clock time of VM from_role, on VM role's clock (each report's clock.peer_offset_ms:
    peer = here + offset)."""
    if role == from_role:
        return t_ms
    return t_ms - reps[role]["clock"]["peer_offset_ms"]


def slack(reps):
    return reps["b"]["clock"]["rtt_ms"] / 2 + CROSS_CLOCK_SLACK_MS


def idle_window(name, role, rep):
    """The one idle window the idle side took: (start, end) on its clock, checked against --idle.
    Its full length is checked later (expect_full_window): a run that failed cuts it short, and
    the plugin's events say more about that."""
    ws = rep.get("idle_windows", [])
    expect(len(ws) == 1, f"{role} {name}: the driver took one idle window: {ws}")
    w = ws[0]
    took = w["end_unix_ms"] - w["start_unix_ms"]
    expect(w["at_ms"] == IDLE_AT and w["duration_ms"] == IDLE_MS and IDLE_AT <= w["start_ms"] <= IDLE_AT + 500,
           f"{role} {name}: idle window (--idle {IDLE_AT}:{IDLE_MS}) from +{w['start_ms']} ms of the phase, "
           f"no plugin call for {took} ms")
    return w["start_unix_ms"], w["end_unix_ms"]


# The driver times its idle window on the steady clock and records it on the wall clock: the two
# differ by a few ms over 8 s in the TCG guests. A window cut short by the end of a run is seconds short.
WINDOW_CLOCK_SLACK_MS = 50


def expect_full_window(name, role, w0, w1):
    expect(w1 - w0 >= IDLE_MS - WINDOW_CLOCK_SLACK_MS,
           f"{role} {name}: the idle window lasted {w1 - w0} ms (>= {IDLE_MS} - {WINDOW_CLOCK_SLACK_MS} of clock "
           f"difference; shorter: cut short by the end of the run)")


def expect_quiet(name, role, rep, w0, w1):
    """The idle side's own timeline shows no completion inside its window (it made no test() call)."""
    t = rep["timeline"]
    series = t["recv_msgs"] if DATA_KIND[role] == "recv" else t["send_msgs"]
    lo = (w0 - t["start_unix_ms"]) // t["bin_ms"] + 1
    hi = (w1 - t["start_unix_ms"]) // t["bin_ms"]
    n = sum(series[lo:hi])
    expect(n == 0, f"{role} {name}: no {DATA_KIND[role]} completion during the idle window ({n})")


def fault_inside(name, fault_role, idle_role, reps, run, w0, w1, what):
    """The fault.sh of this case ran on fault_role, wholly inside the idle window (idle_role's clock)."""
    fs = faults(run, fault_role, name)
    expect(len(fs) == 1 and fs[0][2] == what, f"{name}: one fault '{what}' injected on {fault_role}: {fs}")
    f0 = to_clock_of(idle_role, reps, fault_role, fs[0][0])
    f1 = to_clock_of(idle_role, reps, fault_role, fs[0][1])
    expect(w0 <= f0 and f1 <= w0 + IDLE_MS - 1000,
           f"{name}: fault.sh '{what}' ran from +{f0 - w0:.0f} to +{f1 - w0:.0f} ms of {idle_role}'s idle window "
           f"({IDLE_MS} ms asked; it must end >= 1 s before the window does)")
    return f0, f1


def check_failover_case(run, name, idle_role, fault_role):
    a, b = run.report("a", name), run.report("b", name)  # the stream's verdict comes last (below)
    reps = {"a": a, "b": b}
    w0, w1 = idle_window(name, idle_role, reps[idle_role])
    f0, f1 = fault_inside(name, fault_role, idle_role, reps, run, w0, w1, "rail-down 0")
    sl = slack(reps)
    for role in (other(idle_role), idle_role):  # the busy side first: its verdict names what went wrong
        rep = reps[role]
        kind = DATA_KIND[role]
        mine, last = data_comm(run, role, name, stats(run, role, name))
        fatal = [e for e in mine if e["event"] == "fatal"]
        expect(not fatal, f"{role} {name}: no fatal event" + "".join(
            f" [+{to_clock_of(idle_role, reps, role, e['time_unix_ms']) - w0:.0f} ms into {idle_role}'s idle window: "
            f"{e['why']}]" for e in fatal))
        expect(not NO_PATH_WARN.search(log_text(run, role, name)), f"{role} {name}: no 'no usable path' WARN"
               + "".join(f" [{w}]" for w in rep["plugin_warning_lines"] if NO_PATH_WARN.search(w))[:600])
        fo = [e for e in mine if e["event"] == "failover"]
        expect(len(fo) == 1 and fo[0]["from"] == PRIMARY and fo[0]["to"] == STANDBY_PORT,
               f"{role} {name}: one failover of the {kind} comm {PRIMARY} -> {STANDBY_PORT}: "
               f"{[(e['from'], e['to'], e['cause']) for e in fo]}")
        at = to_clock_of(idle_role, reps, role, fo[0]["time_unix_ms"])
        s = 0 if role == idle_role else sl
        where = f"+{at - w0:.0f} ms into {idle_role}'s idle window of {w1 - w0} ms (fault.sh ended at +{f1 - w0:.0f})"
        if role == idle_role:
            expect(f0 - 50 <= at <= w1, f"{role} {name}: the idle side failed over while idle: {where}; "
                                        f"cause '{fo[0]['cause']}'")
        else:
            expect(f0 - 50 - s <= at <= w1 + s, f"{role} {name}: the busy side failed over before the idle side "
                                                 f"resumed: {where}; cause '{fo[0]['cause']}'")
        expect_counters(role, name, last, rep, 1)
        expect(last["active"] == STANDBY_PORT, f"{role} {name}: {kind} comm ends active on {last['active']} (the standby)")
        info = [m for m in FAILOVER_INFO.finditer(log_text(run, role, name)) if m.group(1) == kind]
        expect(len(info) == 1, f"{role} {name}: one INFO 'failover of {kind} comm' line ({len(info)})")
    expect_full_window(name, idle_role, w0, w1)
    expect_quiet(name, idle_role, reps[idle_role], w0, w1)
    expect_stream_ok(run, name, MIN_SECONDS)
    expect_no_crash(run, name)


def check_standby_case(run, name):
    a, b = run.report("a", name), run.report("b", name)
    reps = {"a": a, "b": b}
    w0, w1 = idle_window(name, "b", b)
    f0, f1 = fault_inside(name, "b", "b", reps, run, w0, w1, "rail-down 1")
    for role in ("a", "b"):
        rep = reps[role]
        kind = DATA_KIND[role]
        mine, last = data_comm(run, role, name, stats(run, role, name))
        bad = [e for e in mine if e["event"] in ("failover", "failback", "fatal")]
        expect(not bad, f"{role} {name}: no failover, failback or fatal event of the {kind} comm: "
                        f"{[(e['event'], e.get('cause') or e.get('why')) for e in bad]}")
        expect(not NO_PATH_WARN.search(log_text(run, role, name)), f"{role} {name}: no 'no usable path' WARN")
        expect_counters(role, name, last, rep, 0)
        expect(last["active"] == PRIMARY, f"{role} {name}: {kind} comm ends active on {last['active']} (the primary)")
        down = [e for e in mine if e["event"] == "standby" and e["state"] == "down"]
        expect(down, f"{role} {name}: a 'standby down' stats event for the {kind} comm")
        at = to_clock_of("b", reps, role, down[0]["time_unix_ms"])
        where = f"+{at - w0:.0f} ms into b's idle window of {w1 - w0} ms (fault.sh ended at +{f1 - w0:.0f})"
        if role == "b":
            expect(f0 - 50 <= at <= w1, f"b {name}: the idle side noticed its standby down while idle: {where} "
                                        f"({down[0]['why']})")
        else:
            print(f"check: info: a {name}: standby down {where} ({down[0]['why']})")
        info = [m for m in STANDBY_INFO.finditer(log_text(run, role, name))
                if m.group(1) == STANDBY_PORT and m.group(2) == kind and m.group(4) == "down"]
        expect(info, f"{role} {name}: INFO 'standby {STANDBY_PORT} of {kind} comm ... is down (...)'")
    expect_full_window(name, "b", w0, w1)
    expect_quiet(name, "b", b, w0, w1)
    expect_stream_ok(run, name, MIN_SECONDS)
    expect_no_crash(run, name)


def check_stopped_peer(run, name):
    a, b = run.report("a", name), run.report("b", name)
    reps = {"a": a, "b": b}
    fb, fa = faults(run, "b", name), faults(run, "a", name)
    expect([f[2] for f in fb] == ["proc-stop", "proc-cont"] and [f[2] for f in fa] == ["rail-down 0"],
           f"{name}: b's driver stopped and continued, a's rail 0 down: {fb} / {fa}")
    # Each fault line is (t0, t1): taken just before and just after the kill. b is surely stopped
    # from the end of proc-stop, and may run again from the start of proc-cont: the bounds below
    # take those two (t1 of proc-cont came up to tens of ms after b had already answered).
    stop, cont = (to_clock_of("a", reps, "b", fb[0][1]), to_clock_of("a", reps, "b", fb[1][0]))
    expect(stop <= fa[0][0] and fa[0][1] <= cont, f"{name}: a's rail went down while b was stopped "
                                                  f"(+{fa[0][0] - stop:.0f} .. +{fa[0][1] - stop:.0f} ms of {cont - stop:.0f} ms)")
    for role in ("a", "b"):
        mine, last = data_comm(run, role, name, stats(run, role, name))
        expect(not [e for e in mine if e["event"] == "fatal"], f"{role} {name}: no fatal event")
        expect(not NO_PATH_WARN.search(log_text(run, role, name)), f"{role} {name}: no 'no usable path' WARN")
        fo = [e for e in mine if e["event"] == "failover"]
        expect(len(fo) == 1 and fo[0]["from"] == PRIMARY and fo[0]["to"] == STANDBY_PORT,
               f"{role} {name}: one failover {PRIMARY} -> {STANDBY_PORT}: {[(e['from'], e['to'], e['cause']) for e in fo]}")
        at = to_clock_of("a", reps, role, fo[0]["time_unix_ms"])
        if role == "a":
            expect(fo[0]["stall_ms"] > FAILOVER_TIMEOUT_MS and at >= cont - slack(reps),
                   f"a {name}: a waited {fo[0]['stall_ms']:.0f} ms for the stopped peer (more than "
                   f"HA_NCCL_FAILOVER_TIMEOUT_MS={FAILOVER_TIMEOUT_MS}) and finished +{at - cont:.0f} ms after b "
                   f"continued")
        else:
            expect(at >= cont - slack(reps), f"b {name}: b confirmed after it continued (+{at - cont:.0f} ms): "
                                             f"cause '{fo[0]['cause']}'")
        expect_counters(role, name, last, reps[role], 1)
    expect_stream_ok(run, name, MIN_SECONDS)
    expect_no_crash(run, name)


def check(run):
    cases = [("idle-sender", lambda: check_failover_case(run, "idle-sender", "b", "b")),
             ("idle-receiver", lambda: check_failover_case(run, "idle-receiver", "a", "a")),
             ("busy-fault", lambda: check_failover_case(run, "busy-fault", "b", "a")),
             ("idle-standby", lambda: check_standby_case(run, "idle-standby")),
             ("stopped-peer", lambda: check_stopped_peer(run, "stopped-peer"))]
    expect_each("failover-idle", cases)
