"""failover-sender-down: rail 0 pulled on VM b, the sender of a --one-way stream, ~5 s into a 15 s
stream. b gets the port event; a only learns from the protocol. Expected: both drivers exit 0,
every byte verified, exactly one failover (rxe0:1 -> rxe1:1) for b's send comm and one for a's
recv comm, no duplicate delivered, the stream goes on over rail 1.

Observability (issue #11 item 7), fault run: every stats record carries the host, the peer's
handshake address (the other VM's) and NCCL's comm id as a hex string, and one "init" record per
process names the plugin version; HA_NCCL_PROM_FILE=/tmp/fault_%h_%p.prom was expanded to the host
and pid of those records and parses as Prometheus text. 12 s into the stream (rail 0 still down on
b) every open connection is unprotected (the standby was left by the failover and cannot be rebuilt
on rail 0), nccl_ha_failovers_total >= 1, and every active path is on rxe1:1; b shows rxe0:1 down.
After the run the counters are no smaller (monotonic across close) and the stream's bytes counted."""
import re

from check import expect, fail
from failover_common import (STANDBY_PORT, PORT_DOWN_STALL_BOUND_MS, PRIMARY, check_failover, data_comm, log_text, prom,
                             prom_value, stats)

MIN_SECONDS = 15  # failover-sender-down.guest.sh
HANDSHAKE_IP = re.compile(r"NET/HA: nccl-ha .* \d+ device\(s\): .*; handshakes on (\S+) \(")
COUNTERS = ("nccl_ha_failovers_total", "nccl_ha_failbacks_total", "nccl_ha_reprotections_total",
            "nccl_ha_replayed_messages_total", "nccl_ha_messages_total", "nccl_ha_sent_bytes_total",
            "nccl_ha_received_bytes_total")


def handshake_ip(run, role):
    m = HANDSHAKE_IP.search(log_text(run, role, "fault"))
    if not m:
        fail(f"{role} fault: no 'handshakes on ADDRESS' INFO line in fault.log")
    return m.group(1)


def check_records(run, role, other_ip):
    inits = []
    events = stats(run, role, "fault", inits)
    pids = {e["pid"] for e in events}
    expect(len(pids) == 1, f"{role} fault: the stats records come from one process: {sorted(pids)}")
    pid = pids.pop()
    mine = [i for i in inits if i["pid"] == pid]
    expect(len(mine) == 1 and mine[0]["plugin_version"],
           f"{role} fault: one 'init' record for pid {pid} naming the plugin version: {mine}")
    hosts = {e["host"] for e in events} | {mine[0]["host"]}
    expect(len(hosts) == 1 and "" not in hosts, f"{role} fault: every record names the one host {hosts}")
    host = hosts.pop()
    peers = {e["peer"] for e in events}
    expect(peers == {other_ip}, f"{role} fault: every record's peer is the other VM's handshake address "
                                f"{other_ip}: {sorted(peers)}")
    ids = {e["comm_id"] for e in events}
    expect(all(isinstance(i, str) and re.fullmatch(r"0x[0-9a-f]{16}", i) for i in ids),
           f"{role} fault: every record's comm_id is a 64-bit hex string: {sorted(ids)}")
    _, last = data_comm(run, role, "fault", events)
    field = "bytes_sent" if role == "b" else "bytes_received"
    expect(last["event"] == "close" and last[field] > 0,
           f"{role} fault: the stream's comm counted {last[field]} {field.replace('_', ' ')} at close")
    return host, pid


def check_snapshot(run, role, host, pid):
    name = f"fault_{host}_{pid}.prom"
    what = f"{role} fault"
    mid, mid_types = prom(run.out(role, f"mid.{name}"), f"{what} (12 s into the stream)")
    end, end_types = prom(run.out(role, name), f"{what} (after the run)")
    print(f"check: info: {what}: {name} and mid.{name} parse as Prometheus text "
          f"({len(mid)} / {len(end)} samples)")
    for samples, when in ((mid, "mid-stream"), (end, "after the run")):
        labels = {(dict(ls).get("host"), dict(ls).get("pid")) for (_, ls) in samples}
        expect(labels == {(host, str(pid))}, f"{what} {when}: every sample labelled host={host} pid={pid}: {labels}")
        expect(all(n.startswith("nccl_ha_") for (n, _) in samples), f"{what} {when}: every metric is nccl_ha_*")
    expect(all(mid_types.get(c) == "counter" for c in COUNTERS), f"{what}: {', '.join(COUNTERS)} are counters")

    states = {s: prom_value(mid, "nccl_ha_connections", state=s) for s in ("protected", "unprotected", "failed")}
    unprotected = prom_value(mid, "nccl_ha_unprotected_connections")
    total = sum(v or 0 for v in states.values())
    expect(total >= 1 and states["unprotected"] == total and unprotected == total,
           f"{what} mid-stream: all {total:.0f} open connection(s) unprotected (standby left by the failover, "
           f"rail 0 down): {states}, nccl_ha_unprotected_connections {unprotected}")
    failovers = prom_value(mid, "nccl_ha_failovers_total")
    expect(failovers is not None and failovers >= 1, f"{what} mid-stream: nccl_ha_failovers_total {failovers} >= 1")
    on = {(p, r): prom_value(mid, "nccl_ha_port_connections", port=p, role=r)
          for p in (PRIMARY, STANDBY_PORT) for r in ("active", "standby")}
    expect(on[(STANDBY_PORT, "active")] == total and on[(PRIMARY, "active")] == 0
           and on[(PRIMARY, "standby")] == 0 and on[(STANDBY_PORT, "standby")] == 0,
           f"{what} mid-stream: every connection active on {STANDBY_PORT}, no standby anywhere: {on}")
    up = {p: prom_value(mid, "nccl_ha_port_up", port=p) for p in (PRIMARY, STANDBY_PORT)}
    want = {PRIMARY: 0.0, STANDBY_PORT: 1.0} if role == "b" else {PRIMARY: 1.0, STANDBY_PORT: 1.0}
    expect(up == want, f"{what} mid-stream: nccl_ha_port_up {up} (rail 0 pulled on b only)")

    smaller = [c for c in COUNTERS if (prom_value(end, c) or 0) < (prom_value(mid, c) or 0)]
    expect(not smaller, f"{what}: no counter smaller after the run than mid-stream (closed comms folded in): "
                        f"{smaller}")
    final_failovers = prom_value(end, "nccl_ha_failovers_total")
    expect(final_failovers >= 1, f"{what} after the run: nccl_ha_failovers_total {final_failovers} >= 1")
    traffic = "nccl_ha_sent_bytes_total" if role == "b" else "nccl_ha_received_bytes_total"
    expect(prom_value(end, traffic) > 0, f"{what} after the run: {traffic} {prom_value(end, traffic):.0f} > 0")


def check(run):
    check_failover(run, "b", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS)
    ips = {role: handshake_ip(run, role) for role in ("a", "b")}
    for role, other in (("a", "b"), ("b", "a")):
        host, pid = check_records(run, role, ips[other])
        check_snapshot(run, role, host, pid)
