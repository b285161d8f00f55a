"""failover-flush: RDMA READ flushes (HA_NCCL_FORCE_FLUSH=1, --flush-each) through a standby-rail flap
and three failovers with failbacks, all on a (the receiver, which owns the loopback QPs).

The stream completes with every byte verified and every flush waited for. Per failover, a's receive
comm's flush reads (CommStats::flush_reads, per device slot, in its stats records) go to rxe1 while
it is failed over and, after the failback, to rxe0 again: the loopback QP on rxe0 that a READ posted
in the instant its link went down left in ERROR was replaced (with the re-protection on rxe0, or on
its own), instead of every later flush failing there and being read again through rxe1. No flush
failed for good ('flush ... failed' WARN) and no comm was lost."""
import re

from check import expect
from failover_common import DATA_KIND, NO_PATH_WARN, PRIMARY, data_comm, log_text, stats
from failover_sequence import check_sequence

NAME = "fault"
MIN_SECONDS = 52  # failover-flush.guest.sh
CYCLES = 3        # failover-flush.guest.sh: rail-down 0 / rail-up 0 pairs
# Reads that may land on the other slot around a switch: the flush in flight when it happens
# (--flush-each: one at a time), and the flushes whose first attempt failed in the instant the
# link went down, before the failover moved the comm (read again through the other device); a few.
# Without replacement every flush after the failback lands on rxe1 (hundreds per cycle).
STRAY_READS = 16
FLUSH_FAILED_WARN = re.compile(r"NET/HA: recv comm \S+: flush \(RDMA READ of \S+\) failed")


def check(run):
    a, _ = check_sequence(run, NAME, MIN_SECONDS, "a", n_faults=1 + 2 * CYCLES, failovers=CYCLES, failbacks=CYCLES,
                          end_active=PRIMARY, end_standby="up")
    got = a["integrity"]
    expect(a["properties"]["forceFlush"] == 1, f"{NAME}: forceFlush reported with HA_NCCL_FORCE_FLUSH=1")
    expect(got["flushes"] > 0 and got["flush"] == "completed", f"{NAME}: {got['flushes']} flushes waited for")
    mine, last = data_comm(run, "a", NAME, stats(run, "a", NAME))
    kind = DATA_KIND["a"]
    reads = last["flush_reads"]
    # + 1: the driver's iflush of the last group at the end of the phase
    expect(sum(reads) == got["flushes"] + 1,
           f"a {NAME}: the {kind} comm completed {reads[0]} flush reads on rxe0 and {reads[1]} on rxe1, one per flush")
    switches = [e for e in mine if e["event"] in ("failover", "failback")]
    expect([e["event"] for e in switches] == ["failover", "failback"] * CYCLES,
           f"a {NAME}: failover and failback alternate: {[e['event'] for e in switches]}")
    ends = switches[1:] + [last]  # each interval runs to the next switch (or the close)
    for i, (e, end) in enumerate(zip(switches, ends)):
        here = 1 if e["event"] == "failover" else 0  # the slot the flushes must read through now
        gained = [end["flush_reads"][s] - e["flush_reads"][s] for s in (0, 1)]
        where = f"a {NAME}: after {e['event']} {i // 2 + 1} ({e['from']} -> {e['to']})"
        expect(gained[here] > 0, f"{where}: {gained[here]} flush reads through {e['to']}")
        expect(gained[1 - here] <= STRAY_READS,
               f"{where}: {gained[1 - here]} flush reads through {e['from']} (at most {STRAY_READS} around the "
               f"switches; {gained[here]} through {e['to']})")
    rebuilt = last["flush_rebuilds"]
    expect(rebuilt[0] >= CYCLES and rebuilt[1] >= 1,
           f"a {NAME}: flush QPs replaced {rebuilt[0]} time(s) on rxe0 (>= {CYCLES}: one per re-protection there), "
           f"{rebuilt[1]} on rxe1")
    text = log_text(run, "a", NAME)
    bad = FLUSH_FAILED_WARN.findall(text) + NO_PATH_WARN.findall(text)
    expect(not bad, f"a {NAME}: no 'flush ... failed' or 'no usable path' WARN ({len(bad)})")
    again = len(re.findall(r"NET/HA: recv comm \S+: flush read .*, read again on", text))
    print(f"check: info: a {NAME}: {again} flush read(s) read again through the other device")
