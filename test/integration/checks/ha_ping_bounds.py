"""ha-ping-bounds: nothing hangs (no server, a black-holed rail), and the server does not trust its
client (issue 31, item 6). What ha-ping-bounds.guest.sh recorded:
  trust: one server on b (token, --count 3, --timeout 8, --max-size 1M) and, from a, a client with
    another token (refused, not counted), a silent connection with a client asking for a 2M size
    right behind it (the silent one dropped after the 5 s handshake step, the client refused: above
    --max-size), a client asking for --timeout 3600 stopped in its ping-pong and one more behind it
    (both capped at the server's 8 s: the stalled session ended by the server, the next one served);
  peer-absent: no server on b; black-hole, black-hole-retry6: b drops everything on rail 1."""
import json

from check import expect, expect_each, expect_traffic, rail

MAX_SIZE_REFUSAL = "size 2 MiB is above the server's --max-size 1 MiB"


def trust(run):
    expect(run.rc("a", "trust-wrong-token") == 2, "trust: a client with another token exits 2")
    err = run.report("a", "trust-wrong-token").get("error", "")
    expect(err.endswith(": authentication failed") and err.startswith("refused by "),
           f"trust: it is told 'authentication failed' and nothing more: {err}")

    expect(run.rc("a", "trust-huge-size") == 2, "trust: a client asking for a 2M size exits 2")
    err = run.report("a", "trust-huge-size").get("error", "")
    expect(MAX_SIZE_REFUSAL in err, f"trust: refused with the reason: {err}")
    secs = int(run.text("a", "trust-huge-size.seconds"))
    expect(secs <= 15, f"trust: the silent connection ahead of it held the server {secs} s (step 5 s, bound 15)")

    rc = run.rc("a", "trust-capped")
    expect(rc == 0, f"trust: the client behind the stalled one exit 0 (124: held by the stalled session): {rc}")
    rep = run.report("a", "trust-capped")
    expect(rep["settings"]["timeout_s"] == 8, f"trust: its --timeout 3600 capped at the server's 8 s: {rep['settings']}")
    expect(rail(rep, 0)["status"] == "healthy", f"trust: its rail 0 healthy ({rail(rep, 0)['reason']})")
    expect_traffic(rail(rep, 0), [8, 65536])
    secs = int(run.text("a", "trust-capped.seconds"))
    expect(secs < 120, f"trust: served {secs} s after the stalled client stopped (bound 120)")
    expect("the server caps --timeout at 8 s" in run.text("a", "trust-capped.log"), "trust: the client notes the cap")

    expect(run.rc("b", "trust") == 2, "trust: server exit 2 (the worst session: the refused request)")
    lines = [json.loads(x) for x in run.text("b", "trust.json").splitlines() if x.strip()]
    expect([x.get("client") for x in lines] == [1, 2, 3],
           f"trust: three clients reported, the wrong token and the silent connection not counted: "
           f"{[x.get('client') for x in lines]}")
    refused, stalled, capped = lines
    expect(MAX_SIZE_REFUSAL in refused.get("error", "") and refused["settings"]["sizes"] == [8, 2 << 20],
           f"trust: client 1 reported refused: {refused.get('error')}")
    r0 = stalled["rails"][0] if stalled["rails"] else {}
    expect(stalled["settings"]["timeout_s"] == 8 and r0.get("status") not in (None, "healthy")
           and "8000 ms" in r0.get("reason", ""),
           f"trust: client 2 (stopped) ended by the server after its 8 s: {r0.get('status')} {r0.get('reason')}")
    expect(capped["ok"] and capped["settings"]["timeout_s"] == 8, "trust: client 3 served, timeout 8 s")
    log = run.text("b", "trust.log")
    expect("dropped a connection from 10.30.0.1: authentication failed" in log, "trust: server: the wrong token dropped")
    expect("dropped a connection from 10.30.0.1: no valid hello within 5000 ms" in log,
           "trust: server: the silent connection dropped after the 5 s step")
    expect(log.count("asked for --timeout 3600 s: capped at this server's 8 s") == 2, "trust: server: both caps logged")


def peer_absent(run):
    expect(run.rc("a", "peer-absent") == 2, "no server: client exit 2")
    rep = run.report("a", "peer-absent")
    expect("unreachable" in rep.get("error", ""), f"no server: error says unreachable: {rep.get('error')}")
    secs = int(run.text("a", "peer-absent.seconds"))
    expect(secs <= 15, f"no server: gave up after {secs} s (--timeout 5, bound 15)")


def black_hole(run):
    for name, bound, why in (("black-hole", 10, "no completion within"),
                             ("black-hole-retry6", 30, "retry counter exceeded")):
        expect(run.rc("a", name) == 1, f"{name} on rail 1: client exit 1")
        rep = run.report("a", name)
        r0, r1 = rail(rep, 0), rail(rep, 1)
        expect(r0["status"] == "healthy", f"{name}: rail 0 healthy ({r0['reason']})")
        expect_traffic(r0, [8, 65536])
        expect(r1["status"] == "unreachable", f"{name}: rail 1 unreachable: {r1['reason']}")
        expect(why in r1["reason"], f"{name}: reason says '{why}'")
        secs = int(run.text("a", f"{name}.seconds"))
        expect(secs < 2 * bound + 30, f"{name}: client finished in {secs} s (phase bound {bound} s)")
        expect(run.rc("b", name) == 1, f"{name}: server exit 1")
        srv = run.report("b", name)
        expect(rail(srv, 1)["status"] == "unreachable", f"{name}: server sees rail 1 unreachable too")


def check(run):
    expect_each("ha-ping-bounds", [("trust", lambda: trust(run)), ("peer-absent", lambda: peer_absent(run)),
                                   ("black-hole", lambda: black_hole(run))])
