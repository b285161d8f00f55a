"""plugin-ece: Enhanced Connection Establishment as net_ib does it, through the preloaded ECE shim
(test/integration/shim/ece_shim.cpp; its CASE.ece.log has one line per query, set and RTR). a is
rank 0 (the listener, the receiver), b rank 1 (the connector); a stream b -> a on rxe0, standby rxe1.
Host memory: no flush QPs, so every QP in the logs is connected to a peer QP.

on        a's "device" supports 0x3c, b's 0x1e (reduction: AND, 0x1c). a pulls rail 0 at 3 s and
          restores it at 6 s. Every QP either side connects to a peer QP sets an ECE before RTR, none
          too late; on every pair of connected QPs, one side (the requester: its endpoint went
          first) sets the reduced ECE 0x1c that the other (the responder) returned, and the
          responder set the requester's offer (a's 0x3c or b's 0x1e); both QPs end with 0x1c.
          Pairs on rxe0 (the primary and the re-protected standby) and rxe1 (the standby the
          stream failed over to), with each side as the requester at least once (primary: b asks;
          standby: a asks). Every byte verified through the failover; the connect / accept INFO
          lines end with "ECE 0x1c".
home-down a's rail 0 down before the stream, back at 4 s: the connections start on their standby
          pair (rxe1); every pair there and on rxe0 after the re-protection agrees as in `on`.
one-side  a unsupported (as rxe answers), b 0x1e: no ECE set anywhere; the stream verifies.
off       NCCL_IB_ECE_ENABLE=0 on both: no ECE query or set at all; the stream verifies.

Before issue #32's ECE change the plugin made no ECE call: `on` fails (no set before any RTR)."""
import re

from check import expect, expect_each
from failover_common import data_comm, expect_stream_ok, log_text, stats

A_OPTIONS, B_OPTIONS = 0x3C, 0x1E
REDUCED = A_OPTIONS & B_OPTIONS
RTR = re.compile(r"^rtr qp=(\d+) dev=(\S+) dest=(\d+) set=(none|0x[0-9a-f]+) ece=0x([0-9a-f]+)$")
SET = re.compile(r"^set qp=(\d+) dev=(\S+) options=0x([0-9a-f]+)( late| bad)?$")
QUERY = re.compile(r"^query qp=(\d+) dev=(\S+) (?:options=0x([0-9a-f]+)|unsupported)$")
CONNECT_LINE = re.compile(r"NET/HA: (?:connected|accepted) .*\(tc \d+ sl \d+\)(?: ECE 0x([0-9a-f]+))?")


def ece_log(run, role, name):
    """(rtr records, set records, query records) of a side's shim log; every line must parse."""
    p = run.out(role, f"{name}.ece.log")
    lines = p.read_text().splitlines() if p.exists() else []
    rtr, sets, queries = [], [], []
    bad = [line for line in lines if not (RTR.match(line) or SET.match(line) or QUERY.match(line))]
    expect(not bad, f"{role} {name}: every shim log line parses ({bad[:3]})")
    for line in lines:
        m = RTR.match(line) or SET.match(line) or QUERY.match(line)
        if line.startswith("rtr"):
            qp, dev, dest, sset, ece = m.groups()
            rtr.append({"qp": int(qp), "dev": dev, "dest": int(dest),
                        "set": None if sset == "none" else int(sset, 16), "ece": int(ece, 16)})
        elif line.startswith("set"):
            sets.append({"qp": int(m.group(1)), "options": int(m.group(3), 16), "flag": (m.group(4) or "").strip()})
        else:
            queries.append({"qp": int(m.group(1)), "options": None if m.group(3) is None else int(m.group(3), 16)})
    print(f"check: info: {role} {name}: shim log: {len(queries)} queries, {len(sets)} sets, {len(rtr)} RTRs")
    return rtr, sets, queries


def check_on(run):
    name = "on"
    expect_stream_ok(run, name, 12)
    for role in ("a", "b"):
        mine, last = data_comm(run, role, name, stats(run, role, name))
        expect(last["failovers"] >= 1 and last["reprotections"] >= 1,
               f"{role} {name}: the stream's comm failed over ({last['failovers']}) and was re-protected "
               f"({last['reprotections']})")
    expect_agreed(run, name, need={"rxe0": 2, "rxe1": 1})


def check_home_down(run):
    name = "home-down"
    expect_stream_ok(run, name, 8)
    for role in ("a", "b"):
        started = re.findall(r"NET/HA: (?:connected|accepted) .* on the pair through rxe1:1 QP \d+", log_text(run, role, name))
        expect(started, f"{role} {name}: a connection started on its standby pair ({len(started)})")
        mine, last = data_comm(run, role, name, stats(run, role, name))
        expect(last["reprotections"] >= 1, f"{role} {name}: re-protected on rail 0 ({last['reprotections']})")
    expect_agreed(run, name, need={"rxe0": 1, "rxe1": 2})


def expect_agreed(run, name, need):
    """Every QP set an ECE before RTR, and every connected pair agreed as net_ib's exchange does;
    at least need[device] pairs per device, each side asking at least once."""
    logs = {role: ece_log(run, role, name) for role in ("a", "b")}
    offer = {"a": A_OPTIONS, "b": B_OPTIONS}
    for role, (rtr, sets, queries) in logs.items():
        bad = [s for s in sets if s["flag"]]
        expect(not bad, f"{role} {name}: no ECE set after INIT or with a wrong vendor / comp_mask: {bad}")
        expect(queries and all(q["options"] is not None for q in queries), f"{role} {name}: ECE queried ({len(queries)})")
        unset = [r for r in rtr if r["set"] is None]
        expect(rtr and not unset,
               f"{role} {name}: every one of {len(rtr)} QPs connected set an ECE before RTR (without: {unset})")
    # Each rail's devices have the same name on both hosts (rxeN on rail N); QP numbers are per device.
    by_b = {(r["dev"], r["qp"], r["dest"]): r for r in logs["b"][0]}
    pairs = []
    for ra in logs["a"][0]:
        rb = by_b.get((ra["dev"], ra["dest"], ra["qp"]))
        if rb is None:
            continue
        asker = "a" if ra["set"] == REDUCED else "b" if rb["set"] == REDUCED else None
        other = "b" if asker == "a" else "a"
        answer = {"a": ra, "b": rb}
        ok = asker is not None and answer[other]["set"] == offer[asker] and ra["ece"] == rb["ece"] == REDUCED
        expect(ok, f"{name}: QP pair a {ra['qp']} ({ra['dev']}) <-> b {rb['qp']} ({rb['dev']}): a set "
                   f"0x{ra['set']:x}, b set 0x{rb['set']:x}, ECE a 0x{ra['ece']:x} b 0x{rb['ece']:x} (expected: "
                   f"the requester sets 0x{REDUCED:x}, the responder its offer, both end with 0x{REDUCED:x})")
        pairs.append((ra["dev"], asker))
    devs = [d for d, _ in pairs]
    print(f"check: info: {name}: connected pairs (a's device, requester): {pairs}")
    expect(all(devs.count(d) >= n for d, n in need.items()),
           f"{name}: pairs per device {dict((d, devs.count(d)) for d in need)} (at least {need})")
    expect({"a", "b"} <= {s for _, s in pairs}, f"{name}: each side asked at least once (primary: b; standby: a)")
    for role in ("a", "b"):
        tails = CONNECT_LINE.findall(log_text(run, role, name))
        expect(tails and all(t == f"{REDUCED:x}" for t in tails),
               f"{role} {name}: the connect / accept INFO lines end with ECE 0x{REDUCED:x}: {tails}")


def check_one_side(run):
    name = "one-side"
    expect_stream_ok(run, name, 0)
    for role in ("a", "b"):
        rtr, sets, queries = ece_log(run, role, name)
        expect(not sets, f"{role} {name}: no ECE set ({len(sets)}): the peer has none")
        expect(queries, f"{role} {name}: ECE queried ({len(queries)})")
        if role == "a":
            expect(all(q["options"] is None for q in queries), f"{role} {name}: every query answered unsupported")
        expect(rtr and all(r["set"] is None for r in rtr), f"{role} {name}: QPs connected without ECE")
        tails = CONNECT_LINE.findall(log_text(run, role, name))
        expect(tails and not any(tails), f"{role} {name}: no ECE in the connect / accept INFO lines: {tails}")


def check_off(run):
    name = "off"
    expect_stream_ok(run, name, 0)
    for role in ("a", "b"):
        rtr, sets, queries = ece_log(run, role, name)
        expect(not sets and not queries, f"{role} {name}: NCCL_IB_ECE_ENABLE=0: no ECE call ({len(queries)} queries, "
                                         f"{len(sets)} sets)")
        expect(rtr and all(r["set"] is None for r in rtr), f"{role} {name}: QPs connected without ECE")
        expect("HA_NCCL_IB_ECE_ENABLE=0" in log_text(run, role, name), f"{role} {name}: the settings line says ECE off")


def check(run):
    expect_each("plugin-ece", [("on", lambda: check_on(run)), ("home-down", lambda: check_home_down(run)),
                               ("one-side", lambda: check_one_side(run)), ("off", lambda: check_off(run))])
