"""plugin-qos: the traffic class the plugin gives its QPs reaches the wire (Soft-RoCE copies the GRH
traffic class into the IP TOS byte of each RoCE v2 packet). Per case, each side's tcpdump captures
of both rails (UDP 4791, both directions) must show only the expected TOS, with traffic on rail 0
(the primary) and on rail 1 (the standby: heartbeats; in `env` the data after the failover), and
the plugin's connect/accept lines must name the same tc (and sl). `env` also pulls rail 0 and
restores it: the re-protected standby QP on rail 0 sends with the same TOS after the rail-up.
`fifo` sets NCCL_IB_FIFO_TC besides NCCL_IB_TC: receive comms' QPs send with the one, send comms'
QPs with the other (each packet's BTH destination QP says which comm's QP sent it)."""
import re
import struct

from check import expect, expect_each, fail

CASES = {  # case: (expected TOS, expected SL)
    "env": (96, 3),
    "config": (104, 0),
    "override": (40, 0),  # HA_NCCL_IB_TC wins; no SL set, trafficClass 104 does not fit 4 bits
    "default": (0, 0),
    "fifo": (96, 0),  # send comms' QPs; receive comms' QPs: FIFO_TC
}
FIFO_TC = 104
ACCEPTED = re.compile(r"NET/HA: accepted on rxe0:1 QP (\d+) <- QP (\d+)")
CONNECTED = re.compile(r"NET/HA: connected rxe0:1 QP (\d+) -> \S+ QP (\d+)")
RAIL0 = {"a": "10.20.0.1", "b": "10.20.0.2"}  # test/vm/run-pair.sh rail_addr
INIT_LINE = re.compile(r"NCCL INFO NET/HA: nccl-ha \S+ \(net API v6-v12\): HA on; 2 device\(s\): "
                       r"\[0\] rxe0:1 RoCE \d+ Mbps rail 10\.20\.0\.0/24 island 10\.20\.0\.0/24 railId undef planeId undef maxComms \d+ standby rxe1:1 "
                       r"\[1\] rxe1:1 RoCE \d+ Mbps rail 10\.21\.0\.0/24 island 10\.21\.0\.0/24 railId undef planeId undef maxComms \d+ standby rxe0:1; "
                       r"islands: prefix from the address; handshakes on 10\.30\.0\.\d \(eth2\); .*progress thread ncclHaProgress")
# relaxed ordering in the INIT line: auto (env, default) leaves Soft-RoCE off, override forces it on
RO = {"env": "off", "config": "off", "override": "on", "default": "off", "fifo": "off"}
MEMORY_TAIL = "; relaxed ordering {}; dmabuf rxe0:1 no rxe1:1 no"
CONNECT_LINE = re.compile(r"NET/HA: (connected|accepted) .*\(tc (\d+) sl (\d+)\)")


def pcap_packets(path):
    """(unix seconds, src ip, dst ip, tos, destination QP) of every IPv4 packet of a classic pcap file
    (Ethernet, or Linux cooked v1/v2 as `tcpdump -i any` writes); the QP from the RoCE v2 BTH after
    the UDP header (None when the packet is cut short)."""
    data = path.read_bytes()
    if len(data) < 24:
        fail(f"{path}: not a pcap file ({len(data)} bytes)")
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    ip_at, proto_at = {1: (14, 12), 113: (16, 14), 276: (20, 0)}.get(linktype, (None, None))
    if ip_at is None:
        fail(f"{path.name}: link type {linktype} (expected Ethernet or Linux cooked)")
    out, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if len(pkt) >= ip_at + 20 and pkt[proto_at:proto_at + 2] == b"\x08\x00":
            ip = pkt[ip_at:]
            src, dst = (".".join(str(b) for b in ip[i:i + 4]) for i in (12, 16))
            bth = ip[(ip[0] & 0xF) * 4 + 8:]
            qpn = int.from_bytes(bth[5:8], "big") if ip[9] == 17 and len(bth) >= 8 else None
            out.append((sec + frac / (1e9 if nano else 1e6), src, dst, ip[1], qpn))
    return out


def on_rail(packets, r):
    """The packets of rail r (10.20.0.0/16 rail 0, 10.21.0.0/16 rail 1)."""
    prefix = f"10.{20 + r}."
    return [p for p in packets if p[1].startswith(prefix) and p[2].startswith(prefix)]


def check_case(run, name, tos, sl):
    for role in ("a", "b"):
        expect(run.rc(role, name) == 0, f"{name}: {role}'s driver exit 0 (stream verified)")
    for role in ("a", "b"):
        log = run.text(role, f"{name}.log")
        inits = INIT_LINE.findall(log)
        expect(len(inits) == 1, f"{name}: {role}: one INIT|NET line (version, devices, standby ports, handshakes, "
                                f"settings): {len(inits)}")
        tail = MEMORY_TAIL.format(RO[name])
        init_lines = [line for line in log.splitlines() if INIT_LINE.search(line)]
        expect(init_lines and all(tail in line for line in init_lines),
               f"{name}: {role}: the INIT line says '{tail}' (NCCL's relaxed-ordering rule; no dma-buf on rxe)")
        got = {(m.group(2), m.group(3)) for m in CONNECT_LINE.finditer(log)}
        if name == "default":  # NCCL_DEBUG_SUBSYS=INIT: the NET lines stay hidden, as NCCL hides them
            expect(not got and "NET/HA: listening" not in log, f"{name}: {role}: no NET-only INFO line shown")
            continue
        if name == "fifo":
            accepted = {m.group(2) for m in CONNECT_LINE.finditer(log) if m.group(1) == "accepted"}
            connected = {m.group(2) for m in CONNECT_LINE.finditer(log) if m.group(1) == "connected"}
            expect(accepted == {str(FIFO_TC)} and connected == {str(tos)},
                   f"{name}: {role}: accepted (receive comm) tc {accepted}, connected (send comm) tc {connected} "
                   f"(expected {FIFO_TC} and {tos})")
            continue
        expect(got == {(str(tos), str(sl))}, f"{name}: {role}'s connect/accept lines say tc {tos} sl {sl}: {sorted(got)}")
    if name == "fifo":
        return check_fifo(run, name, tos)
    for role in ("a", "b"):
        captured = pcap_packets(run.out(role, f"{name}.pcap"))
        for r in (0, 1):
            pk = on_rail(captured, r)
            tos_seen = sorted({p[3] for p in pk})
            sources = sorted({p[1] for p in pk})
            expect(len(pk) > 0 and len(sources) == 2,
                   f"{name}: {role} rail {r}: {len(pk)} RoCE packets captured, both directions ({sources})")
            expect(tos_seen == [tos], f"{name}: {role} rail {r}: every packet has TOS {tos} (seen {tos_seen})")
    if name == "env":
        faults = [line.split(" ", 2) for line in run.text("a", "env.fault_ms").splitlines()]
        expect([f[2] for f in faults] == ["rail-down 0", "rail-up 0"], f"env: rail 0 pulled and restored on a: {faults}")
        up_s = int(faults[1][1]) / 1000.0
        after = [p for p in on_rail(pcap_packets(run.out("a", "env.pcap")), 0) if p[0] > up_s + 0.5]
        expect(len(after) > 0 and {p[3] for p in after} == {tos},
               f"env: after the rail-up, rail 0 carries the re-protected standby's packets ({len(after)}), TOS {tos}")
        # Operators see it at NCCL_DEBUG=WARN: per comm, its failover and the return of protection
        # are one WARN each (the loss is told by the failover line, not by a second one).
        for role in ("a", "b"):
            warns = run.report(role, "env")["plugin_warning_lines"]
            fo = re.findall(r"NET/HA: failover of ((?:send|recv) comm \S+) rxe0:1 -> rxe1:1", "\n".join(warns))
            back = re.findall(r"NET/HA: standby rxe0:1 of ((?:send|recv) comm \S+) is up \(re-protected on rxe0:1\): "
                              r"protected again", "\n".join(warns))
            lost = [w for w in warns if "NOT protected" in w]
            expect(fo and sorted(fo) == sorted(set(fo)) and sorted(fo) == sorted(back) and not lost,
                   f"env: {role}: one failover WARN and one 'protected again' WARN per comm, no extra loss line: "
                   f"failovers {fo}, protected again {back}, loss lines {lost[:2]}")


def check_fifo(run, name, tos):
    """Rail 0 (the primary QPs): every packet to a send comm's QP came from a receive comm's QP and
    carries NCCL_IB_FIFO_TC; every packet to a receive comm's QP carries NCCL_IB_TC. Rail 1 (the
    standbys' heartbeats): one of the two."""
    to_send_qp, to_recv_qp = set(), set()  # (ip, qpn) of the send / receive comms' primary QPs
    for role, peer in (("a", "b"), ("b", "a")):
        log = run.text(role, f"{name}.log")
        for m in ACCEPTED.finditer(log):
            to_recv_qp.add((RAIL0[role], int(m.group(1))))
            to_send_qp.add((RAIL0[peer], int(m.group(2))))
        for m in CONNECTED.finditer(log):
            to_send_qp.add((RAIL0[role], int(m.group(1))))
            to_recv_qp.add((RAIL0[peer], int(m.group(2))))
    expect(len(to_send_qp) == 2 and len(to_recv_qp) == 2,
           f"{name}: the primary QPs of both sides' send and receive comms: {sorted(to_send_qp)} / {sorted(to_recv_qp)}")
    for role in ("a", "b"):
        captured = pcap_packets(run.out(role, f"{name}.pcap"))
        rail0 = on_rail(captured, 0)
        fifo = {p[3] for p in rail0 if (p[2], p[4]) in to_send_qp}
        data = {p[3] for p in rail0 if (p[2], p[4]) in to_recv_qp}
        n_fifo = sum(1 for p in rail0 if (p[2], p[4]) in to_send_qp)
        n_data = sum(1 for p in rail0 if (p[2], p[4]) in to_recv_qp)
        expect(n_fifo > 0 and fifo == {FIFO_TC},
               f"{name}: {role} rail 0: {n_fifo} packets from receive comms' QPs, TOS {sorted(fifo)} (expected {FIFO_TC})")
        expect(n_data > 0 and data == {tos},
               f"{name}: {role} rail 0: {n_data} packets from send comms' QPs, TOS {sorted(data)} (expected {tos})")
        other = {p[3] for p in on_rail(captured, 1)}
        expect(other and other <= {tos, FIFO_TC}, f"{name}: {role} rail 1 (standbys): TOS {sorted(other)}")


def check_memory(run):
    """`ha-ping --list --json`: the dma-buf probe on Soft-RoCE says unsupported (EOPNOTSUPP), so
    ptrSupport has no DMABUF; relaxed ordering on by NCCL's default rule (auto, ibv_reg_mr_iova2)
    for hardware devices, off on Soft-RoCE (its own line)."""
    for role in ("a", "b"):
        expect(run.rc(role, "list-memory") == 0, f"memory: {role}: ha-ping --list --json exit 0")
        rep = run.report(role, "list-memory")
        devs = {d["id"]: d for d in rep["devices"]}
        expect(sorted(devs) == ["rxe0:1", "rxe1:1"], f"memory: {role}: devices {sorted(devs)}")
        for dev_id, d in sorted(devs.items()):
            expect("DMABUF" not in d["ptr_support"] and "HOST" in d["ptr_support"],
                   f"memory: {role}: {dev_id} ptrSupport {d['ptr_support']} (no DMABUF)")
            expect(d["dmabuf"].startswith("unsupported (ibv_reg_dmabuf_mr probe: Operation not supported)"),
                   f"memory: {role}: {dev_id} dma-buf probe: {d['dmabuf']!r}")
            probe = [l["text"] for l in rep["log"] if f"NET/HA: {dev_id}: dma-buf " in l["text"]]
            expect(len(probe) == 1 and "dma-buf unsupported" in probe[0], f"memory: {role}: {dev_id} probe line {probe}")
        expect(rep["relaxed_ordering"].startswith("on for NCCL's buffers (NCCL_IB_PCI_RELAXED_ORDERING=2: auto; "
                                                  "libibverbs has ibv_reg_mr_iova2; Soft-RoCE devices off)"),
               f"memory: {role}: relaxed ordering {rep['relaxed_ordering']!r}")


def check(run):
    cases = [(n, lambda n=n, q=q: check_case(run, n, *q)) for n, q in CASES.items()]
    expect_each("plugin-qos", cases + [("memory", lambda: check_memory(run))])
