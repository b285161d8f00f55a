"""bed-rails: what test/vm/smoke-rails.sh recorded in a's reach.txt (one ibv_rc_pingpong per
line: a's rail, b's rail, expected, got, seconds) and both guests' rails.txt (run-pair.sh's map).
The guests already failed the run on any mismatch; this checks the record is complete: every
rail to itself works, some cross-rail pair inside an island works, some pair across islands
fails, and b's NICs are numbered differently from a's (the test's --rail-order-b)."""
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
