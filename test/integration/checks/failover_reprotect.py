"""failover-reprotect: rail 0 down (failover to rail 1), rail 0 back (re-protected there), then
rail 1 down: the second failure fails over back to rail 0; then rail 1 is re-protected. Six times
in a row in one boot (fault1 .. fault6), each judged on its own; the test fails at the end
naming every repetition that failed.
maxretries: the same faults with HA_NCCL_MAX_RETRIES=1: the second failure ends the stream with
ncclSystemError on both sides, within the bound, b's WARN naming HA_NCCL_MAX_RETRIES."""
from check import expect, expect_each
import re

from failover_common import STANDBY_PORT, PRIMARY, check_fatal, faults, log_text, on_a_clock, profiler_events
from failover_sequence import check_sequence

REPEATS = 6       # failover-reprotect.guest.sh: REPEATS
MIN_SECONDS = 6   # failover-reprotect.guest.sh: MIN


def check_maxretries(run):
    a, b = run.report("a", "maxretries"), run.report("b", "maxretries")
    fs = faults(run, "b", "maxretries")
    expect(len(fs) >= 3 and fs[2][2] == "rail-down 1", f"maxretries: the third fault is rail-down 1 on b: {fs}")
    second = on_a_clock("b", b, fs[2][0])
    check_fatal(run, "maxretries", second, a, b, first_fault=second)
    # b (the port event's side) is refused its second failover by the limit; a, whose peer is gone by
    # then, may find its standby dead first - check_fatal() has its "no usable path" WARN either way.
    warns = [w for w in b["plugin_warning_lines"] if "HA_NCCL_MAX_RETRIES (1)" in w]
    expect(warns, f"b maxretries: the WARN names HA_NCCL_MAX_RETRIES (1): {b['plugin_warning_lines'][:3]}")


# Re-protection is driven by the port's PORT_ACTIVE event, not by the backoff timer (issue #9).
RECOVERED_INFO = re.compile(r"NET/HA: send comm \S+: (\S+) is active again: re-protecting now")


# a's ring send comm asks for b's port while b has it down: refused with kPortDown, it waits for b's
# note that the port came back (kPortBack), not for its backoff or kPeerPortDownNs.
PEER_DOWN_INFO = re.compile(r"NET/HA: standby \S+ of send comm (\S+) is down \(re-protection: the peer's port of that pair is down")
PEER_BACK_INFO = re.compile(r"NET/HA: send comm (\S+): a port of the peer is active again: re-protecting now")


def check_fault(run, name):
    check_sequence(run, name, MIN_SECONDS, "b", n_faults=4, failovers=2, end_active=PRIMARY, end_standby="up")
    ports = [m.group(1) for m in RECOVERED_INFO.finditer(log_text(run, "b", name))]
    expect(PRIMARY in ports and STANDBY_PORT in ports,
           f"b {name}: each rail-up started re-protection at once on its PORT_ACTIVE event: {ports}")


def refusals_noted(run, name):
    """(refusals of a's send comms for b's port down, those followed by b's note) in one fault."""
    text = log_text(run, "a", name)
    downs = [(m.start(), m.group(1)) for m in PEER_DOWN_INFO.finditer(text)]
    backs = [(m.start(), m.group(1)) for m in PEER_BACK_INFO.finditer(text)]
    return len(downs), sum(any(b > at and c == comm for b, c in backs) for at, comm in downs)


def check_refusals(run):
    # Whether a asks during b's outage, and whether b's note or a's 5 s comes first after a refusal,
    # depends on timing; over the six faults the note must have ended refusals (it did every one
    # unloaded), and it must end some whenever a was refused at all.
    counts = [refusals_noted(run, f"fault{i}") for i in range(1, REPEATS + 1)]
    refused, noted = sum(c[0] for c in counts), sum(c[1] for c in counts)
    print(f"check: info: a was refused for b's port down {refused} time(s) in {REPEATS} faults; "
          f"b's note re-protected it at once after {noted}")
    expect(refused == 0 or noted > 0, f"a: b's port-back note ended a refusal for its port down ({noted} of {refused})")


def check_profiler(run):
    # NCCL's profiler (the driver's stand-in): the failovers opened events under the requests in flight
    # (the receiver always has receives posted ahead; the sender has writes in flight at almost every
    # fault), and each re-protection was said under the next request posted. Every call was valid
    # and every event ended (expect_stream_ok, per stream).
    totals = {}
    for role in ("a", "b"):
        for i in range(1, REPEATS + 1):
            for k, v in profiler_events(run, role, f"fault{i}")["started"].items():
                totals[(role, k)] = totals.get((role, k), 0) + v
    expect(totals[("a", "failover")] >= REPEATS and totals[("b", "failover")] > 0,
           f"profiler: failover events under in-flight requests: rank 0 {totals[('a', 'failover')]} "
           f"(>= one per stream), rank 1 {totals[('b', 'failover')]}")
    expect(totals[("a", "reprotect")] > 0 and totals[("b", "reprotect")] > 0,
           f"profiler: re-protection said under a later request: rank 0 {totals[('a', 'reprotect')]}, "
           f"rank 1 {totals[('b', 'reprotect')]}")


def check(run):
    cases = [(f"fault{i}", lambda i=i: check_fault(run, f"fault{i}")) for i in range(1, REPEATS + 1)]
    cases.append(("profiler", lambda: check_profiler(run)))
    cases.append(("maxretries", lambda: check_maxretries(run)))
    cases.append(("refusals", lambda: check_refusals(run)))
    expect_each("failover-reprotect", cases)
