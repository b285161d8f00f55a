"""Shared by the four-rail VM tests (rails-sequential, rails-islands, rails-asymmetric): the bed's
rail map of each guest (rails.txt, written by run-pair.sh) and the pairs of ports the stream's
comms ran on, from the stats records of both ends (each record names this side's active and
standby ports and the peer's device at the other end of each)."""
from check import expect, fail
from failover_common import DATA_KIND, data_comm, stats


def rail_map(run, role):
    """{"rxe2": (rail, island)} of one guest (rails.txt: rail if dev addr peer_dev peer_addr island)."""
    out = {}
    for line in run.text(role, "rails.txt").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        out[f[2]] = (int(f[0]), f[6])
    if not out:
        fail(f"{role}: rails.txt names no rail")
    return out


def dev_of(port):
    """"rxe2:1" -> "rxe2" (the plugin numbers its devices by name: NCCL device N is rxeN)."""
    return port.split(":")[0]


def peer_port(index):
    return f"rxe{index}"


def stream_pairs(run, name, role):
    """The pairs (this side's port, the peer's device name) of the stream comm on `role` as its
    records show them: every active pair, and every standby pair whose peer end is known, in order,
    as (what, mine, theirs)."""
    mine, last = data_comm(run, role, name)
    out = []
    for e in mine:
        if e["active_peer_dev"] >= 0:
            out.append(("active", dev_of(e["active"]), peer_port(e["active_peer_dev"])))
        if e["standby_port"] and e["standby_peer_dev"] >= 0:
            out.append(("standby", dev_of(e["standby_port"]), peer_port(e["standby_peer_dev"])))
    expect(out, f"{role} {name}: the {DATA_KIND[role]} comm's records name its pairs of ports ({len(out)})")
    return mine, last, out


def expect_pairs_reachable(run, name, same_rail=False):
    """Every pair the stream comm ran on or kept as its standby, at both ends, joins two ports in
    one island (same_rail: on one rail: a rail-optimised bed)."""
    maps = {r: rail_map(run, r) for r in ("a", "b")}
    seen = set()
    for role in ("a", "b"):
        other = "b" if role == "a" else "a"
        _, _, pairs = stream_pairs(run, name, role)
        for what, mine, theirs in pairs:
            (r1, i1), (r2, i2) = maps[role][mine], maps[other][theirs]
            seen.add((role, what, mine, theirs))
            ok = r1 == r2 if same_rail else i1 == i2
            if not ok:
                fail(f"{role} {name}: {what} pair {role}:{mine} (rail {r1}, island {i1}) <-> {other}:{theirs} "
                     f"(rail {r2}, island {i2}) is not reachable")
    print(f"check: info: {name}: pairs seen: {sorted(seen)}")
    expect(True, f"{name}: all {len(seen)} distinct pairs (both ends' records) join ports "
                 f"{'on one rail' if same_rail else 'in one island'}")
    return maps


def failovers(events):
    return [e for e in events if e["event"] == "failover"]


def expect_no_fatal(run, name):
    for role in ("a", "b"):
        fatal = [e for e in stats(run, role, name) if e["event"] == "fatal"]
        expect(not fatal, f"{role} {name}: no fatal record ({[e['why'] for e in fatal][:2]})")
