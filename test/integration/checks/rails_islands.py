"""rails-islands (issue #12 items 2, 3 and 6): four rails in two islands (0-1, 2-3),
HA_NCCL_ISLAND_PREFIX_LEN=15. A --one-way stream b -> a on rxe0; b pulls rails 1 and 2, a pulls
rail 3, then (once b's stream comm has its standby on its rxe3 <-> a's rxe2) b pulls rail 0.

Expected: every byte verified, no fatal record; the init line shows each port's island (two of
them); every pair the stream comm ran on or kept as its standby joined two ports of one island,
at both ends (never a pair across islands, although rail 1, a's natural standby port, stays up on a);
no request for a pair the receiver calls unreachable; the failover after rail 0 went onto the
cross-rail pair b's rxe3 <-> a's rxe2 (rail 3 to rail 2, inside the island of rails 2-3), and the
stream went on there."""
import re

from check import expect
from failover_common import data_comm, expect_no_crash, expect_stream_ok, log_text
from rails_common import expect_no_fatal, expect_pairs_reachable, failovers

ISLAND_INIT = re.compile(r"\[\d+\] (rxe\d+):1 \S+ \d+ Mbps rail (\S+) island (\S+)")


def check(run):
    expect_stream_ok(run, "islands", 26)
    expect_no_fatal(run, "islands")
    for role in ("a", "b"):
        found = dict((d, isl) for d, _, isl in ISLAND_INIT.findall(log_text(run, role, "islands")))
        expect(found.get("rxe0") == found.get("rxe1") == "10.20.0.0/15" and
               found.get("rxe2") == found.get("rxe3") == "10.22.0.0/15",
               f"{role} islands: the init line puts rxe0/rxe1 in 10.20.0.0/15 and rxe2/rxe3 in 10.22.0.0/15: {found}")
        expect("cannot reach" not in log_text(run, role, "islands"),
               f"{role} islands: no standby pair across islands was ever asked for")
    expect_pairs_reachable(run, "islands")
    for role, want in (("b", ("rxe0:1", "rxe3:1")), ("a", ("rxe0:1", "rxe2:1"))):
        mine, last = data_comm(run, role, "islands")
        fo = failovers(mine)
        expect(len(fo) == 1 and (fo[0]["from"], fo[0]["to"]) == want,
               f"{role} islands: one failover, {want[0]} -> {want[1]} (the cross-rail pair): "
               f"{[(e['from'], e['to'], e['cause']) for e in fo]}")
        expect(last["active"] == want[1], f"{role} islands: the stream ended on {last['active']}")
    expect_no_crash(run, "islands")
