"""plugin-qos: the traffic class the plugin gives its QPs reaches the wire (Soft-RoCE copies the GRH
traffic class into the IP TOS byte of each RoCE v2 packet). Per case, each side's tcpdump captures
of both rails (UDP 4791, both directions) must show only the expected TOS, with traffic on rail 0
(the primary) and on rail 1 (the standby: heartbeats; in `env` the data after the failover), and
the plugin's connect/accept lines must name the same tc (and sl). `env` also pulls rail 0 and
restores it: the re-protected standby QP on rail 0 sends with the same TOS after the rail-up.
`fifo` sets NCCL_IB_FIFO_TC besides NCCL_IB_TC: receive comms' QPs send with the one, send comms'
QPs with the other (each packet's BTH destination QP says which comm's QP sent it).
`ar` sets NCCL_IB_ADAPTIVE_ROUTING=1 with a threshold of 64 KiB and fails rail 0 over mid-stream:
the sender's 1 MiB messages go as plain RDMA writes, each followed by a 4-byte write with
immediate data (the size notice), on rail 0 and on rail 1 after the failover; messages up to the
threshold, and every message in `default`, as one write with immediate data (BTH opcodes, RETH
lengths)."""
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
    """(unix seconds, src ip, dst ip, tos, destination QP, transport headers) of every IPv4 packet of
    a classic pcap file (Ethernet, or Linux cooked v1/v2 as `tcpdump -i any` writes); the QP from
    the RoCE v2 BTH after the UDP header (None when the packet is cut short), the headers the bytes
    from the BTH on (b"" for other packets)."""
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
            roce = ip[9] == 17 and len(bth) >= 8
            qpn = int.from_bytes(bth[5:8], "big") if roce else None
            out.append((sec + frac / (1e9 if nano else 1e6), src, dst, ip[1], qpn, bytes(bth[:32]) if roce else b""))
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
        expect(init_lines and all(tail in line and "adaptive routing" not in line for line in init_lines),
               f"{name}: {role}: the INIT line says '{tail}' (NCCL's relaxed-ordering rule; no dma-buf on rxe), "
               f"no port in adaptive-routing mode")
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


AR_THRESHOLD = 65536
SENDER = {"10.20.0.2", "10.21.0.2"}  # b's rail addresses: the --one-way stream's sender
# RC RDMA WRITE opcodes (BTH byte 0): FIRST, MIDDLE, LAST, LAST with immediate, ONLY, ONLY with immediate
W_FIRST, W_MIDDLE, W_LAST, W_LAST_IMM, W_ONLY, W_ONLY_IMM = 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B


def write_messages(packets):
    """(rail, length, with immediate, the next packet) of each RDMA write message b sent: the length
    from the RETH (after the 12-byte BTH) of its first packet, the kind from its last packet's
    opcode, followed per destination QP in capture order; the next packet is (opcode, RETH length)
    of the write packet with the next PSN on that QP, None when that one was not captured.
    tcpdump in the guests drops most packets of a stream (its log says how many): a message counts
    only when all its packets were captured, with consecutive PSNs (BTH bytes 9-11), so the tail of
    one whose middle went missing, or a retransmission from its middle, never completes another's
    first packet. Other packets to the same QP (acknowledgements of the peer's writes) are skipped."""
    open_msg, last_psn, out = {}, {}, []
    waiting = {}  # key -> (index in out, the PSN its next packet would have)
    for p in packets:
        if p[1] not in SENDER or len(p[5]) < 12:
            continue
        op, key, rail = p[5][0], (p[2], p[4]), int(p[1].split(".")[1]) - 20
        if not W_FIRST <= op <= W_ONLY_IMM:
            continue
        psn = int.from_bytes(p[5][9:12], "big")
        length = int.from_bytes(p[5][24:28], "big") if len(p[5]) >= 28 else None
        if key in waiting:
            i, want = waiting.pop(key)
            if psn == want:
                out[i] = out[i][:3] + ((op, length),)
        follows = last_psn.get(key) == (psn - 1) % (1 << 24)
        last_psn[key] = psn
        if op == W_FIRST:
            open_msg[key] = length
            continue
        opened = open_msg.pop(key, None)
        done = None
        if op == W_MIDDLE and follows and opened is not None:
            open_msg[key] = opened
        elif op in (W_LAST, W_LAST_IMM) and follows and opened is not None:
            done = (rail, opened, op == W_LAST_IMM, None)
        elif op in (W_ONLY, W_ONLY_IMM) and length is not None:
            done = (rail, length, op == W_ONLY_IMM, None)
        if done:
            out.append(done)
            waiting[key] = (len(out) - 1, (psn + 1) % (1 << 24))
    return out


def check_ar(run):
    for role in ("a", "b"):
        expect(run.rc(role, "ar") == 0, f"ar: {role}'s driver exit 0 (every byte and size verified, through the failover)")
        log = run.text(role, "ar.log")
        expect("HA_NCCL_IB_ADAPTIVE_ROUTING=1 HA_NCCL_IB_AR_THRESHOLD=65536" in log,
               f"ar: {role}: the settings line names adaptive routing on, threshold 65536")
        inits = [line for line in log.splitlines() if INIT_LINE.search(line)]
        expect(len(inits) == 1 and inits[0].endswith("; adaptive routing above 65536 B on rxe0:1 rxe1:1"),
               f"ar: {role}: the INIT line ends with the ports in adaptive-routing mode: {inits[-1][-90:] if inits else None}")
    faults = [line.split(" ", 2) for line in run.text("a", "ar.fault_ms").splitlines()]
    expect([f[2] for f in faults] == ["rail-down 0", "rail-up 0"], f"ar: rail 0 pulled and restored on a: {faults}")
    warns = "\n".join(run.report("b", "ar")["plugin_warning_lines"])
    expect("NET/HA: failover of send comm" in warns, "ar: b's send comm failed over (a WARN says so)")
    for role in ("a", "b"):
        msgs = write_messages(pcap_packets(run.out(role, "ar.pcap")))
        large = [m for m in msgs if m[1] > AR_THRESHOLD]
        at = [m for m in msgs if m[1] == AR_THRESHOLD]
        notices = [m for m in msgs if m[1] == 4 and m[2]]
        expect(large and not any(m[2] for m in large),
               f"ar: {role}'s capture: {len(large)} messages above the threshold, every one a plain write "
               f"({sum(1 for m in large if m[2])} with immediate data)")
        expect(at and all(m[2] for m in at),
               f"ar: {role}'s capture: {len(at)} messages of exactly the threshold, every one a write with immediate "
               f"data ({sum(1 for m in at if not m[2])} plain)")
        seen = [m[3] for m in large if m[3] is not None]
        expect(seen and all(n == (W_ONLY_IMM, 4) for n in seen),
               f"ar: {role}'s capture: the packet after each plain write (where captured: {len(seen)} of {len(large)}) "
               f"is its 4-byte size notice with immediate data (others: {[n for n in seen if n != (W_ONLY_IMM, 4)][:3]})")
        for r in (0, 1):
            n = sum(1 for m in large if m[0] == r)
            k = sum(1 for m in notices if m[0] == r)
            expect(n > 0 and k > 0, f"ar: {role}'s capture: rail {r} carries plain writes ({n}) and notices ({k})")
    for role in ("a", "b"):
        msgs = write_messages(pcap_packets(run.out(role, "default.pcap")))
        big = [m for m in msgs if m[1] > 8192]
        expect(big and all(m[2] for m in big) and not any(m[1] == 4 for m in msgs),
               f"default: {role}'s capture: {len(big)} messages above 8 KiB, every one a write with immediate "
               f"data, no size notice (adaptive routing is off on RoCE by default)")


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
    expect_each("plugin-qos", cases + [("ar", lambda: check_ar(run)), ("memory", lambda: check_memory(run))])
