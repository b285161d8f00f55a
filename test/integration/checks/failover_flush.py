"""failover-flush: RDMA READ flushes (HA_NCCL_FORCE_FLUSH=1, --flush-each) through a standby-rail flap
and two failovers with failbacks, all on a (the receiver, which owns the loopback QPs).

The stream completes with every byte verified and every flush waited for. Per failover, a's receive
comm's flush reads (CommStats::flush_reads, per device slot, in its stats records) go to rxe1 while
it is failed over and, after the failback, to rxe0 again: the loopback QP on rxe0 that a READ posted
in the instant its link went down left in ERROR was replaced (with the re-protection on rxe0, or on
its own), instead of every later flush failing there. No flush failed for good ('flush ... failed'
WARN) and no comm was lost.

Each flush reads through the devices that wrote its data (issue #19 item 6). The active device's
loopback QP moved to ERROR (HA_NCCL_TEST_FLUSH_QP_ERROR_MS: on rxe0 at 7 s, on rxe1 at 16 s while
failed over): a flush's READ there fails, the flush waits for that QP's rebuild and reads
through it ('flush waits for the flush QP on X', then 'flush QP ... on X replaces the old one'). A
flush reads through the active device instead only when the one that wrote is down (rxe0 around
its rail-downs): flush_redirects counts them, one INFO each, never for rxe1 (never down)."""
import re

from check import expect
from failover_common import STANDBY_PORT, DATA_KIND, NO_PATH_WARN, PRIMARY, data_comm, log_text, stats
from failover_sequence import check_sequence

NAME = "fault"
MIN_SECONDS = 39  # failover-flush.guest.sh
CYCLES = 2        # failover-flush.guest.sh: rail-down 0 / rail-up 0 pairs
# Reads that may land on the other slot around a switch: flushes of data the old device wrote
# (--flush-each: one at a time), and those read through the new one because the old one is down.
# Without replacement every flush after the failback lands on rxe1 (hundreds per cycle).
STRAY_READS = 16
FLUSH_FAILED_WARN = re.compile(r"NET/HA: recv comm \S+: flush \(RDMA READ of \S+\) failed")
QP_ERRORS = [PRIMARY, "rxe1:1"]  # failover-flush.guest.sh: where HA_NCCL_TEST_FLUSH_QP_ERROR_MS hits
INJECTED = re.compile(r"NET/HA: recv comm \S+: test: flush QP \d+ on (\S+) moved to ERROR")
WAITS = re.compile(r"NET/HA: recv comm \S+: flush waits for the flush QP on (\S+) to be rebuilt")
REPLACED = re.compile(r"NET/HA: recv comm \S+: flush QP \d+ on (\S+) replaces the old one")
REDIRECTED = re.compile(r"NET/HA: recv comm \S+: flush: (.+), which wrote the data, is down: read through (\S+)")
MOVED = re.compile(r"NET/HA: recv comm \S+: flush: slot \d+ moved from device")


def check(run):
    a, _ = check_sequence(run, NAME, MIN_SECONDS, "a", n_faults=1 + 2 * CYCLES, failovers=CYCLES, failbacks=CYCLES,
                          end_active=PRIMARY, end_standby="up")
    got = a["integrity"]
    expect(a["properties"]["forceFlush"] == 1, f"{NAME}: forceFlush reported with HA_NCCL_FORCE_FLUSH=1")
    expect(got["flushes"] > 0 and got["flush"] == "completed", f"{NAME}: {got['flushes']} flushes waited for")
    mine, last = data_comm(run, "a", NAME, stats(run, "a", NAME))
    kind = DATA_KIND["a"]
    reads = last["flush_reads"]
    # + 1: the driver's iflush of the last group at the end of the phase; a flush whose data both
    # devices wrote (around a switch) reads through both
    expect(got["flushes"] + 1 <= sum(reads) <= got["flushes"] + 1 + STRAY_READS * 2 * CYCLES,
           f"a {NAME}: the {kind} comm completed {reads[0]} flush reads on rxe0 and {reads[1]} on rxe1 for "
           f"{got['flushes'] + 1} flushes (one per device that wrote)")
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
    expect(rebuilt[0] >= CYCLES + 1 and rebuilt[1] >= 2,
           f"a {NAME}: flush QPs replaced {rebuilt[0]} time(s) on rxe0 (>= {CYCLES + 1}: one per re-protection there, "
           f"one after its injected ERROR), {rebuilt[1]} on rxe1 (>= 2: the flap, the injected ERROR)")
    text = log_text(run, "a", NAME)
    bad = FLUSH_FAILED_WARN.findall(text) + NO_PATH_WARN.findall(text)
    expect(not bad, f"a {NAME}: no 'flush ... failed' or 'no usable path' WARN ({len(bad)})")
    check_waits(text)
    check_redirects(text, last["flush_redirects"])


def check_waits(text):
    """After each injected ERROR a flush waited for that device's QP and it was replaced (log order)."""
    hits = list(INJECTED.finditer(text))
    expect([m.group(1) for m in hits] == QP_ERRORS,
           f"a {NAME}: the active flush QP moved to ERROR on {[m.group(1) for m in hits]} (expected {QP_ERRORS})")
    for i, m in enumerate(hits):
        dev, end = m.group(1), hits[i + 1].start() if i + 1 < len(hits) else len(text)
        after = text[m.end():end]
        wait = next((w for w in WAITS.finditer(after) if w.group(1) == dev), None)
        rebuilt = wait and next((r for r in REPLACED.finditer(after, wait.end()) if r.group(1) == dev), None)
        expect(wait is not None and rebuilt is not None,
               f"a {NAME}: after {dev}'s flush QP went to ERROR a flush waited for it "
               f"({'yes' if wait else 'no'}) and it was rebuilt ({'yes' if rebuilt else 'no'})")


def check_redirects(text, redirects):
    """Only a writer that is down (rxe0 at its rail-downs) is read through the active device instead."""
    lines = REDIRECTED.findall(text)
    moved = len(MOVED.findall(text))
    expect(redirects[1] == 0 and all(dev == PRIMARY for dev, _ in lines),
           f"a {NAME}: flushes read through another device than the one that wrote: {redirects} (slot 0, slot 1); "
           f"writers down: {sorted(set(d for d, _ in lines))} (only {PRIMARY}, around its rail-downs)")
    expect(sum(redirects) == len(lines) + moved,
           f"a {NAME}: flush_redirects {sum(redirects)} = {len(lines)} 'which wrote the data, is down' + {moved} "
           f"'moved' INFO lines")
    print(f"check: info: a {NAME}: {len(lines)} flush(es) read through {STANDBY_PORT} because {PRIMARY}, which wrote, was down")
