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
device numbering."""
from check import expect


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
