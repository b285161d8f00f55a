#!/usr/bin/env python3
"""Writes the seed corpora in corpus/<target>/: small real examples of every input the fuzz
targets parse (valid frames, endpoints, connection requests and replies, handles, handshake byte
streams, environment settings, specs and command lines), plus a few near misses. The files are
checked in; rerun this script after a wire-format change (it rewrites only seed-*.bin/.txt).

Layouts: src/net/include/nccl_ha/net/wire.hpp (frames, endpoints), src/plugin/core/conn_msg.hpp
(request, reply, ready, candidates, rescue point: v5), src/plugin/setup/handle.hpp (handle, version 10),
src/plugin/setup/handshake_auth.hpp (hello), src/plugin/ha/rescue_wire.hpp (rescue requests),
tools/ha-ping/protocol.hpp (ha-ping's control messages, protocol 4), tools/ha-net-driver/mgmt_wire.hpp
(the driver's management stream), src/plugin/core/comm.hpp
(the records the peer RDMA-writes: FifoEntry, SyncMsg, HelloMsg, ReprotectMsg, and their record_check)."""
import hashlib
import hmac
import ipaddress
import os
import socket
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION = 0x4148434E, 1
TOKEN = 0x1122334455667788  # handshake_read.cpp kToken
CONN_REQUEST, CONN_REPLY, CONN_READY, CONN_ACK, STANDBY_UP, STANDBY_FAILED = range(0x200, 0x206)
ENDPOINT, ERROR = 1, 2


def frame(typ, payload=b"", token=TOKEN, flags=0, version=VERSION, length=None):
    n = len(payload) if length is None else length
    return struct.pack("<IHHIIQ", MAGIC, version, typ, n, flags, token) + payload


def endpoint(qpn=0x11, psn=0x123456, gid=bytes(10) + b"\xff\xff" + bytes([10, 20, 0, 1]), lid=0, port=1,
             gid_index=1, link_layer=2, mtu=3, ece=None, more=(), split=False):
    """wire.hpp Endpoint (72 bytes); ece: (vendor_id, options) offered, None: no ECE; more: the QP
    numbers after the first (up to 7); split: the side asks for data split across them."""
    flag, vendor, options = (0, 0, 0) if ece is None else (1, ece[0], ece[1])
    qps = len(more) | (0x80 if split else 0)
    return struct.pack("<II16sHBBBBBBIII7I", qpn, psn, gid, lid, port, gid_index, link_layer, mtu, flag, qps, vendor,
                       options, 0, *(list(more) + [0] * (7 - len(more))))


def keys(addr, k0, k1=0):
    return struct.pack("<QII", addr, k0, k1)


UP, PRIMARY, PREFERRED = 1, 2, 4


def prefix(text, length):
    """(known, len, 16 bytes) of a prefix: IPv4 as ::ffff:a.b.c.d with len 96 + its bits."""
    if text is None:
        return 0, 0, bytes(16)
    net = ipaddress.ip_network(f"{text}/{length}", strict=False)
    if net.version == 4:
        return 1, 96 + length, bytes(10) + b"\xff\xff" + net.network_address.packed
    return 1, length, net.network_address.packed


def cand(dev, flags=UP, rail=None, rail_bits=24, island_bits=None, link=2, load=0, nic=None, pcie=0, numa=-1):
    """One candidate port (conn_msg.hpp): the island is the rail masked to island_bits (None: the rail)."""
    rk, rl, ra = prefix(rail, rail_bits)
    ik, il, ia = prefix(rail, rail_bits if island_bits is None else min(island_bits, rail_bits))
    nic = 0x1000 + dev if nic is None else nic
    return struct.pack("<BBBBHBB16s16sIIi", dev, link, flags, rk | ik << 1, load, rl, il, ra, ia, nic, pcie, numa)


def rails(n, primary=0, island_bits=15, loads=()):
    """n ports on the rails 10.20.0.0/24, 10.21.0.0/24, ... with islands of island_bits."""
    return [cand(i, UP | (PRIMARY if i == primary else 0), f"10.{20 + i}.0.0", 24, island_bits,
                 load=loads[i] if i < len(loads) else 0, numa=i // 2) for i in range(n)]


def candidates(cands):
    return bytes([len(cands)]), b"".join(cands)


def rescue(port=0x5151, token=0x1122334455667788):
    """The rescue point that ends a request or reply: port, 2 zero bytes, token (none: all zero)."""
    return struct.pack("<HHQ", port, 0, token)


def request(standby=True, tc=96, sl=5, cands=None, member=0):
    cands = rails(4) if cands is None else cands
    n, body = candidates(cands)
    return (endpoint() + struct.pack("<I", 1 if standby else 0) + keys(0x7F0000001000, 0x1234)
            + keys(0x7F0000002000, 0x9ABC) + bytes([tc, sl]) + n + bytes([member]) + body + rescue())


def reply(pair=(1, 1), cands=None, link=2):
    cands = rails(4, loads=(0, 2, 1)) if cands is None else cands
    n, body = candidates(cands)
    offer = (bytes([pair[0], pair[1], 0, 0]) + struct.pack("<I", 0x2222) + endpoint(qpn=0x44, link_layer=link)) if pair else bytes(80)
    return (endpoint(qpn=0x33, link_layer=link) + struct.pack("<I", 1 if pair else 0) + keys(0x7F0000003000, 0x1111) + offer
            + n + b"\0\0\0" + body + (rescue() if pair else rescue(0, 0)))


def ready(standby=True):
    if not standby:
        return bytes(84)
    return struct.pack("<I", 1) + endpoint(qpn=0x55) + struct.pack("<II", 0xBBBB, 0xDDDD)


def handle(family=socket.AF_INET, addr="10.30.0.1", port=18700, token=0x0123456789ABCDEF, scope=0, flags=1,
           secret=bytes(range(1, 33)), members=1):
    raw = socket.inet_pton(family, addr).ljust(16, b"\0")
    h = struct.pack("<IHHIHH16sQQI32sB", 0x31484148, 10, 128, flags, family, port, raw, token, 0, scope, secret, members)
    return h.ljust(128, b"\0")


HELLO, HELLO_REPLY = 0x206, 0x207
HELLO_SECRET = bytes([0x5A]) * 32  # listener_hello.cpp kSecret
RESCUE_ID, RESCUE_KEY, RESCUE_MSG = 0x0123456789ABCDEF, bytes([0x3C]) * 32, 0x240  # rescue_request.cpp


def mac(key, label, *parts):
    """net/auth.hpp mac(): HMAC-SHA256 of the label and the parts, each prefixed by its u32 length."""
    msg = struct.pack("<I", len(label)) + label
    for p in parts:
        msg += struct.pack("<I", len(p)) + p
    return hmac.new(key, msg, hashlib.sha256).digest()


def hello(nonce=bytes(range(16)), secret=HELLO_SECRET, token=TOKEN):
    return frame(HELLO, nonce + mac(secret, b"nccl-ha/6 hello", struct.pack("<Q", token), nonce), token=token)


def rescue_request(msg=bytes(104), key=RESCUE_KEY, rid=RESCUE_ID):
    return frame(RESCUE_MSG, msg + mac(key, b"nccl-ha/6 rescue request", struct.pack("<Q", rid), msg), token=rid)


# ha-ping's control messages (tools/ha-ping/protocol.hpp). The Hello and HelloAck seeds carry real
# proofs with ha_ping_protocol.cpp's test token and nonce.
HP_TOKEN, HP_NONCE = b"fuzz-token", bytes(range(32))


def hp_str(b):
    return struct.pack("<H", len(b)) + b


def hp_names(names):
    return struct.pack("<H", len(names)) + b"".join(hp_str(n.encode()) for n in names)


def hp_proof(label, challenge, response, body, token=HP_TOKEN):
    key = b"ha-tools token v1:" + token
    return hmac.new(key, bytes([len(label)]) + label + challenge + response + body, hashlib.sha256).digest()


def hp_hello(rails=("rxe0:1", "rxe1:1"), sizes=(8, 4096, 65536, 1 << 20), iters=200, bw_iters=64, window=8,
             timeout_ms=30000, duration_ms=0, tc=0, sl=0, token=HP_TOKEN):
    body = hp_names(rails) + struct.pack("<H", len(sizes)) + b"".join(struct.pack("<Q", x) for x in sizes)
    body += struct.pack("<IIIII", iters, bw_iters, window, timeout_ms, duration_ms) + bytes([tc, sl]) + HP_NONCE
    return body + hp_proof(b"ha-ping hello", HP_NONCE, HP_NONCE, body, token)


def hp_ack(rails=("rxe0:1", "rxe1:1"), timeout_ms=30000):
    body = hp_names(rails) + struct.pack("<I", timeout_ms)
    return body + hp_proof(b"ha-ping hello-ack", HP_NONCE, HP_NONCE, body)


def hp_rail_setup(status=0, reason=b"", addr=0x7F0000001000, rkey=0x1234, length=2 << 20):
    return bytes([status]) + hp_str(reason) + endpoint() + struct.pack("<QIQ", addr, rkey, length)


# ha-net-driver's management stream (tools/ha-net-driver/mgmt_wire.hpp): u32 type, u32 length, big-endian.
(M_HELLO, M_HANDLES, M_BARRIER, M_RESULT, M_ABORT, M_EXTEND, M_CLOCK, M_DATA, M_CHURN, M_AUTH_CHALLENGE, M_AUTH_PROOF,
 M_AUTH_OK) = range(1, 13)


def mgmt(typ, payload):
    payload = payload.encode() if isinstance(payload, str) else payload
    return struct.pack(">II", typ, len(payload)) + payload


M64 = (1 << 64) - 1


def record_check(data):
    """comm.cpp record_check: the checksum of a record's bytes before its check."""
    h = 0x9E3779B97F4A7C15 ^ len(data)
    i = 0
    while i + 8 <= len(data):
        h = ((h ^ struct.unpack_from("<Q", data, i)[0]) * 0xFF51AFD7ED558CCD) & M64
        h ^= h >> 29
        i += 8
    for b in data[i:]:
        h = ((h ^ b) * 0xC4CEB9FE1A85EC53) & M64
        h ^= h >> 31
    h ^= h >> 33
    return h or 1


def sealed(body):
    return body + struct.pack("<Q", record_check(body))


def fifo_entry(seq, bufs, nreqs=None):
    """comm.hpp FifoEntry (248 bytes), sealed: bufs = [(addr, size, rkey0, rkey1, tag)], seq = irecv seq + 1."""
    bufs = list(bufs) + [(0, 0, 0, 0, 0)] * (8 - len(bufs))
    body = b"".join(struct.pack("<Q", b[0]) for b in bufs) + b"".join(struct.pack("<Q", b[1]) for b in bufs)
    body += b"".join(struct.pack("<I", b[2]) for b in bufs) + b"".join(struct.pack("<I", b[3]) for b in bufs)
    body += b"".join(struct.pack("<i", b[4]) for b in bufs)
    n = sum(1 for b in bufs if b[0]) if nreqs is None else nreqs
    return sealed(body + struct.pack("<IIQ", n, 0, seq))


def sync_msg(base, done, slot=1, planned=0, epoch=1):
    return sealed(struct.pack("<Q", base) + bytes(done).ljust(32, b"\0") + struct.pack("<IIII", slot, planned, 0, epoch))


SAME = 0xFFFFFFFF  # kSameDevice
PORT_DOWN, PORT_BACK, MOVE, RESCUE_SLOT = 5, 2, 3, 8


def reprotect_msg(ok=1, gen=1, dev=SAME, ctrl=0x1111, fifo=0x2222, own=SAME, ep=None, seal=True):
    """rdma_records.hpp ReprotectMsg (104 bytes)."""
    body = (endpoint() if ep is None else ep) + struct.pack("<IIIIII", ok, gen, dev, ctrl, fifo, own)
    return sealed(body) if seal else body + struct.pack("<Q", 0)


def rp_comm(devices, slots=(0, 1), active=0, phase=0, home=0, cands=()):
    """reprotect_msg.cpp's comm: devices [(ib, down, rail 0-4, island 0-4)], the slots' devices,
    active slot, failover phase, home device, the peer's ports [(dev, ib, rail, island)]."""
    n = len(devices)
    out = bytes([n - 1])
    for ib, down, rail, island in devices:
        out += bytes([ib | down << 1 | (rail + 5 * island) << 2])
    out += bytes([next(b for b in range(256) if b % n == slots[0] and (b >> 4) % n == slots[1])])
    out += bytes([next(b for b in range(256) if b & 1 == active and (b >> 1) % 4 == phase and (b >> 3) % n == home)])
    out += bytes([len(cands)])
    for dev, ib, rail, island in cands:
        out += bytes([ib | (rail + 5 * island) << 1, dev])
    return out


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    # wire_frame: every handshake message as it travels, and near misses.
    seeds = {
        "request": frame(CONN_REQUEST, request()), "reply": frame(CONN_REPLY, reply()),
        "ready": frame(CONN_READY, ready()), "ack": frame(CONN_ACK), "standby-up": frame(STANDBY_UP),
        "standby-failed": frame(STANDBY_FAILED, b"local: ibv_modify_qp(RTR): Connection timed out"),
        "error": frame(ERROR, b"the listener was closed during the handshake"),
        "endpoint": frame(ENDPOINT, endpoint()),
        "oversize": frame(CONN_REQUEST, b"", length=1 << 20),
        "truncated": frame(CONN_REQUEST, request())[:60],
        "flags": frame(CONN_READY, ready(), flags=1), "version": frame(CONN_READY, ready(), version=2),
    }
    for k, v in seeds.items():
        write("wire_frame", f"seed-{k}.bin", v)
    # wire_endpoint
    write("wire_endpoint", "seed-roce.bin", endpoint())
    write("wire_endpoint", "seed-ib.bin", endpoint(lid=7, gid=bytes(16), link_layer=1, mtu=5, gid_index=0))
    write("wire_endpoint", "seed-max.bin", endpoint(qpn=0xFFFFFF, psn=0xFFFFFF, port=255, mtu=1))
    write("wire_endpoint", "seed-ece.bin", endpoint(ece=(0x15B3, 0x1C)))
    write("wire_endpoint", "seed-qps.bin", endpoint(more=(0x12, 0x13, 0x14), split=True))
    write("wire_endpoint", "seed-qps-max.bin", endpoint(more=tuple(range(0x20, 0x27))))
    # byte_reader: a few programs (u32, u64, str) over frame bytes
    write("byte_reader", "seed-header.bin", bytes([5, 2, 1, 2, 2, 3]) + frame(CONN_READY))
    write("byte_reader", "seed-str.bin", bytes([3, 6 + 7 * 5, 0, 5]) + struct.pack("<H", 5) + b"hello" + b"\x01\x02")
    # handshake_read: byte 0 = reader (0 read_frame, 1 read_frame_of 0x200.., 2 exchange_endpoints)
    # (two candidates a side: read_frame_of reads at most 256 payload bytes there)
    small_req, small_rep = request(cands=rails(2)), reply(cands=rails(2))
    write("handshake_read", "seed-listener.bin", b"\x00" + frame(CONN_REQUEST, small_req) + frame(CONN_READY, ready())
          + frame(STANDBY_UP))
    write("handshake_read", "seed-typed.bin", b"\x01" + frame(CONN_REQUEST, small_req) + frame(CONN_REPLY, small_rep)
          + frame(CONN_READY, ready()) + frame(CONN_ACK))
    write("handshake_read", "seed-error.bin", b"\x01" + frame(ERROR, b"peer reported: no"))
    write("handshake_read", "seed-endpoints.bin", b"\x02" + frame(ENDPOINT, endpoint()) * 2)
    write("handshake_read", "seed-half.bin", b"\x00" + frame(CONN_REQUEST, request())[:40])
    # conn_msg
    # conn_msg: the three messages; rail-optimised, island, IPv6 and IB layouts; near misses
    write("conn_msg", "seed-request.bin", request())
    write("conn_msg", "seed-request-single.bin", request(standby=False, tc=0, sl=0, cands=rails(1)))
    write("conn_msg", "seed-request-sl16.bin", request(sl=16))
    write("conn_msg", "seed-request-member.bin", request(member=3))
    write("conn_msg", "seed-request-max.bin", request(cands=[cand(i, UP | (PRIMARY if i == 3 else 0) | (PREFERRED if i == 5 else 0),
                                                                 f"10.{20 + i % 8}.0.0", 24, i % 25, load=i * 100)
                                                            for i in range(32)]))
    write("conn_msg", "seed-request-mixed.bin", request(cands=[
        cand(0, UP | PRIMARY, "10.20.0.0", 24, nic=7, pcie=9, numa=0),
        cand(1, UP | PREFERRED, "10.20.0.0", 24, nic=7, pcie=9, numa=0),  # the same NIC's second port
        cand(2, UP, "fd00:1::", 64, 48, load=65535, numa=1),
        cand(3, 0),  # down, nothing known
        cand(4, UP, "fe80::", 64, link=1)]))
    write("conn_msg", "seed-request-two-primaries.bin", request(cands=rails(2, primary=0) + [cand(2, UP | PRIMARY)]))
    write("conn_msg", "seed-reply.bin", reply())
    write("conn_msg", "seed-reply-single.bin", reply(pair=None))
    write("conn_msg", "seed-reply-cross-rail.bin", reply(pair=(1, 0)))
    write("conn_msg", "seed-reply-ib.bin", reply(pair=(1, 1), cands=[
        cand(0, UP | PRIMARY, "fe80::", 64, link=1), cand(1, UP, "fe80:0:0:1::", 64, 48, link=1)], link=1))
    write("conn_msg", "seed-reply-down.bin", reply(pair=(1, 3), cands=rails(3) + [cand(3, 0, "10.23.0.0", 24, 15)]))
    write("conn_msg", "seed-ready.bin", ready())
    write("conn_msg", "seed-ready-none.bin", ready(standby=False))
    # handle
    write("handle", "seed-v4.bin", handle())
    write("handle", "seed-v6.bin", handle(socket.AF_INET6, "fd00:aa::1"))
    write("handle", "seed-v6-link-local.bin", handle(socket.AF_INET6, "fe80::5054:ff:fe12:3456", scope=3))
    write("handle", "seed-unspecified.bin", handle(addr="0.0.0.0"))
    write("handle", "seed-staged.bin", handle()[:40] + struct.pack("<Q", 0xFEEDFACE) + handle()[48:])
    write("handle", "seed-fused.bin", handle(members=2))
    # listener_hello: what a stranger (or a connector) sends a listener first
    write("listener_hello", "seed-hello.bin", hello())
    write("listener_hello", "seed-hello-then-frames.bin", hello() + frame(CONN_REQUEST, bytes(40)) + frame(ERROR, b"x" * 20))
    write("listener_hello", "seed-hello-other-secret.bin", hello(secret=bytes(32)))
    write("listener_hello", "seed-request-first.bin", frame(CONN_REQUEST, request()))
    write("listener_hello", "seed-ff.bin", b"\xff" * 24)
    write("listener_hello", "seed-http.bin", b"GET / HTTP/1.1\r\n\r\n")
    # rescue_request: byte 0 even: a stream to the service; odd: an answer's payload
    write("rescue_request", "seed-sealed.bin", b"\x00" + rescue_request())
    write("rescue_request", "seed-other-key.bin", b"\x00" + rescue_request(key=bytes(32)))
    write("rescue_request", "seed-other-id.bin", b"\x00" + rescue_request(rid=7))
    write("rescue_request", "seed-answer.bin", b"\x01" + bytes(104) + bytes(32))
    # control_record: byte 0 = record (0 FIFO entry, 1 SyncMsg, 2 HelloMsg, 3 ReprotectMsg), then the
    # record as the peer writes it (sealed here), then the checks' parameters
    two = [(0x7F0000100000, 1 << 20, 0x101, 0x201, 7), (0x7F0000200000, 4096, 0x102, 0x202, 9)]
    write("control_record", "seed-fifo-whole.bin", b"\x00" + fifo_entry(43, two) + struct.pack("<Q", 42) + bytes(range(1, 40)))
    write("control_record", "seed-fifo-dup-tags.bin", b"\x00" + fifo_entry(1, [(0x1000 * (i + 1), 64, i, i, [5, 5, 7, 5][i])
                                                                              for i in range(4)]) + struct.pack("<Q", 0) + bytes(40))
    write("control_record", "seed-fifo-full.bin", b"\x00" + fifo_entry(1 << 40, [(0x1000 * (i + 1), 8, i, i, i) for i in range(8)])
          + struct.pack("<Q", (1 << 40) - 1) + b"\x07" * 40)
    write("control_record", "seed-fifo-corrupt.bin", b"\x00" + fifo_entry(6, two, nreqs=9) + struct.pack("<Q", 5) + bytes(40))
    write("control_record", "seed-fifo-landing.bin", b"\x00" + fifo_entry(6, two)[:200] + fifo_entry(6, two[:1])[200:]
          + struct.pack("<Q", 5) + bytes(40))
    write("control_record", "seed-fifo-other-seq.bin", b"\x00" + fifo_entry(6, two) + struct.pack("<Q", 6) + bytes(40))
    write("control_record", "seed-fifo-empty.bin", b"\x00" + bytes(248) + bytes(48))
    write("control_record", "seed-sync-report.bin", b"\x01" + sync_msg(100, [0xFF, 0x01, 0x03] + [0] * 29, epoch=3)
          + bytes([1, 0, 4, 4, 2, 9]) + bytes(30) + struct.pack("<Q", 200) + bytes([3]) + bytes([1, 0xFF, 3, 0x05] * 16))
    write("control_record", "seed-sync-failback.bin", b"\x01" + sync_msg(7, [0xFF] * 3, slot=0, planned=1, epoch=9) + bytes(64))
    write("control_record", "seed-sync-torn.bin", b"\x01" + sync_msg(7, [1])[:40] + sync_msg(9, [3])[40:] + bytes(64))
    write("control_record", "seed-hello.bin", b"\x02" + sealed(struct.pack("<Q", 12)) + bytes(16))
    write("control_record", "seed-reprotect-request.bin", b"\x03" + reprotect_msg(dev=1, own=1) + bytes(16))
    write("control_record", "seed-reprotect-answer.bin", b"\x03" + reprotect_msg(ok=PORT_DOWN, gen=4, ep=bytes(72)) + bytes(16))
    # reprotect_request: a receive comm (rp_comm), then requests: a byte of hints (0: as written) +
    # the ReprotectMsg. 3 RoCE ports on rails 1-3 (island: the rail), the peer's ports 0 and 1.
    eth3 = [(0, 0, 1, 0), (0, 0, 2, 0), (0, 0, 3, 0)]
    peer = [(0, 0, 1, 0), (1, 0, 2, 0)]
    hello_comes = b"\x80"
    # taken; its reminder answered again, then its hello; a reminder after that (nothing due); the next
    # attempt on device 2, refused (the peer's port 1 does not reach it), then on device 2 from a port not named
    write("reprotect_request", "seed-taken.bin", rp_comm(eth3, cands=peer) + b"\x00" + reprotect_msg(own=1)
          + hello_comes + reprotect_msg(own=1) + b"\x00" + reprotect_msg(own=1) + b"\x00" + reprotect_msg(gen=2, dev=2, own=1)
          + b"\x00" + reprotect_msg(gen=3, dev=2))
    write("reprotect_request", "seed-port-down.bin", rp_comm([(0, 0, 1, 0), (0, 1, 2, 0)], cands=peer)
          + b"\x00" + reprotect_msg(gen=3, own=1) + b"\x00" + reprotect_msg(gen=3, own=1))
    write("reprotect_request", "seed-job-fails.bin", rp_comm(eth3, cands=peer) + b"\x40" + reprotect_msg(gen=5)
          + b"\x00" + reprotect_msg(gen=5))
    write("reprotect_request", "seed-rescue.bin", rp_comm(eth3, cands=peer)
          + b"\x00" + reprotect_msg(ok=RESCUE_SLOT + 0, gen=7) + b"\x00" + reprotect_msg(ok=RESCUE_SLOT + 1, gen=8))
    write("reprotect_request", "seed-rescue-in-failover.bin", rp_comm(eth3, phase=2, cands=peer)
          + b"\x00" + reprotect_msg(ok=RESCUE_SLOT + 0, gen=7))
    write("reprotect_request", "seed-move.bin", rp_comm(eth3, slots=(0, 2), cands=peer) + b"\x00" + reprotect_msg(ok=MOVE, dev=1, own=1))
    write("reprotect_request", "seed-other-link.bin", rp_comm([(0, 0, 1, 0), (0, 0, 2, 0), (1, 0, 0, 0)], cands=peer)
          + b"\x00" + reprotect_msg(dev=2))
    write("reprotect_request", "seed-islands.bin", rp_comm([(0, 0, 1, 2), (0, 0, 2, 2), (0, 0, 3, 4)],
                                                           cands=[(0, 0, 1, 2), (1, 0, 3, 4)])
          + b"\x00" + reprotect_msg(dev=1, own=1) + b"\x00" + reprotect_msg(gen=2, dev=2, own=1))
    write("reprotect_request", "seed-refusals.bin", rp_comm(eth3, cands=peer)
          + b"\x00" + reprotect_msg(gen=1, dev=40) + b"\x00" + reprotect_msg(gen=2, ctrl=0)
          + b"\x00" + reprotect_msg(gen=3, ep=bytes(72)) + b"\x00" + reprotect_msg(gen=4, seal=False))
    write("reprotect_request", "seed-hinted.bin", rp_comm(eth3, cands=peer) + b"\x1f" + b"\x11" * 64 + b"\x23" + b"\x22" * 64)
    # config: the settings of the VM tests and of docs/settings.md
    write("config", "seed-defaults.txt", "")
    write("config", "seed-vm.txt", "NCCL_SOCKET_IFNAME=eth2\nHA_NCCL_HANDSHAKE_TIMEOUT_MS=5000\nNCCL_DEBUG=WARN\n"
          "HA_NCCL_RTO_MS=1000\nHA_NCCL_HEARTBEAT_MS=200\nHA_NCCL_FAILOVER_TIMEOUT_MS=1000\n")
    write("config", "seed-islands.txt", "HA_NCCL_ISLAND_PREFIX_LEN=15\nHA_NCCL_STANDBY_MAP=rxe0:rxe1\n")
    # the standby settings' old names: read with a WARN, ignored beside the new ones
    write("config", "seed-old-names.txt", "HA_NCCL_ENABLE_BACKUP=0\nHA_NCCL_BACKUP_MAP=rxe0:rxe1\nHA_NCCL_STANDBY_MAP=rxe1:rxe0\n")
    write("config", "seed-tuned.txt", "HA_NCCL_ENABLE_STANDBY=on\nHA_NCCL_ENABLE_FAILBACK=yes\nHA_NCCL_FAILBACK_HOLD_MS=100\n"
          "HA_NCCL_QP_TIMEOUT=20\nHA_NCCL_QP_RETRY_CNT=7\nHA_NCCL_MAX_RETRIES=0\nHA_NCCL_IB_HCA=^=mlx5_3:1\n"
          "HA_NCCL_STANDBY_MAP=rxe0:rxe1,rxe1:rxe0\nHA_NCCL_STATS_FILE=/tmp/s-%h-%p.jsonl\nNCCL_IB_TC=106\nNCCL_IB_SL=3\n"
          "HA_NCCL_SOCKET_FAMILY=AF_INET6\nHA_NCCL_TEST_ACK_DELAY_MS=1500\nHA_NCCL_FORCE_FLUSH=1\n"
          "NCCL_IB_ADAPTIVE_ROUTING=1\nNCCL_IB_AR_THRESHOLD=65536\nNCCL_IB_ECE_ENABLE=0\n")
    write("config", "seed-bad.txt", "HA_NCCL_RTO_MS=12abc\nHA_NCCL_IB_SL=16\nHA_NCCL_DEBUG= 1\nHA_NCCL_FORCE_FLUSH=maybe\n"
          "NCCL_SOCKET_FAMILY=AF_UNIX\nHA_NCCL_QP_TIMEOUT=0\nHA_NCCL_TEST_MAX_POLL=99999999999999999999\n"
          "HA_NCCL_ISLAND_PREFIX_LEN=129\nNCCL_IB_ADAPTIVE_ROUTING=on\nHA_NCCL_IB_AR_THRESHOLD=-1\nHA_NCCL_IB_ECE_ENABLE=off\n")
    # qos: HA_NCCL_IB_TC, NCCL_IB_TC, HA_NCCL_IB_SL, NCCL_IB_SL, the communicator's trafficClass
    write("qos", "seed-nccl.txt", "!\n106\n!\n3\n-1\n")
    write("qos", "seed-comm.txt", "!\n!\n!\n!\n96\n")
    write("qos", "seed-ha-wins.txt", "96\n106\n5\n3\n40\n")
    write("qos", "seed-bad.txt", "256\n-1\n16\nx\n300\n")
    # env_int: min, max, value, second value
    write("env_int", "seed-range.txt", "1\n64\n16\n")
    write("env_int", "seed-second.txt", "0\n7\n\n6\n")
    write("env_int", "seed-edges.txt", "-9223372036854775808\n9223372036854775807\n+007\n-0\n")
    # device_filter: NCCL_IB_HCA and devices to match
    for i, spec in enumerate(["mlx5", "mlx5_0:1,mlx5_1", "=mlx5_0", "^mlx5_3", "^=rxe0:1", "rxe0:256", "a,,b"]):
        write("device_filter", f"seed-{i}.txt", spec + "\nmlx5_0 1\nmlx5_10 2\nrxe0 1\n")
    # socket_if: spec, family, records
    hosts = "lo ul 127.0.0.1\neth0 u 192.168.1.5\neth2 u 10.30.0.1\neth2 u fe80::5054:ff:fe12:3456\n" \
            "rxe-net ur 10.20.0.1\ndocker0 u 172.17.0.1\nvirbr0 u 192.168.122.1\nib0 ur fd00:aa::1\n"
    for i, (spec, fam) in enumerate([("", ""), ("eth2", ""), ("=eth2", "AF_INET6"), ("^docker,lo", ""), ("=lo", "AF_INET"),
                                     ("nosuchif", ""), ("^", ""), ("eth:80,ib", "AF_INET6")]):
        write("socket_if", f"seed-{i}.txt", f"{spec}\n{fam}\n{hosts}")
    # standby_map: map and ports (device port link nic numa switch subnet)
    ports = "rxe0 1 e nicA 0 - 10.20.0.0/24\nrxe1 1 e nicB 0 - 10.21.0.0/24\nmlx5_0 1 i 0000:03:00 1 sw1 fe80:0000:0000:0000\n" \
            "mlx5_0 2 i 0000:03:00 1 sw1 fe80:0000:0000:0000\nmlx5_1 1 i 0000:04:00 1 sw1 -\n"
    for i, m in enumerate(["", "rxe0:rxe1,rxe1:rxe0", " mlx5_0/2 : mlx5_1 , mlx5_1:mlx5_0/1", "rxe0:rxe0", "rxe0:mlx5_0",
                           "rxe0:rxe1,rxe0:rxe1", "a:b:c,,x:/1,mlx5_0/0:mlx5_1"]):
        write("standby_map", f"seed-{i}.txt", m + "\n" + ports)
    # host_port
    for i, s in enumerate(["10.30.0.1:18700", "hostA", "fe80::1:2", "node7:0080", "127.0.0.1:65536", ":80"]):
        write("host_port", f"seed-{i}.txt", s)
    # file_pattern
    for i, s in enumerate(["/var/log/nccl-ha/%h-%p.jsonl", "/tmp/ha.prom", "%%h %x 100%", "%"]):
        write("file_pattern", f"seed-{i}.txt", s)
    # ha_ping_options: one argument per line
    for i, s in enumerate(["hostB", "--rails\nrxe0:1,1\n--sizes\n8,64K,1M\n--min-bw\n10000\n--json\nhostB",
                           "-d\nmlx5_0\n-i\n1\n-x\n3\n-s\n1M\n-t\n32\n-D\n5\n--report_gbits\n--min-bw\n80%\nhostB",
                           "--serve\n--json-file\n/var/log/ha-ping.jsonl", "--list\n--plugin\n/opt/lib/libnccl-net-ha.so",
                           "ENV NCCL_IB_TC=106\nENV HA_NCCL_IB_SL=3\n--timeout=5\nhostB", "-T\n96\n-S\n16\nhostB",
                           "--min-bw\ninf\nhostB", "--token\n-1\n--count\n3"]):
        write("ha_ping_options", f"seed-{i}.txt", s)
    # ha_ping_protocol: every control message, proved where it has a proof, and near misses
    for name, data in {
        "challenge": struct.pack("<H", 4) + HP_NONCE, "challenge-v1": struct.pack("<H", 1) + HP_NONCE,
        "hello": hp_hello(), "hello-bounds": hp_hello(rails=(), sizes=(1 << 30,), iters=1000000, window=128,
                                                      timeout_ms=0xFFFFFFFF, duration_ms=3600000, tc=255, sl=15),
        "hello-wrong-token": hp_hello(token=b"other"), "hello-sl16": hp_hello(sl=16),
        "ack": hp_ack(), "ack-capped": hp_ack(rails=(), timeout_ms=5000),
        "rail-setup": hp_rail_setup(), "rail-setup-down": hp_rail_setup(1, b"port rxe1:1 is not ACTIVE (DOWN)", 0, 0, 0),
        "phase-done": bytes([1, 0]) + hp_str(b""), "phase-done-down": bytes([0, 1]) + hp_str(b"port error on rxe0:1"),
    }.items():
        write("ha_ping_protocol", f"seed-{name}.bin", data)
    # driver_mgmt: what each rank reads from the other, and near misses
    params = "sizes=0,1,8,4096 messages=1000 inflight=8 group=1 pingpong=0 iters=100 bw=0 bw_messages=64 comms=0"
    drv_hello = f"rank=1\napi=10\nname=nccl-ha\ncommid=1234567890123\nparams={params}\n"
    write("driver_mgmt", "seed-rank0-reads.bin", mgmt(M_AUTH_PROOF, HP_NONCE * 2) + mgmt(M_HELLO, drv_hello)
          + b"".join(mgmt(M_CLOCK, str(1795808783489123 + i)) for i in range(8)) + mgmt(M_HANDLES, bytes(128))
          + mgmt(M_BARRIER, "connect") + mgmt(M_EXTEND, "1000") + mgmt(M_EXTEND, "2000 final")
          + mgmt(M_RESULT, "ok=1\nresult=ok\nerror=\n"))
    write("driver_mgmt", "seed-rank1-reads.bin", mgmt(M_AUTH_CHALLENGE, b"HNDAUTH1" + HP_NONCE) + mgmt(M_AUTH_OK, HP_NONCE)
          + mgmt(M_HELLO, drv_hello.replace("rank=1", "rank=0")) + mgmt(M_CLOCK, "probe") + mgmt(M_CLOCK, "result -1.250 0.375")
          + mgmt(M_CHURN, b"h 3 0\n" + bytes(128)) + mgmt(M_CHURN, "x 4 1\nconnect (churn) returned ncclSystemError")
          + mgmt(M_DATA, "8") + mgmt(M_ABORT, "init: ncclSystemError"))
    write("driver_mgmt", "seed-oversize.bin", mgmt(M_BARRIER, "a") + struct.pack(">II", M_HELLO, (1 << 20) + 1))
    write("driver_mgmt", "seed-half.bin", mgmt(M_HELLO, drv_hello)[:30])
    write("driver_mgmt", "seed-http.bin", b"GET / HTTP/1.0\r\n\r\n")


if __name__ == "__main__":
    main()
