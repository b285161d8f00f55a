"""Shared by the multi-fault failover tests (failover-reprotect, -flaps, -failback): the stream
survived every fault with every byte verified, and each data comm's events tell the story."""
from check import expect
from failover_common import (STANDBY_PORT, DATA_KIND, FAILOVER_INFO, NO_PATH_WARN, PORT_DOWN_STALL_BOUND_MS, PRIMARY,
                             data_comm, expect_counters, stall_around,
                             expect_no_crash, expect_stream_ok, faults, log_text, on_a_clock, stats)

# After the stream moved, no gap between receives longer than this (re-protection, heartbeats and
# the standby's flaps must not stall the active path; TCG's own gaps are ~100-300 ms).
MAX_GAP_AFTER_FIRST_FAILOVER_MS = 1500


def gaps_after(t, start_unix_ms, excused=()):
    """Longest gap (ms, 10 ms bins) between receive bins after start_unix_ms, leaving out the gaps
    that overlap an excused (start, end) window (a's clock): a later fault's own failover."""
    bin_ms, msgs = t["bin_ms"], t["recv_msgs"]
    first = max(0, int((start_unix_ms - t["start_unix_ms"]) // bin_ms))
    longest, last = 0, None
    for i in range(first, len(msgs)):
        if msgs[i]:
            if last is not None:
                g0, g1 = t["start_unix_ms"] + last * bin_ms, t["start_unix_ms"] + i * bin_ms
                if not any(g0 <= e1 and g1 >= e0 for e0, e1 in excused):
                    longest = max(longest, (i - last) * bin_ms)
            last = i
    return longest


def check_sequence(run, name, min_seconds, fault_role, n_faults, failovers, failbacks=0, end_active=STANDBY_PORT,
                   end_standby="up"):
    a, b = expect_stream_ok(run, name, min_seconds)
    fs = faults(run, fault_role, name)
    expect(len(fs) == n_faults, f"{name}: {n_faults} faults injected on {fault_role} ({len(fs)})")
    first_fo = None
    for role, rep in (("a", a), ("b", b)):
        kind = DATA_KIND[role]
        mine, last = data_comm(run, role, name, stats(run, role, name))
        fo = [e for e in mine if e["event"] == "failover"]
        fb = [e for e in mine if e["event"] == "failback"]
        expect(len(fo) == failovers, f"{role} {name}: {kind} comm: {len(fo)} failover event(s) (expected {failovers})")
        expect(len(fb) == failbacks, f"{role} {name}: {kind} comm: {len(fb)} failback event(s) (expected {failbacks})")
        expect(not [e for e in mine if e["event"] == "fatal"], f"{role} {name}: no fatal event")
        expect(fo and fo[0]["from"] == PRIMARY and fo[0]["to"] == STANDBY_PORT,
               f"{role} {name}: the first failover went {PRIMARY} -> {STANDBY_PORT}")
        for e in fo[1:] + fb:
            expect(e["from"] != e["to"], f"{role} {name}: {e['event']} {e['from']} -> {e['to']} ({e['cause']})")
        expect_counters(role, name, last, rep, failovers)
        expect(last["failbacks"] == failbacks, f"{role} {name}: counter failbacks {last['failbacks']}")
        expect(last["active"] == end_active, f"{role} {name}: {kind} comm ends active on {last['active']} "
                                             f"(expected {end_active})")
        expect(last["standby"] == end_standby, f"{role} {name}: {kind} comm ends with its standby "
                                               f"{last['standby']} (expected {end_standby})")
        if failovers > 1 or end_standby == "up":
            expect(last["reprotections"] >= 1, f"{role} {name}: {kind} comm re-protected {last['reprotections']} "
                                               f"time(s) in {last['reprotect_attempts']} attempt(s)")
        info = [m for m in FAILOVER_INFO.finditer(log_text(run, role, name)) if m.group(1) == kind]
        expect(len(info) == failovers, f"{role} {name}: {len(info)} INFO 'failover of {kind} comm' line(s)")
        expect(not NO_PATH_WARN.search(log_text(run, role, name)), f"{role} {name}: no 'no usable path' WARN")
        t0 = on_a_clock(role, b, fo[0]["time_unix_ms"]) if fo else None
        first_fo = t0 if first_fo is None or (t0 is not None and t0 > first_fo) else first_fo
    if first_fo is not None:
        # A fault after the first failover (a second failure, a flap) is a failover of its own,
        # bounded like any port-down failover; its stall is not the active path stalling.
        later = [(on_a_clock(fault_role, b, f0), on_a_clock(fault_role, b, f1) + PORT_DOWN_STALL_BOUND_MS)
                 for f0, f1, _ in fs if on_a_clock(fault_role, b, f0) > first_fo]
        for e0, e1 in later:
            stall, at = stall_around(a["timeline"], e0, e1 - e0)
            expect(stall <= PORT_DOWN_STALL_BOUND_MS, f"{name}: a later fault stalled receives {stall} ms at +{at} ms "
                                                      f"(bound {PORT_DOWN_STALL_BOUND_MS} ms)")
        gap = gaps_after(a["timeline"], first_fo + 100, later)
        expect(gap <= MAX_GAP_AFTER_FIRST_FAILOVER_MS,
               f"{name}: after the first failover the longest receive gap is {gap} ms "
               f"(bound {MAX_GAP_AFTER_FIRST_FAILOVER_MS} ms)")
    expect_no_crash(run, name)
    return a, b
