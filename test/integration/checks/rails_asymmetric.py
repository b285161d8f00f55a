"""rails-asymmetric (issue #12 items 3 and 6): four rails, b's NICs numbered 2,3,0,1 (its rxe2 is
on rail 0). A --one-way stream b -> a on rail 0 (a's rxe0, b's rxe2); b pulls rail 0 at +5 s, a
pulls the rail the stream runs on then at +12 s.

Expected: every byte verified, no fatal record; each host's own first choice of a standby port
(its init INFO line) is on another rail than the other host's (so choosing alone could not work);
every pair the stream comm ran on or kept as its standby joined one rail at both ends; two
failovers at both ends, each onto a rail still up, the stream ending on one rail at both ends."""
import re

from check import expect
from failover_common import data_comm, expect_no_crash, expect_stream_ok, log_text
from rails_common import dev_of, expect_no_fatal, expect_pairs_reachable, failovers, rail_map

STANDBY_INFO = re.compile(r"NET/HA: standby port of (rxe\d+):1 is (rxe\d+):1")


def check(run):
    expect_stream_ok(run, "asymmetric", 20)
    expect_no_fatal(run, "asymmetric")
    maps = {r: rail_map(run, r) for r in ("a", "b")}
    first = {}
    for role, primary in (("a", "rxe0"), ("b", "rxe2")):
        expect(maps[role][primary][0] == 0, f"{role}: {primary} is on rail 0 ({maps[role]})")
        standbys = dict(STANDBY_INFO.findall(log_text(run, role, "asymmetric")))
        first[role] = maps[role][standbys[primary]][0] if primary in standbys else None
    expect(None not in first.values() and first["a"] != first["b"],
           f"asymmetric: alone, a would back rail 0 up on rail {first['a']} and b on rail {first['b']}")
    expect_pairs_reachable(run, "asymmetric", same_rail=True)
    end = {}
    for role in ("a", "b"):
        mine, last = data_comm(run, role, "asymmetric")
        fo = failovers(mine)
        expect(len(fo) == 2, f"{role} asymmetric: two failovers ({[(e['from'], e['to']) for e in fo]})")
        end[role] = maps[role][dev_of(last["active"])][0]
    expect(end["a"] == end["b"] and end["a"] != 0,
           f"asymmetric: the stream ended on one rail at both ends (a: rail {end['a']}, b: rail {end['b']})")
    expect_no_crash(run, "asymmetric")
