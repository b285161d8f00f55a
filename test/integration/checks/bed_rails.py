"""bed-rails: what test/vm/smoke-rails.sh recorded in a's reach.txt (one ibv_rc_pingpong per
line: a's rail, b's rail, expected, got, seconds) and both guests' rails.txt (run-pair.sh's map).
The guests already failed the run on any mismatch; this checks the record is complete: every
rail to itself works, some cross-rail pair inside an island works, some pair across islands
fails, and b's NICs are numbered differently from a's (the test's --rail-order-b). The plugin's
view (ha-ping --list --json in each guest): without NCCL_IB_HCA (list.json) four devices, every
speed > 0, railId and planeId undefined, as net_ib reports them (the plugin's own rails from the
addresses are never reported: on one flat subnet they would put every NIC on one rail); with
NCCL_IB_HCA naming each device's rail and plane (list-hca.json: rail 10 + the bed's rail, plane
its island) exactly those, so the same rail has the same railId on both hosts whatever the
device numbering. makeVDevice (the same run's --fuse, on each guest's real ports): every good
fusion made, numbered after the ports, reported as net_ib makes it - the names joined by '+', the
speeds summed, no rail (each port has its own), the virtual plane bit with each member's plane bit
(planes numbered in device order, as net_ib does), vProps the members - and an INFO line saying
so; a port named twice and a port that is not there refused with a WARN naming it; with
NCCL_IB_MERGE_NICS=0 refused as net_ib does, with its INFO line. fused-islands (issue #33 item 4):
a stream on each host's devices 0 and 1 fused - rails 0 and 1 on a, rails 2 and 3 on b - every
byte verified; each member's own pair crosses islands: it is never tried (every member says so at
both ends and starts on a pair inside an island), no failover, every member's active pair inside
one island."""
import re

from check import expect
from failover_common import expect_no_crash, expect_stream_ok, log_text, stats


def rows(run, role, name):
    return [line.split() for line in run.text(role, name).splitlines() if not line.startswith("#")]


def check(run):
    maps = {role: {int(r[0]): r for r in rows(run, role, "rails.txt")} for role in ("a", "b")}
    rails = sorted(maps["a"])
    expect(len(rails) == 4, f"4 rails in a's map ({rails})")
    moved = [r for r in rails if maps["a"][r][2] != maps["b"][r][2]]
    expect(moved, f"b's devices differ from a's for rails {moved}")
    for r in rails:
        expect(maps["b"][r][4] == maps["a"][r][2], f"rail {r}: b's map names a's device {maps['a'][r][2]}")
    reach = rows(run, "a", "reach.txt")
    for ra, rb, want, got, secs in reach:
        expect(got == want, f"a's rail {ra} -> b's rail {rb}: expected {want}, got {got} ({secs} s)")
    same = {int(ra) for ra, rb, want, _, _ in reach if ra == rb and want == "ok"}
    expect(same == set(rails), f"every rail reaches itself ({sorted(same)})")
    island = lambda r: maps["a"][int(r)][6]
    expect(any(ra != rb and want == "ok" and island(ra) == island(rb) for ra, rb, want, _, _ in reach),
           "a cross-rail pair inside an island works")
    expect(any(want == "fail" and island(ra) != island(rb) for ra, rb, want, _, _ in reach),
           "a pair across islands fails")
    check_list(run, maps)
    check_fused_islands(run, maps)


CROSSES = re.compile(r"its own pair (rxe\d):1 <-> the peer's device (\d) crosses islands \((\S+) here, (\S+) at the peer\)")


def check_fused_islands(run, maps):
    expect_stream_ok(run, "fused-islands", 6)
    dev_rail = {role: {m[2]: int(r) for r, m in maps[role].items()} for role in ("a", "b")}  # "rxe0" -> rail
    island = {int(r): m[6] for r, m in maps["a"].items()}
    for role in ("a", "b"):
        peer = "b" if role == "a" else "a"
        said = CROSSES.findall(log_text(run, role, "fused-islands"))
        # The stream's comms and the driver's ring both run on the fused device: every member of each
        # (two members, send and recv) names its own pair as crossing islands, here and at the peer.
        expect(len(said) >= 4 and all(i == "10.20.0.0/15" and j == "10.22.0.0/15" or i == "10.22.0.0/15" and
                                      j == "10.20.0.0/15" for _, _, i, j in said),
               f"{role} fused-islands: every member's own pair crosses islands and is not tried ({said})")
        events = stats(run, role, "fused-islands")
        members = [e for e in events if e.get("member")]
        expect(members and not [e for e in events if e["event"] in ("failover", "fatal")],
               f"{role} fused-islands: {len(members)} member records, no failover")
        for e in members:
            mine = dev_rail[role].get(e["active"].split(":")[0])
            theirs = dev_rail[peer].get(f"rxe{e['active_peer_dev']}")
            expect(mine is not None and theirs is not None and island[mine] == island[theirs],
                   f"{role} fused-islands: member {e['member']} ({e['kind']}) active on rail {mine} <-> the peer's "
                   f"rail {theirs}, inside one island")
    expect_no_crash(run, "fused-islands")


def check_list(run, maps):
    ids = {}
    for role in ("a", "b"):
        rail_of = {row[2]: int(r) for r, row in maps[role].items()}  # rxeK -> rail
        island_of = {row[2]: int(row[6]) for row in maps[role].values()}
        for name, hca in (("list", False), ("list-hca", True)):
            expect(run.rc(role, name) == 0, f"{name}: {role}: ha-ping --list --json exit 0")
            devs = run.report(role, name)["devices"]
            expect(len(devs) == 4, f"{name}: {role}: 4 devices ({[d['id'] for d in devs]})")
            expect(all(d["speed_mbps"] > 0 for d in devs),
                   f"{name}: {role}: speeds {[d['speed_mbps'] for d in devs]} > 0")
            got = {d["name"]: (d["rail_id"], d["plane_id"]) for d in devs}
            if not hca:
                expect(all(v == (None, None) for v in got.values()),
                       f"{name}: {role}: railId and planeId undefined without NCCL_IB_HCA {got}")
                continue
            want = {n: (10 + rail_of[n], island_of[n]) for n in got}
            expect(got == want, f"{name}: {role}: railId / planeId as NCCL_IB_HCA names them {got} (expected {want})")
            ids[role] = {rail_of[n]: got[n][0] for n in got}
    expect(ids["a"] == ids["b"], f"list-hca: the same rail has the same railId on a and b ({ids['a']})")
    for role in ("a", "b"):
        check_fuse(run, role)


INVALID_USAGE = 5  # ncclInvalidUsage
VIRT_PLANE = 1 << 14  # net_ib's NCCL_IB_PLANE_VIRT_BIT


def lines(report, level, text):
    return [l["text"] for l in report["log"] if l["level"] == level and text in l["text"]]


def check_fuse(run, role):
    r = run.report(role, "list-hca")
    devs = r["devices"]
    planes = []  # net_ib's plane indices: the undefined plane first, then each plane as it appears
    plane_idx = []
    for d in devs:
        p = d["plane_id"]
        if p not in [None] + planes:
            planes.append(p)
        plane_idx.append(0 if p is None else planes.index(p) + 1)
    fused = {tuple(f["devs"]): f for f in r["fused"]}
    expect(sorted(fused) == sorted([(0, 1), (0, 2), (0, 1, 2, 3), (1, 1), (0, 9)]),
           f"list-hca: {role}: every --fuse answered ({sorted(fused)})")
    first = len(devs)  # virtual devices are numbered after the ports, in the order made
    for k, want in enumerate(((0, 1), (0, 2), (0, 1, 2, 3))):
        f = fused[want]
        name = "+".join(devs[i]["name"] for i in want)
        speed = sum(devs[i]["speed_mbps"] for i in want)
        plane = VIRT_PLANE
        for i in want:
            plane |= 1 << plane_idx[i]
        expect(f["result"] == 0 and f["index"] == first + k, f"list-hca: {role}: makeVDevice {list(want)} made "
               f"device {first + k} ({f})")
        expect(f.get("name") == name and f.get("speed_mbps") == speed and f.get("rail_id") in (-1, None)
               and f.get("plane_id") == plane and f.get("vdevs") == list(want),
               f"list-hca: {role}: device {first + k} reported as net_ib merges it: {name}, {speed} Mbps, rail -1, "
               f"plane {plane}, vProps {list(want)} ({f})")
        line = (f"NET/HA: makeVDevice {name} is device {first + k} (speed {speed}, rail -1, plane {plane}): "
                f"each connection on it stripes over its {len(want)} ports")
        expect(lines(r, "INFO", line), f"list-hca: {role}: INFO '{line}'")
    twice = f"makeVDevice [1,1]: port 1 ({devs[1]['name']}) named twice"
    expect(fused[(1, 1)]["result"] == INVALID_USAGE and lines(r, "WARN", twice), f"list-hca: {role}: WARN '{twice}'")
    absent = "makeVDevice [0,9]: device 9 is no port of this plugin (it has 4)"
    expect(fused[(0, 9)]["result"] == INVALID_USAGE and lines(r, "WARN", absent), f"list-hca: {role}: WARN '{absent}'")
    expect(len(lines(r, "WARN", "makeVDevice")) == 2, f"list-hca: {role}: no other makeVDevice WARN")
    expect(run.rc(role, "list-nomerge") == 0, f"list-nomerge: {role}: ha-ping --list --json exit 0")
    n = run.report(role, "list-nomerge")
    f = n["fused"][0]
    off = f"NET/HA: makeVDevice {devs[0]['name']}+{devs[1]['name']}: not made, NCCL_IB_MERGE_NICS=0"
    expect(f["devs"] == [0, 1] and f["result"] == INVALID_USAGE and lines(n, "INFO", off),
           f"list-nomerge: {role}: refused with INFO '{off}' ({f})")
    expect("HA_NCCL_IB_MERGE_NICS=0" in n["settings"], f"list-nomerge: {role}: the settings line says it")
