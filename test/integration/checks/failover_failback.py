"""failover-failback: rail 0 down on the receiver (failover), up again 2 s later: re-protected on
rail 0, and after the 2 s hold the stream fails back to it (one failback event per data comm), with
failback as configured by default. From hold + 5 s after rail 0 came back, at least 90 % of the
packets of both hosts (their rxe counters, sampled every 500 ms) run on rail 0 again."""
from check import expect
from failover_common import PRIMARY, data_comm, expect_home_share, stats
from failover_sequence import check_sequence

HOLD_MS = 2000  # HA_NCCL_FAILBACK_HOLD_MS in failover-failback.guest.sh
HOME_AFTER_MS = HOLD_MS + 5000  # issue #19: at least 90 % of the packets on the rail back from then


def check(run):
    check_sequence(run, "fault", 24, "a", n_faults=2, failovers=1, failbacks=1, end_active=PRIMARY,
                   end_standby="up")
    # The sender decides the failback: only after its standby on rail 0 was up for the hold.
    mine, _ = data_comm(run, "b", "fault", stats(run, "b", "fault"))
    up = [e for e in mine if e["event"] == "standby" and e["state"] == "up" and "re-protected" in e["why"]]
    fb = [e for e in mine if e["event"] == "failback"]
    expect(up and fb, f"b fault: re-protected ({len(up)}) then failed back ({len(fb)})")
    if up and fb:
        held = fb[0]["time_unix_ms"] - max(e["time_unix_ms"] for e in up if e["time_unix_ms"] <= fb[0]["time_unix_ms"])
        expect(held >= HOLD_MS - 50, f"b fault: failback {held} ms after the standby came up (hold {HOLD_MS} ms)")
        expect(fb[0]["from"] != PRIMARY and fb[0]["to"] == PRIMARY, f"b fault: failback {fb[0]['from']} -> {fb[0]['to']}")
    expect_home_share(run, "fault", "a", 0, HOME_AFTER_MS)
