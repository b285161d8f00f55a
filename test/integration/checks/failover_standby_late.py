"""failover-standby-late: rail 0 fails while every comm's standby is still being connected (8 s
late, HA_NCCL_TEST_STANDBY_DELAY_MS): the failover waits for the standby instead of ending the
comm, then moves the stream to rail 1; rail 0 comes back and is re-protected. Every byte verified."""
import re

from check import expect
from failover_common import STANDBY_PORT, DATA_KIND, data_comm, faults, log_text, on_a_clock, stats
from failover_sequence import check_sequence

WAIT_WARN = re.compile(r"NET/HA: (send|recv) comm \S+: .*; its standby (\S+) is still being connected: "
                       r"the failover waits for it")


def check(run):
    a, b = check_sequence(run, "fault", 22, "a", n_faults=2, failovers=1, end_active=STANDBY_PORT, end_standby="up")
    down = faults(run, "a", "fault")[0]
    expect(down[2] == "rail-down 0", f"fault: the first fault is rail-down 0 on a ({down[2]})")
    for role in ("a", "b"):
        kind = DATA_KIND[role]
        mine, _ = data_comm(run, role, "fault", stats(run, role, "fault"))
        up = [e for e in mine if e["event"] == "standby" and e["state"] == "up" and "connected on" in e["why"]]
        fo = [e for e in mine if e["event"] == "failover"]
        expect(up and fo, f"{role} fault: {kind} comm: its standby came up ({len(up)}) and it failed over ({len(fo)})")
        if up and fo:
            t_up = on_a_clock(role, b, up[0]["time_unix_ms"])
            expect(down[1] < t_up <= on_a_clock(role, b, fo[0]["time_unix_ms"]) + 50,
                   f"{role} fault: rail 0 went down (+{down[1] - t_up} ms) before the standby was connected, "
                   f"and the failover came after it ({on_a_clock(role, b, fo[0]['time_unix_ms']) - t_up} ms)")
    waits = [m for m in WAIT_WARN.finditer(log_text(run, "a", "fault")) if m.group(1) == DATA_KIND["a"]]
    expect(len(waits) == 1 and waits[0].group(2) == STANDBY_PORT,
           f"a fault: one WARN 'its standby {STANDBY_PORT} is still being connected: the failover waits for it' "
           f"for the recv comm ({len(waits)})")
