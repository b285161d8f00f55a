"""failover-ha-disabled: HA_NCCL_ENABLE_STANDBY=0 in VM b only. The comms must agree on a single
path: the stream works (exit 0, verified), every comm on both sides shows standby 'none' and no
standby port in its stats, and each side logs the INFO line 'single path on rxe0:1 (...)'.
silent: the single path goes silent (100 % loss) for longer than the soft RTO but shorter than the
hardware retry window: the soft RTO must not kill the last path - no failover, no fatal, the stream
completes verified, and the side with work outstanding says it left the path to the hardware."""
from check import expect
from failover_common import PRIMARY, RTO_MS, SINGLE_PATH_INFO, expect_counters, expect_no_crash, expect_stream_ok, \
    faults, log_text, data_comm, stall_around, stats

LAST_PATH_WARN = "left to the hardware retry window"

MIN_SECONDS = 10  # failover-ha-disabled.guest.sh


def check(run):
    a, b = expect_stream_ok(run, "single", MIN_SECONDS)
    for role, rep in (("a", a), ("b", b)):
        events = stats(run, role, "single")
        comms = {(e["pid"], e["comm"]) for e in events}
        closed = [e for e in events if e["event"] == "close"]
        expect(len(comms) == 2 and len(closed) == 2, f"{role}: stats of 2 comms (send + recv), both closed: {len(comms)} / {len(closed)}")
        expect(all(e["standby"] == "none" and e["standby_port"] == "" for e in events),
               f"{role}: every stats event shows standby 'none' and no standby port: "
               f"{sorted({(e['standby'], e['standby_port']) for e in events})}")
        expect(not [e for e in events if e["event"] in ("failover", "fatal")], f"{role}: no failover or fatal event")
        _, last = data_comm(run, role, "single", events)
        expect(last["active"] == PRIMARY, f"{role}: the data comm ran on {last['active']}")
        expect_counters(role, "single", last, rep, 0)
        lines = [m for m in SINGLE_PATH_INFO.finditer(log_text(run, role, "single"))
                 if PRIMARY in (m.group("dev1"), m.group("dev2"))]
        kinds = sorted({m.group("kind") for m in lines})
        expect(kinds == ["recv", "send"], f"{role}: INFO 'single path on {PRIMARY} (...)' for the send and the recv comm: "
                                          f"{[m.group(0) for m in lines][:2]}")
    expect_no_crash(run, "single")
    check_silent(run)


def check_silent(run):
    a, b = expect_stream_ok(run, "silent", 14)  # failover-ha-disabled.guest.sh
    fs = faults(run, "a", "silent")
    expect([f[2] for f in fs] == ["loss 0 100", "clear 0"], f"silent: rail 0 silenced on a, then cleared: {fs}")
    stall, at = stall_around(a["timeline"], fs[0][1], fs[1][0] - fs[0][1])
    expect(stall > RTO_MS, f"silent: the path was silent {stall} ms at +{at} ms (longer than the soft RTO, {RTO_MS} ms: "
                           f"the case tests what it means to)")
    for role, rep in (("a", a), ("b", b)):
        events = stats(run, role, "silent")
        expect(not [e for e in events if e["event"] in ("failover", "fatal")], f"{role} silent: no failover or fatal event")
        _, last = data_comm(run, role, "silent", events)
        expect_counters(role, "silent", last, rep, 0)
    warned = [r for r in ("a", "b") if LAST_PATH_WARN in log_text(run, r, "silent")]
    expect(warned, f"silent: a WARN says the last path was left to the hardware retry window (on {warned})")
    expect_no_crash(run, "silent")
