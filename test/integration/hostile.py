#!/usr/bin/env python3
"""The hostile client of the security-hostile VM test (issue #31, item 8).

One instance runs in each guest, beside that guest's ha-net-driver (which loads the plugin). It
attacks the plugin's TCP listeners in BOTH guests while the driver's stream and comm churn run:
its own host's (source = the same host) and, told over a relay connection by the peer's instance,
the peer's (source = the peer VM). It needs nothing from the plugin:

  * listeners: the driver process's listening TCP sockets, found as `ss -ltnp` finds them
    (/proc/net/tcp's LISTEN sockets, their inodes matched against /proc/PID/fd), every 10 ms. The
    rescue service is the plugin's listener from before the stream that is still open once it runs
    (init starts it; the guest script's `ss -ltnp` then is the cross-check); the others are
    handshake listeners: the ring's (before the stream) and the churn pairs' (each lives from
    listen() until accept() returned its comm), numbered k = 0, 1, ... per host as they appear.
  * capture: an AF_PACKET socket on the management NIC (where the handshakes run) records, for each
    TCP connection to a plugin listener, the connector's first bytes (what it sent before the
    listener sent anything) and the listener's first answer. Replays resend those bytes verbatim,
    whatever the wire format. Only the rescue forgery and the forged conn_request read or write
    today's v5 frames (src/plugin/core/conn_msg.hpp, handle.hpp, src/net/include/nccl_ha/net/wire.hpp);
    when nothing parses (a new format) they use random tokens and simply must get nowhere.

What happens, per target host X (both instances act on each, one from X, one from the peer):
  * X's churn listener that waits for its connector while the peer rank is idle (--idle in the
    guest script: ~2.8 s, one after the other in one pair, as a listener waits for a busy NCCL
    rank; the peer's instance reads its driver's "idle:" log lines and tells X's, with the time
    left) is attacked at once; in this order each source opens
      - hijack: two connections; 24 bytes of garbage on the first; the token of what comes back
        (today's error frame: header bytes 16-23), if anything does; on the second a well-formed v5
        conn_request with it (our own QP number, FORGED_QPN_BASE + ...) and then conn_ready. A
        stranger's comm that accept() took shows as "accepted on ... <- QP <ours>" in X's INFO log;
      - garbage (an HTTP request), 0xff (24 bytes of 0xff), resets (SO_LINGER 0, with and without
        a few bytes first), replay of a real connector's first bytes captured from another listener;
      - slowloris: a real connector's first bytes, one byte a second, until the server closes the
        socket (or --slowloris-s);
      - --silent silent sockets (128 per source: 256 per listener), held;
    and the same garbage / 0xff / resets / replay / slowloris / silent on X's rescue port. When the
    listener's own connector comes (after the idle window), its first bytes are resent verbatim to
    the same listener and to the rescue port (replay-same).
  * --forge-ms into the stream: a forged rescue request (frame type 0x240, a sealed ReprotectMsg
    asking to rebuild the active slot) on X's ring receive comm, which is healthy, with its rescue
    token sniffed from the ring handshake's conn_reply, to X's rescue port.
  * --flood-ms into the stream: --flood silent sockets per source (1500: 3000 per rescue port) on X's
    rescue port, as many as the guest can start within --flood-issue-s (a connect costs ms in the
    emulated guests); churn pairs connect meanwhile. The driver runs under `ulimit -n 1024`.
Every socket we opened stays open until the end (--stop-file) unless the server closes it; X's
instance samples X's driver's fd count every 250 ms and, once its flood's connects are started,
waits (at most --settle-s) until that count is back to its baseline (+ --fd-slack); then both
instances close their sockets to X (the attack is over, before X's driver finalizes) and X's
driver's stream ends (--driver-stop-file): it lasts at least its --min-seconds and until then.

Every byte that came back to any of our sockets is counted (bytes_back): an unauthenticated
socket must not get one. Output: --out (JSON, read by checks/security_hostile.py); log on stderr.
"""
import argparse
import asyncio
import errno
import json
import os
import random
import re
import socket
import struct
import sys
import time

# ---------------------------------------------------------------- today's wire format (v5)
WIRE_MAGIC = 0x4148434E  # "NCHA" little-endian (wire.hpp)
WIRE_VERSION = 1
HEADER = 24
T_ERROR, T_REQUEST, T_REPLY, T_READY, T_ACK = 2, 0x200, 0x201, 0x202, 0x203
T_RESCUE = 0x240  # rescue.cpp kRescueMsg
K_RESCUE_SLOT = 8  # comm.hpp kRescueSlot
K_SAME_DEVICE = 0xFFFFFFFF
FORGED_QPN_BASE = 0xBAD000  # forged endpoints' QP numbers: base + 16 * k + 2 * target + source (< 2^24)
M64 = (1 << 64) - 1

# Our sockets' source ports, below Linux's ephemeral range (32768-60999), which the plugin's and
# the driver's own connections use: so the capture tells a real connector from us.
OWN_PORT_LO, OWN_PORT_HI = 20000, 30000

PROBES = ("garbage", "ff", "reset", "replay", "slowloris", "silent")


def now_ms():
    return int(time.time() * 1000)


def log(msg):
    t = time.time()
    sys.stderr.write(f"[hostile {time.strftime('%H:%M:%S', time.localtime(t))}.{int(t * 1000) % 1000:03d}] {msg}\n")
    sys.stderr.flush()


def frame(msg_type, token, payload=b""):
    return struct.pack("<IHHIIQ", WIRE_MAGIC, WIRE_VERSION, msg_type, len(payload), 0, token & M64) + payload


def parse_frames(data):
    """Today's frames at the start of `data` as [(type, token, payload)]."""
    out = []
    pos = 0
    while len(data) - pos >= HEADER:
        magic, ver, typ, length, _flags, token = struct.unpack_from("<IHHIIQ", data, pos)
        if magic != WIRE_MAGIC or ver != WIRE_VERSION or length > 4096 or len(data) - pos - HEADER < length:
            break
        out.append((typ, token, bytes(data[pos + HEADER:pos + HEADER + length])))
        pos += HEADER + length
    return out


def record_check(data):
    """comm.cpp record_check: the checksum that seals a control record."""
    n = len(data)
    h = (0x9E3779B97F4A7C15 ^ n) & M64
    i = 0
    while i + 8 <= n:
        (w,) = struct.unpack_from("<Q", data, i)
        h = ((h ^ w) * 0xFF51AFD7ED558CCD) & M64
        h ^= h >> 29
        i += 8
    while i < n:
        h = ((h ^ data[i]) * 0xC4CEB9FE1A85EC53) & M64
        h ^= h >> 31
        i += 1
    h ^= h >> 33
    return h or 1


def endpoint(qpn, ipv4):
    """net::encode_endpoint: qpn, psn, GID ::ffff:ipv4, lid 0, port 1, GID index 1, Ethernet, MTU 4096."""
    gid = b"\0" * 10 + b"\xff\xff" + socket.inet_aton(ipv4)
    return struct.pack("<II", qpn, random.randrange(1 << 24)) + gid + struct.pack("<HBBBBH", 0, 1, 1, 2, 5, 0)


def conn_request(qpn, ipv4):
    """A well-formed v5 conn_request payload (conn_msg.hpp): no standby offered, one candidate (our
    primary, up), no rescue point."""
    def keys():
        return struct.pack("<QII", random.randrange(1, 1 << 35) << 12, random.randrange(1, 1 << 32), 0)
    head = endpoint(qpn, ipv4) + struct.pack("<I", 0) + keys() + keys() + struct.pack("<BBBB", 0, 0, 1, 0)
    cand = struct.pack("<BBBBHBB", 0, 2, 1 | 2, 0, 0, 0, 0) + b"\0" * 32 + struct.pack("<IIi", 0, 0, -1)
    return head + cand + struct.pack("<HHQ", 0, 0, 0)


def conn_ready():
    return b"\0" * 44  # flags 0, no standby (conn_msg.hpp kReadySize)


def reprotect_request(qpn, ipv4, gen, slot):
    """A sealed ReprotectMsg (comm.hpp) as a rescue's request: 'I rebuild my slot `slot`'."""
    body = endpoint(qpn, ipv4) + struct.pack("<IIIIII", K_RESCUE_SLOT + slot, gen, K_SAME_DEVICE, 0x1111, 0x2222,
                                              K_SAME_DEVICE)
    return body + struct.pack("<Q", record_check(body))


# ---------------------------------------------------------------- listeners (what ss -ltnp shows)
def proc_listeners():
    """LISTEN TCP sockets of the host from /proc/net/tcp (what ss reads when sock_diag is missing,
    as in the bed's guests): [(address, port, inode, accept queue length)]. The kernel lists the
    listening sockets first: the read stops at the first other one (cheap with thousands of
    connections)."""
    out = []
    with open("/proc/net/tcp", "rb") as f:
        f.readline()
        for line in f:
            fields = line.split()
            if fields[3] != b"0A":
                break
            addr, port = fields[1].split(b":")
            ip = socket.inet_ntoa(struct.pack("<I", int(addr, 16)))
            out.append((ip, int(port, 16), int(fields[9]), int(fields[4].split(b":")[1], 16)))
    return out


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    except OSError:
        pass
    return inodes


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def fd_kinds(pid):
    """The driver's fds by what they are (TCP sockets by state and ends, anon_inode:[eventfd], ...)."""
    kinds = {}
    sockets = tcp_sockets()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            kind = "socket" if link.startswith("socket:") else link.split(":")[0] if link.startswith(("pipe:", "anon_inode:")) \
                else link if link.startswith("/dev/") else "file"
            if link.startswith("anon_inode:"):
                kind = link
            if kind == "socket":
                kind = sockets.get(int(link[8:-1]), "socket (not TCP/IPv4)")
            kinds[kind] = kinds.get(kind, 0) + 1
    except OSError:
        pass
    return kinds


TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
              "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def tcp_sockets():
    """inode -> 'tcp STATE local-port -> remote-ip' of the host's IPv4 TCP sockets (the whole table)."""
    out = {}
    with open("/proc/net/tcp") as f:
        f.readline()
        for line in f:
            x = line.split()
            lport = int(x[1].split(":")[1], 16)
            rip = socket.inet_ntoa(struct.pack("<I", int(x[2].split(":")[0], 16)))
            rport = int(x[2].split(":")[1], 16)
            out[int(x[9])] = f"tcp {TCP_STATES.get(x[3], x[3])} :{lport if lport < 32768 else 'eph'} -> {rip}" \
                             f":{rport if rport < 20000 or rport >= 32768 else 'ours'}"
    return out


# ---------------------------------------------------------------- capture (AF_PACKET on the mgmt NIC)
class Conn:
    def __init__(self, client, server):
        self.client, self.server = client, server
        self.isn = {}
        self.data = {client: bytearray(), server: bytearray()}
        self.pending = {client: {}, server: {}}
        self.client_first = None  # the client's bytes when the server's first byte was seen
        self.server_first = None  # the server's bytes until the client sent again
        self.fired = False
        self.parsed = False
        self.cap = None


# `tcpdump -dd -y EN10MB 'ip and tcp and not portrange 20000-29999'` (OWN_PORT_LO..HI): the kernel
# drops our own connections' packets (thousands in a flood) before they cost the guest's Python.
CAPTURE_BPF = [(0x28, 0, 0, 0x0000000c), (0x15, 0, 12, 0x00000800), (0x30, 0, 0, 0x00000017),
               (0x15, 0, 10, 0x00000006), (0x28, 0, 0, 0x00000014), (0x45, 7, 0, 0x00001fff),
               (0xb1, 0, 0, 0x0000000e), (0x48, 0, 0, 0x0000000e), (0x35, 0, 1, 0x00004e20),
               (0x25, 0, 4, 0x0000752f), (0x48, 0, 0, 0x00000010), (0x35, 0, 1, 0x00004e20),
               (0x25, 0, 1, 0x0000752f), (0x6, 0, 0, 0x00040000), (0x6, 0, 0, 0x00000000)]
SO_ATTACH_FILTER = 26


class Sniffer:
    def __init__(self, hostile, iface):
        import ctypes
        self.h = hostile
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL: both ways
        self.bpf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in CAPTURE_BPF))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                             struct.pack("HL", len(CAPTURE_BPF), ctypes.addressof(self.bpf)))
        self.sock.bind((iface, 0))
        self.sock.setblocking(False)
        self.conns = {}
        self.packets = 0

    def on_readable(self):
        for _ in range(256):
            try:
                pkt = self.sock.recv(65600)
            except (BlockingIOError, InterruptedError):
                return
            self.packets += 1
            try:
                self.handle(pkt)
            except Exception as e:  # a packet we cannot parse is no reason to stop
                log(f"capture: {type(e).__name__}: {e}")

    def handle(self, pkt):
        if len(pkt) < 54 or pkt[12:14] != b"\x08\x00":
            return
        ip = pkt[14:]
        if ip[9] != 6:
            return
        ihl = (ip[0] & 15) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        tcp = ip[ihl:total]
        if len(tcp) < 20:
            return
        src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        flags = tcp[13]
        if self.h.excluded(sport) or self.h.excluded(dport):
            return
        a, b = (src, sport), (dst, dport)
        if flags & 0x02 and not flags & 0x10:  # SYN: a new connection, the sender is its client
            if not OWN_PORT_LO <= sport < OWN_PORT_HI and (a, b) not in self.conns:  # not one of ours
                self.conns[(a, b)] = c = Conn(a, b)
                c.isn[a] = seq
            return
        c = self.conns.get((a, b)) or self.conns.get((b, a))
        if c is None:
            return
        if flags & 0x02:  # SYN-ACK
            c.isn[a] = seq
            return
        payload = tcp[(tcp[12] >> 4) * 4:]
        if not payload or a not in c.isn:
            return
        rel = (seq - c.isn[a] - 1) & 0xFFFFFFFF
        buf, pend = c.data[a], c.pending[a]
        if rel > 65536 or len(buf) >= 16384:
            return
        pend[rel] = bytes(payload)
        progressed = True
        while progressed:
            progressed = False
            for start in list(pend):
                chunk = pend[start]
                if start <= len(buf) < start + len(chunk):
                    buf += chunk[len(buf) - start:]
                    progressed = True
                if start + len(chunk) <= len(buf):
                    del pend[start]
        if a == c.client and buf and not c.fired:
            c.fired = True
            self.h.on_first_bytes(c, bytes(buf))
        elif a == c.server and buf:
            if c.client_first is None:
                c.client_first = bytes(c.data[c.client])
            if len(c.data[c.client]) == len(c.client_first):
                c.server_first = bytes(buf)
            self.h.on_server_bytes(c)


# ---------------------------------------------------------------- the attacker
class Hostile:
    def __init__(self, o):
        self.o = o
        self.role, self.peer_role = o.role, ("b" if o.role == "a" else "a")
        self.ip = {self.role: o.self_ip, self.peer_role: o.peer_ip}
        self.rail0 = {self.role: o.self_rail0, self.peer_role: o.peer_rail0}
        self.rail1 = {self.role: o.self_rail1, self.peer_role: o.peer_rail1}
        self.loop = None
        self.pid = None
        self.phase = ""
        self.phase_seen_ms = {}
        self.listeners = {}  # inode -> info, this host's driver's
        self.by_port = {self.role: {}, self.peer_role: {}}  # host -> port -> listener info (the latest)
        self.rescue_port = {self.role: None, self.peer_role: None}
        self.ss_rescue = None
        self.driver_inodes = set()
        self.foreign = set()
        self.next_k = 0
        self.attempts = []
        self.groups = []
        self.fds = []  # [(ms, count)] of this host's driver
        self.fd_kinds = []  # [(ms, {kind: count})] of it, every 2 s
        self.captures = []
        self.last_flight = None  # the latest real connector's first bytes
        self.rescue_tokens = {}  # host -> [(port, token)] of its ring receive comms (v5 conn_reply)
        self.tasks = set()
        self.port_cursor = OWN_PORT_LO + random.randrange(OWN_PORT_HI - OWN_PORT_LO)
        self.open_socks = set()
        self.relay_w = None
        self.flood = {}
        self.flooding = 0
        self.peer_idle = False  # the peer's driver makes no plugin call now (its --idle window) ...
        self.peer_idle_until = 0.0  # ... until then (time.monotonic(), less a margin)
        self.window_armed = False  # attack the next churn listener of ours that shows up (peer idle)
        self.windows = []  # [{"host", "port", "k", "t_ms", "how"}] the listeners attacked as held open
        self.idle_log = []  # [(ms, "start"|"end")] of our driver's idle windows
        self.log_pos = 0
        self.phase_t0 = None  # our driver's integrity phase start (unix ms, from its phase file)
        self.timed_done = set()
        self.settled = None  # settle()'s record
        self.notes = []
        self.stop = False
        self.excluded_ports = set(o.exclude)

    def excluded(self, port):
        return port in self.excluded_ports

    def wants(self, attack):
        return attack in self.o.attacks

    # ------------------------------------------------------------ plumbing
    def spawn(self, coro):
        t = self.loop.create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self._task_done)
        return t

    def _task_done(self, t):
        self.tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            e = t.exception()
            log(f"task failed: {type(e).__name__}: {e}")
            self.notes.append(f"task failed: {type(e).__name__}: {e}")

    def start_connect(self, host, port):
        """A non-blocking socket from our management address and a port of our range, its connect
        started now (synchronously: the order of these calls is the order of the listener's
        accept queue). Returns (socket, errno of connect_ex: 0 / EINPROGRESS or the failure)."""
        for _ in range(OWN_PORT_HI - OWN_PORT_LO):
            self.port_cursor = OWN_PORT_LO + (self.port_cursor + 1 - OWN_PORT_LO) % (OWN_PORT_HI - OWN_PORT_LO)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.o.self_ip, self.port_cursor))
            except OSError:
                s.close()
                continue
            rc = s.connect_ex((self.ip[host], port))
            self.open_socks.add(s)
            return s, rc
        raise OSError(errno.EADDRINUSE, "no source port left in our range")

    async def connected(self, s, rc, timeout=3.0):
        """Waits for a connect started by start_connect: None when connected, else why not."""
        if rc not in (0, errno.EINPROGRESS):
            return errno.errorcode.get(rc, str(rc))
        if rc == errno.EINPROGRESS:
            fut = self.loop.create_future()
            self.loop.add_writer(s.fileno(), lambda: fut.done() or fut.set_result(None))
            try:
                await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                return "timeout"
            finally:
                self.loop.remove_writer(s.fileno())
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        return errno.errorcode.get(err, str(err)) if err else None

    def close(self, s, rst=False):
        self.open_socks.discard(s)
        try:
            if rst:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        except OSError:
            pass

    async def read_for(self, s, ms, want=None):
        """Reads until the server closes (eof / reset), `want` bytes arrived, or `ms` passed."""
        got = bytearray()
        end = time.monotonic() + ms / 1000
        how = "open"
        while True:
            left = end - time.monotonic()
            if left <= 0 or (want is not None and len(got) >= want):
                break
            try:
                chunk = await asyncio.wait_for(self.loop.sock_recv(s, 65536), left)
            except asyncio.TimeoutError:
                break
            except ConnectionResetError:
                how = "reset"
                break
            except OSError as e:
                how = f"error {errno.errorcode.get(e.errno, e.errno)}"
                break
            if not chunk:
                how = "eof"
                break
            got += chunk
        return bytes(got), how

    async def read_frame(self, s, ms):
        """A v5 frame (header and its payload), or whatever came within `ms`."""
        got, how = await self.read_for(s, ms, HEADER)
        if len(got) >= HEADER and how == "open":
            f = struct.unpack_from("<IHHIIQ", got, 0)
            if f[0] == WIRE_MAGIC and f[3] <= 4096 and len(got) < HEADER + f[3]:
                more, how = await self.read_for(s, ms, HEADER + f[3] - len(got))
                got += more
        return got, how

    async def send(self, s, data):
        await self.loop.sock_sendall(s, data)

    def base(self, host, port, tk, kind, k):
        return {"kind": kind, "target": host, "source": self.role, "port": port, "target_kind": tk, "k": k,
                "t_ms": now_ms()}

    def record(self, rec, back=b"", **kw):
        """One attack connection's outcome: `rec` (base()) + kw; `back`: every byte the server sent."""
        rec = dict(rec, **kw)
        rec["bytes_back"] = len(back)
        if back:
            rec["back_hex"] = bytes(back[:48]).hex()
            log(f"{rec['kind']} -> {rec['target']}:{rec['port']} ({rec['target_kind']}, k {rec['k']}): "
                f"{len(back)} bytes back: {rec['back_hex'][:48]}")
        self.attempts.append(rec)
        return rec

    # ------------------------------------------------------------ relay to the peer's instance
    async def relay_setup(self):
        if self.role == "a":
            fut = self.loop.create_future()

            async def on_conn(r, w):
                if not fut.done():
                    fut.set_result((r, w))

            server = await asyncio.start_server(on_conn, self.o.self_ip, self.o.relay_port)
            r, w = await asyncio.wait_for(fut, self.o.relay_wait)
            server.close()
        else:
            deadline = time.monotonic() + self.o.relay_wait
            while True:
                try:
                    r, w = await asyncio.open_connection(self.o.peer_ip, self.o.relay_port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.relay_w = w
        self.spawn(self.relay_reader(r))

    def tell(self, **msg):
        if self.relay_w is not None:
            try:
                self.relay_w.write((json.dumps(msg) + "\n").encode())
            except Exception as e:
                log(f"relay write: {e}")

    async def relay_reader(self, r):
        while True:
            line = await r.readline()
            if not line:
                log("relay: the peer's instance closed its end")
                return
            m = json.loads(line)
            ev = m.get("ev")
            host = self.peer_role
            if ev == "listen":
                m["kind"] = "hs"
                self.by_port[host][m["port"]] = m
            elif ev == "gone":
                if m["port"] in self.by_port[host]:
                    self.by_port[host][m["port"]]["gone_ms"] = m["gone_ms"]
            elif ev == "window":  # the peer found its listener held open by our idle driver: attack it too
                self.window_attacks(host, m["port"], m["k"])
            elif ev == "idle":
                self.on_peer_idle(m["state"], m.get("left_ms", 0))
            elif ev == "rescue":
                self.rescue_port[host] = m["port"]
            elif ev == "release":  # the peer's attack is over: our sockets to it go
                self.release_host(m["host"])
            elif ev == "stop":
                self.stop = True

    # ------------------------------------------------------------ discovery
    def read_phase(self):
        try:
            with open(self.o.phase_file) as f:
                line = f.read().strip()
        except OSError:
            return
        if line and line != self.phase:
            self.phase = line
            name, _, ms = line.rpartition(" ")
            self.phase_seen_ms.setdefault(name or ms, now_ms())
            if name == "integrity" and ms.isdigit():
                self.phase_t0 = int(ms)

    def read_driver_log(self):
        """Our driver's --idle windows, from its log lines ("idle: no plugin call ...", "idle: resuming"),
        told to the peer's instance: its listeners wait for their connector meanwhile."""
        try:
            with open(self.o.driver_log, "rb") as f:
                f.seek(self.log_pos)
                chunk = f.read()
        except OSError:
            return
        end = chunk.rfind(b"\n") + 1
        self.log_pos += end
        for line in chunk[:end].splitlines():
            m = re.search(rb": idle: no plugin call for (\d+) ms", line)
            if m:
                self.idle_log.append((now_ms(), "start"))
                # its end: at least --idle-at-ms + its duration into the stream (taken late, it ends later)
                left = int(m.group(1))
                if self.phase_t0 is not None and self.o.idle_at_ms is not None:
                    left = min(left, self.phase_t0 + self.o.idle_at_ms + int(m.group(1)) - now_ms())
                self.tell(ev="idle", state="start", left_ms=left)
                log(f"our driver is idle (at least {left} ms more): the peer's listener waits")
            elif b": idle: resuming" in line:
                self.idle_log.append((now_ms(), "end"))
                self.tell(ev="idle", state="end", left_ms=0)

    def peer_idle_left(self):
        return self.peer_idle_until - time.monotonic() if self.peer_idle else 0

    def on_peer_idle(self, state, left_ms):
        self.peer_idle = state == "start"
        # the relay and our loop take time: count on a little less of the window than it said
        self.peer_idle_until = time.monotonic() + left_ms / 1000 - 0.15
        if not self.peer_idle:
            self.window_armed = False
            return
        if any(w["host"] == self.role for w in self.windows):
            return  # one held listener per host
        self.window_armed = True
        self.loop.call_later(0.15, self.take_open_listener)

    def take_open_listener(self):
        """150 ms into the peer's idle window: a churn listener of ours still open waits for its connector."""
        if not self.window_armed or self.peer_idle_left() < 0.4:
            return
        open_ = [li for li in self.listeners.values() if li["kind"] == "hs" and li["k"] >= 0 and li["gone_ms"] is None]
        if open_:
            li = min(open_, key=lambda x: x["seen_ms"])
            self.start_window(li, "open when the peer went idle")

    def start_window(self, li, how):
        self.window_armed = False
        self.windows.append({"host": self.role, "port": li["port"], "k": li["k"], "t_ms": now_ms(), "how": how})
        log(f"listener {li['port']} (k {li['k']}) is held open by the peer's idle driver ({how}): attacking it")
        self.tell(ev="window", port=li["port"], k=li["k"])
        self.window_attacks(self.role, li["port"], li["k"])

    def timed(self):
        """The forged rescue requests and the flood, at their times into the stream (our clock)."""
        if self.phase_t0 is None:
            return
        t = now_ms() - self.phase_t0
        if t >= self.o.forge_ms and "forge" not in self.timed_done:
            self.timed_done.add("forge")
            if self.wants("forge"):
                for host in (self.role, self.peer_role):
                    self.spawn(self.forge_rescue(host, t))
        if t >= self.o.flood_ms and "flood" not in self.timed_done:
            self.timed_done.add("flood")
            for host in (self.role, self.peer_role):
                self.spawn(self.flood_rescue(host))
            if not self.wants("flood"):
                self.spawn(self.settle())

    async def discover(self):
        while not self.stop:
            if self.pid is None:
                try:
                    with open(self.o.pid_file) as f:
                        self.pid = int(f.read().strip())
                    log(f"driver pid {self.pid}")
                except (OSError, ValueError):
                    pass
            if self.ss_rescue is None and os.path.exists(self.o.rescue_file):  # the guest script's `ss -ltnp`
                try:
                    with open(self.o.rescue_file) as f:
                        self.ss_rescue = [int(x) for x in f.read().split()]
                except (OSError, ValueError):
                    self.ss_rescue = []
                log(f"ss -ltnp: the driver's listeners {self.ss_rescue} (the rescue service's, ours: "
                    f"{self.rescue_port[self.role]})")
                if self.rescue_port[self.role] is None and len(self.ss_rescue) == 1:
                    p = self.ss_rescue[0]
                    self.rescue_port[self.role] = p
                    self.tell(ev="rescue", port=p)
                    for li in self.listeners.values():
                        if li["port"] == p:
                            li["kind"] = "rescue"
            self.read_phase()
            self.read_driver_log()
            self.timed()
            if self.pid is not None:
                self.scan()
            await asyncio.sleep(0.05 if self.flooding else 0.01)

    def pick_rescue(self):
        """Once the stream runs: the plugin's listener from before it that is still open (the ring's
        are closed once accept() returned their comm) is the rescue service (init starts it)."""
        if self.rescue_port[self.role] is not None or not self.phase.startswith("integrity"):
            return
        pre = [li for li in self.listeners.values() if li["k"] < 0 and li["gone_ms"] is None]
        if not pre:
            return
        li = min(pre, key=lambda x: x["seen_ms"])
        li["kind"] = "rescue"
        self.rescue_port[self.role] = li["port"]
        self.tell(ev="rescue", port=li["port"])
        log(f"the rescue service listens on port {li['port']} (open before the stream and still)")

    def scan(self):
        t = now_ms()
        seen = set()
        for src, port, inode, rqueue in proc_listeners():
            if src != self.o.self_ip or self.excluded(port) or inode in self.foreign:
                continue
            if inode not in self.listeners and inode not in self.driver_inodes:
                self.driver_inodes = socket_inodes(self.pid)
                if inode not in self.driver_inodes:
                    self.foreign.add(inode)  # not the driver's
                    continue
            seen.add(inode)
            li = self.listeners.get(inode)
            if li is not None:
                li["max_queue"] = max(li["max_queue"], rqueue)
                continue
            kind = "rescue" if port == self.rescue_port[self.role] else "hs"
            k = -1
            if kind == "hs" and self.phase.startswith("integrity"):
                k = self.next_k
                self.next_k += 1
            li = {"port": port, "inode": inode, "seen_ms": t, "gone_ms": None, "k": k, "kind": kind,
                  "phase": self.phase.split(" ")[0], "max_queue": rqueue}
            self.listeners[inode] = li
            self.by_port[self.role][port] = li
            if kind == "hs" and k >= 0:
                self.tell(ev="listen", port=port, k=k, seen_ms=t)
            log(f"listener {port} ({kind}, k {k}, phase {li['phase']})")
            if kind == "hs" and k >= 0 and self.window_armed and self.peer_idle_left() >= 0.4:
                self.start_window(li, "appeared while the peer was idle")
        self.pick_rescue()
        for inode, li in self.listeners.items():
            if li["gone_ms"] is None and inode not in seen:
                li["gone_ms"] = t
                log(f"listener {li['port']} gone after {t - li['seen_ms']} ms (k {li['k']})")
                if li["kind"] == "hs" and li["k"] >= 0:
                    self.tell(ev="gone", port=li["port"], k=li["k"], gone_ms=t)

    async def sample_fds(self):
        i = 0
        while not self.stop:
            if self.pid is not None:
                n = fd_count(self.pid)
                if n is not None:
                    self.fds.append((now_ms(), n))
                if i % 8 == 0:  # every 2 s: what they are, and what we hold
                    ours = {}
                    for sock in list(self.open_socks):
                        try:
                            peer = sock.getpeername()
                            key = f"{peer[0]}:{peer[1]}"
                        except OSError as e:
                            key = f"unconnected ({errno.errorcode.get(e.errno, e.errno)})"
                        ours[key] = ours.get(key, 0) + 1
                    self.fd_kinds.append((now_ms(), fd_kinds(self.pid), ours))
                i += 1
            await asyncio.sleep(0.25)

    # ------------------------------------------------------------ capture events
    def conn_target(self, c):
        """(host, listener info) of a captured connection's server, when it is a plugin listener."""
        sip, sport = c.server
        host = self.role if sip == self.o.self_ip else self.peer_role if sip == self.o.peer_ip else None
        if host is None:
            return None, None
        if sport == self.rescue_port[host]:
            return host, {"kind": "rescue", "k": -1, "port": sport}
        li = self.by_port[host].get(sport)
        if li is None and not self.phase.startswith("integrity"):
            li = {"kind": "hs", "k": -1, "port": sport}  # a ring listener we did not see (between two looks)
        return host, li

    def on_first_bytes(self, c, data):
        host, li = self.conn_target(c)
        c.cap = {"t_ms": now_ms(), "server": f"{c.server[0]}:{c.server[1]}", "client": f"{c.client[0]}:{c.client[1]}",
                 "host": host, "k": li["k"] if li else None, "kind": li["kind"] if li else None,
                 "first_bytes": len(data), "hex": data[:64].hex()}
        self.captures.append(c.cap)
        if not li or li["kind"] != "hs":
            return
        self.last_flight = data
        if self.wants("replay") and any(w["host"] == host and w["port"] == c.server[1] for w in self.windows):
            # the held listener's own connector: its bytes, verbatim, to the same listener (still open
            # until accept() returned a comm) and to the rescue port
            self.spawn(self.probe(host, c.server[1], "hs", "replay-same", data, li["k"]))
            if self.rescue_port[host]:
                self.spawn(self.probe(host, self.rescue_port[host], "rescue", "replay-same", data, li["k"]))

    def on_server_bytes(self, c):
        if c.parsed or c.client_first is None:
            return
        host, li = self.conn_target(c)
        if c.cap is not None:
            c.cap["server_first_bytes"] = len(c.server_first or b"")
        if host is None or li is None or li["kind"] != "hs":
            return
        # v5: the listener's conn_reply ends with its rescue point (port, token) of this connection
        for typ, _token, payload in parse_frames(c.server_first or b""):
            if typ == T_REPLY and len(payload) >= 12:
                c.parsed = True
                port, _zero, token = struct.unpack_from("<HHQ", payload, len(payload) - 12)
                if li["k"] < 0 and port and token and (port, token) not in self.rescue_tokens.get(host, []):
                    self.rescue_tokens.setdefault(host, []).append((port, token))
                    log(f"sniffed the rescue token of {host}'s ring receive comm (its port {port})")

    # ------------------------------------------------------------ attacks
    def window_attacks(self, host, port, k):
        """Everything at the held listener (connects started now, in this order) and at the rescue port."""
        rport = self.rescue_port[host]
        if self.wants("hijack"):
            first, second = self.start_connect(host, port), self.start_connect(host, port)
            self.spawn(self.hijack(host, port, k, first, second))
        targets = [(port, "hs")] + ([(rport, "rescue")] if rport else [])
        if not rport:
            self.notes.append(f"no rescue port of {host} known at its listener k {k}")
        for p, tk in targets:
            if self.wants("garbage"):
                self.spawn(self.probe(host, p, tk, "garbage", b"GET / HTTP/1.1\r\nHost: nccl\r\n\r\n" + os.urandom(40), k,
                                      conn=self.start_connect(host, p)))
            if self.wants("ff"):
                self.spawn(self.probe(host, p, tk, "ff", b"\xff" * 24, k, conn=self.start_connect(host, p)))
            if self.wants("reset"):
                self.spawn(self.reset(host, p, tk, k, b"", self.start_connect(host, p)))
                self.spawn(self.reset(host, p, tk, k, os.urandom(10), self.start_connect(host, p)))
            if self.wants("replay"):
                if self.last_flight:
                    self.spawn(self.probe(host, p, tk, "replay-other", self.last_flight, k, conn=self.start_connect(host, p)))
                else:
                    self.notes.append(f"replay-other on {host}:{p}: no real connector's bytes captured before")
            if self.wants("slowloris"):
                self.spawn(self.slowloris(host, p, tk, k, self.start_connect(host, p)))
        for p, tk in targets:
            if self.wants("silent"):
                self.spawn(self.silent(host, p, tk, k, self.o.silent, "silent"))

    async def probe(self, host, port, tk, kind, data, k, conn=None, read_ms=2000):
        rec = self.base(host, port, tk, kind, k)
        s, rc = conn or self.start_connect(host, port)
        why = await self.connected(s, rc)
        if why:
            self.close(s)
            return self.record(rec, connected=why)
        t0 = time.monotonic()
        try:
            await self.send(s, data)
            back, how = await self.read_for(s, read_ms)
        except OSError as e:
            back, how = b"", f"error {errno.errorcode.get(e.errno, e.errno)}"
        held = round((time.monotonic() - t0) * 1000)
        self.close(s)
        return self.record(rec, back, connected=True, sent=len(data), ended=how,
                           server_closed_ms=held if how != "open" else None)

    async def reset(self, host, port, tk, k, data, conn):
        rec = self.base(host, port, tk, "reset" if data else "reset-empty", k)
        s, rc = conn
        why = await self.connected(s, rc)
        if why:
            self.close(s)
            return self.record(rec, connected=why)
        back = b""
        try:
            if data:
                await self.send(s, data)
            back, _how = await self.read_for(s, 300)
        except OSError:
            pass
        self.close(s, rst=True)
        return self.record(rec, back, connected=True, sent=len(data), ended="rst sent")

    async def slowloris(self, host, port, tk, k, conn):
        rec = self.base(host, port, tk, "slowloris", k)
        data = self.last_flight or frame(T_REQUEST, random.getrandbits(64), os.urandom(200))
        s, rc = conn
        why = await self.connected(s, rc)
        if why:
            self.close(s)
            return self.record(rec, connected=why)
        t0 = time.monotonic()
        back = bytearray()
        how = "open"
        sent = 0
        while time.monotonic() - t0 < self.o.slowloris_s and sent < len(data) and not self.stop:
            try:
                s.send(data[sent:sent + 1])
                sent += 1
            except BlockingIOError:
                pass
            except OSError as e:
                how = "reset" if e.errno in (errno.ECONNRESET, errno.EPIPE) else f"error {e.errno}"
                break
            chunk, how = await self.read_for(s, 1000)
            back += chunk
            if how != "open":
                break
        held = round((time.monotonic() - t0) * 1000)
        self.close(s)
        return self.record(rec, bytes(back), connected=True, sent=sent, ended=how,
                           server_closed_ms=held if how != "open" else None)

    async def silent(self, host, port, tk, k, n, kind, budget_s=None):
        """n sockets that send nothing and stay open until the server closes them or we release them:
        connects started in batches without waiting (for at most budget_s), then each one's outcome
        watched."""
        g = {"kind": kind, "target": host, "source": self.role, "port": port, "target_kind": tk, "k": k,
             "n": n, "t_ms": now_ms(), "connected": 0, "failed": 0, "fail_reasons": {}, "bytes_back": 0,
             "server_closed_ms": [], "still_open": 0, "released_ms": None, "back_hex": ""}
        self.groups.append(g)
        socks = g["_socks"] = {}
        t0 = time.monotonic()

        def fail(why):
            g["failed"] += 1
            g["fail_reasons"][why] = g["fail_reasons"].get(why, 0) + 1

        def on_readable(s):
            try:
                chunk = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if chunk:
                if not g["back_hex"]:
                    g["back_hex"] = chunk[:48].hex()
                g["bytes_back"] += len(chunk)
                return
            self.loop.remove_reader(s.fileno())
            g["server_closed_ms"].append(round((time.monotonic() - socks.pop(s)) * 1000))
            self.close(s)

        pending = []
        slice_end = time.monotonic() + 0.02
        for i in range(n):
            if self.stop or g.get("released_ms"):
                break
            if budget_s is not None and time.monotonic() - t0 > budget_s:
                g["cut_at"] = i  # the guest is too slow for all of them in time
                break
            if time.monotonic() > slice_end:  # 20 ms slices: a connect can take 50 ms in a loaded guest;
                await asyncio.sleep(0)        # the scans, the capture and the relay go on between them
                slice_end = time.monotonic() + 0.02
            try:
                s, rc = self.start_connect(host, port)
            except OSError as e:
                fail(errno.errorcode.get(e.errno, str(e.errno)))
                continue
            if rc not in (0, errno.EINPROGRESS):
                fail(errno.errorcode.get(rc, str(rc)))
                self.close(s)
                continue
            pending.append((s, time.monotonic()))
        g["issued_ms"] = round((time.monotonic() - t0) * 1000)
        deadline = time.monotonic() + 5.0
        while pending and time.monotonic() < deadline and not g.get("released_ms"):
            still = []
            for j, (s, ts) in enumerate(pending):
                if j % 32 == 31:
                    await asyncio.sleep(0)
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    fail(errno.errorcode.get(err, str(err)))
                    self.close(s)
                    continue
                try:
                    s.getpeername()
                except OSError:
                    still.append((s, ts))
                    continue
                g["connected"] += 1
                socks[s] = ts
                self.loop.add_reader(s.fileno(), on_readable, s)
            pending = still
            if pending:
                await asyncio.sleep(0.05)
        for s, _ts in pending:
            fail("timeout")
            self.close(s)
        g["opened_ms"] = round((time.monotonic() - t0) * 1000)
        log(f"{kind}: {g['connected']} of {n} sockets open on {host}:{port} ({tk}) after {g['opened_ms']} ms "
            f"({g['failed']} failed {g['fail_reasons']}, {len(g['server_closed_ms'])} closed by the server already)")
        return g

    def release(self, g):
        socks = g.pop("_socks", None)
        if socks is None:
            return
        g["still_open"] = len(socks)
        g["released_ms"] = now_ms()
        for s in list(socks):
            try:
                self.loop.remove_reader(s.fileno())
            except (ValueError, OSError):
                pass
            self.close(s)
        socks.clear()

    async def flood_rescue(self, host):
        if not self.wants("flood"):
            return
        port = self.rescue_port[host]
        if not port:
            self.notes.append(f"flood on {host}: no rescue port known")
            if host == self.role:
                self.spawn(self.settle())
            return
        self.flooding += 1
        self.flood[host] = f = {"target": host, "source": self.role, "port": port, "start_ms": now_ms()}
        if host == self.role and self.pid is not None:
            f["fds_at_start"] = fd_count(self.pid)
        f["ms_into_stream"] = f["start_ms"] - (self.phase_t0 or f["start_ms"])
        log(f"flood: {self.o.flood} silent sockets on {host}'s rescue port {port}")
        g = await self.silent(host, port, "rescue", -1, self.o.flood, "flood", self.o.flood_issue_s)
        f["opened_ms"] = now_ms()
        if host == self.role:
            self.spawn(self.settle())
        left = f["opened_ms"] + self.o.hold_s * 1000 - now_ms()
        if left > 0:
            await asyncio.sleep(left / 1000)
        f["hold_end_ms"] = now_ms()
        if host == self.role and self.pid is not None:
            f["fds_at_hold_end"] = fd_count(self.pid)
        self.flooding -= 1
        log(f"flood on {host}: {len(g.get('_socks', ()))} flood sockets still open, "
            f"{len(g['server_closed_ms'])} closed by the server; every socket stays open until the end")

    async def settle(self):
        """After the attacks on this host (every socket of ours still open): wait until our driver's fd
        count is back to its baseline (its minimum between the stream's start and the first attack
        on this host) + --fd-slack, at most --settle-s; then end our driver's stream (its
        --stop-file). The check judges whether they came back."""
        st = self.settled = {"start_ms": now_ms()}
        t0 = self.phase_t0 or 0
        firsts = [a["t_ms"] for a in self.attempts if a["target"] == self.role] + \
                 [g["t_ms"] for g in self.groups if g["target"] == self.role]
        t_first = min(firsts) if firsts else st["start_ms"]
        before = [n for t, n in self.fds if t0 <= t < t_first]
        st["base"] = base = min(before) if before else None
        deadline = time.monotonic() + self.o.settle_s
        n = None
        while base is not None and time.monotonic() < deadline and not self.stop:
            n = fd_count(self.pid) if self.pid is not None else None
            if n is not None and n <= base + self.o.fd_slack:
                st["back_ms"] = now_ms() - st["start_ms"]
                break
            await asyncio.sleep(0.25)
        st["fds"] = n
        st["open_sockets"] = len(self.open_socks)
        log(f"settle: the driver's fds {n} (baseline {base}): " +
            (f"back after {st['back_ms']} ms" if "back_ms" in st else f"not back within {self.o.settle_s} s") +
            f", {len(self.open_socks)} sockets of ours still open; the attack on this host ends, and the stream")
        self.release_host(self.role)  # before the driver finalizes: the attack is over
        self.tell(ev="release", host=self.role)
        self.end_stream()

    def release_host(self, host):
        for g in self.groups:
            if g["target"] == host:
                self.release(g)
        for sock in list(self.open_socks):
            try:
                if sock.getpeername()[0] == self.ip[host]:
                    self.close(sock)
            except OSError:
                pass

    def end_stream(self):
        try:
            with open(self.o.driver_stop_file, "w") as f:
                f.write(f"{now_ms()}\n")
        except OSError as e:
            log(f"cannot write {self.o.driver_stop_file}: {e}")

    async def forge_rescue(self, host, t_into):
        port = self.rescue_port[host]
        if not port:
            self.notes.append(f"forge-rescue on {host}: no rescue port known")
            return
        tokens = self.rescue_tokens.get(host) or []
        src = "sniffed (v5 conn_reply)"
        if not tokens:
            tokens = [(port, random.getrandbits(64) | 1)]
            src = "none sniffed: random"
        other = self.peer_role if host == self.role else self.role
        for i, (_p, token) in enumerate(tokens):
            rec = self.base(host, port, "rescue", "forge-rescue", -1)
            rec["ms_into_stream"] = t_into
            qpn = FORGED_QPN_BASE + 0x800 + (0 if self.role == "a" else 0x10) + i
            msg = frame(T_RESCUE, token, reprotect_request(qpn, self.rail1[other], 0x7F000000 + random.randrange(1 << 20), 0))
            s, rc = self.start_connect(host, port)
            why = await self.connected(s, rc)
            if why:
                self.close(s)
                self.record(rec, connected=why, token_source=src)
                continue
            try:
                await self.send(s, msg)
                back, how = await self.read_frame(s, 6000)
            except OSError as e:
                back, how = b"", f"error {errno.errorcode.get(e.errno, e.errno)}"
            self.close(s)
            frames = parse_frames(back)
            self.record(rec, back, connected=True, sent=len(msg), ended=how, token_source=src, forged_qpn=qpn,
                        answer_type=frames[0][0] if frames else None,
                        answer_text=frames[0][2][:120].decode("utf-8", "replace") if frames and frames[0][0] == T_ERROR else None)

    async def hijack(self, host, port, k, first, second):
        rec = self.base(host, port, "hs", "hijack", k)
        other = self.peer_role if host == self.role else self.role
        qpn = FORGED_QPN_BASE + 16 * k + 2 * (host == "b") + (self.role == "b")  # k, target, source
        total = bytearray()
        token, token_src = None, "none leaked: random"
        s, rc = first
        why = await self.connected(s, rc)
        if why:
            self.close(s)
            self.close(second[0])
            return self.record(rec, connected=why, forged_qpn=qpn, stage="connect")
        try:
            await self.send(s, b"GET / HTTP/1.0\r\n\r\n\0\0\0\0\0\0")
            back, _how = await self.read_frame(s, 1500)
        except OSError:
            back = b""
        self.close(s)
        total += back
        if len(back) >= HEADER:
            token = struct.unpack_from("<Q", back, 16)[0]
            token_src = "leaked: bytes 16-23 of the listener's answer"
        if not token:
            token = random.getrandbits(64) | 1
        stage, reply_type, acked = "request", None, False
        s, rc = second
        why = await self.connected(s, rc)
        if why:
            self.close(s)
            return self.record(rec, bytes(total), connected=True, forged_qpn=qpn, token_source=token_src,
                               stage=f"second connection: {why}")
        try:
            await self.send(s, frame(T_REQUEST, token, conn_request(qpn, self.rail0[other])))
            back, _how = await self.read_frame(s, 5000)
            total += back
            frames = parse_frames(back)
            reply_type = frames[0][0] if frames else None
            if reply_type == T_REPLY:
                stage = "ready"
                await self.send(s, frame(T_READY, token, conn_ready()))
                back, _how = await self.read_frame(s, 5000)
                total += back
                frames = parse_frames(back)
                acked = bool(frames) and frames[0][0] == T_ACK
                stage = "acked: the listener queued our comm for accept()" if acked else "ready sent, no ack"
        except OSError as e:
            stage += f" (error {errno.errorcode.get(e.errno, e.errno)})"
        self.close(s)
        log(f"hijack of {host}:{port} (k {k}): token {token_src}; {stage}; our QP {qpn}")
        return self.record(rec, bytes(total), connected=True, forged_qpn=qpn, token_source=token_src,
                           reply_type=reply_type, acked=acked, stage=stage)

    # ------------------------------------------------------------ main
    async def main(self):
        self.loop = asyncio.get_running_loop()
        t_start = now_ms()
        sniffer = None
        try:
            sniffer = Sniffer(self, self.o.iface)
            self.loop.add_reader(sniffer.sock.fileno(), sniffer.on_readable)
        except OSError as e:
            self.notes.append(f"no capture on {self.o.iface}: {e}")
        await self.relay_setup()
        with open(self.o.ready_file, "w") as f:
            f.write(f"{now_ms()}\n")
        log(f"ready after {now_ms() - t_start} ms (relay to the peer's instance up)")
        self.spawn(self.discover())
        self.spawn(self.sample_fds())
        deadline = time.monotonic() + self.o.max_s
        while not self.stop and not os.path.exists(self.o.stop_file) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        self.stop = True
        if not os.path.exists(self.o.driver_stop_file):
            self.end_stream()  # never leave the driver streaming until its timeout
        self.tell(ev="stop")
        for g in self.groups:
            self.release(g)
        for s in list(self.open_socks):
            self.close(s)
        for t in list(self.tasks):
            t.cancel()
        await asyncio.sleep(0)
        out = {"role": self.role, "t_start_ms": t_start, "t_end_ms": now_ms(), "pid": self.pid,
               "phase_seen_ms": self.phase_seen_ms, "rescue_port": self.rescue_port, "ss_listeners": self.ss_rescue,
               "listeners": sorted(self.listeners.values(), key=lambda x: x["seen_ms"]),
               "peer_listeners": sorted(self.by_port[self.peer_role].values(), key=lambda x: x.get("seen_ms", 0)),
               "attempts": self.attempts, "groups": self.groups, "flood": self.flood, "settle": self.settled, "fds": self.fds, "fd_kinds": self.fd_kinds,
               "captures": self.captures, "rescue_tokens_sniffed": {h: len(v) for h, v in self.rescue_tokens.items()},
               "packets_captured": sniffer.packets if sniffer else 0, "notes": self.notes,
               "attacks": sorted(self.o.attacks), "windows": self.windows, "idle_log": self.idle_log,
               "phase_t0_ms": self.phase_t0, "forge_ms": self.o.forge_ms, "flood_ms": self.o.flood_ms,
               "forged_qpn_base": FORGED_QPN_BASE,
               "params": {"silent": self.o.silent, "flood": self.o.flood, "hold_s": self.o.hold_s,
                          "slowloris_s": self.o.slowloris_s}}
        tmp = self.o.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, self.o.out)
        log(f"done: {len(self.attempts)} attempts, {len(self.groups)} socket groups, {len(self.captures)} captures")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", required=True, choices=("a", "b"))
    p.add_argument("--self-ip", required=True)
    p.add_argument("--peer-ip", required=True)
    p.add_argument("--self-rail0", required=True)
    p.add_argument("--peer-rail0", required=True)
    p.add_argument("--self-rail1", required=True)
    p.add_argument("--peer-rail1", required=True)
    p.add_argument("--iface", default="eth2")
    p.add_argument("--relay-port", type=int, default=18791)
    p.add_argument("--relay-wait", type=float, default=120)
    p.add_argument("--exclude", type=lambda s: [int(x) for x in s.split(",") if x], default=[],
                   help="ports that are not the plugin's (the driver's management port, the barrier, the relay)")
    p.add_argument("--pid-file", required=True)
    p.add_argument("--phase-file", required=True)
    p.add_argument("--rescue-file", required=True)
    p.add_argument("--ready-file", required=True)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--attacks", default=",".join(PROBES + ("forge", "hijack", "flood")),
                   type=lambda s: set(x for x in s.split(",") if x))
    p.add_argument("--driver-log", required=True, help="our driver's stderr (its idle: lines)")
    p.add_argument("--forge-ms", type=int, default=17800, help="the forged rescue requests, ms into the stream")
    p.add_argument("--flood-ms", type=int, default=18300, help="the flood, ms into the stream")
    p.add_argument("--silent", type=int, default=128)
    p.add_argument("--flood", type=int, default=1500)
    p.add_argument("--driver-stop-file", required=True, help="our driver's --stop-file: created once settled")
    p.add_argument("--idle-at-ms", type=int, help="our driver's --idle AT_MS (its window's nominal start)")
    p.add_argument("--settle-s", type=float, default=30.0, help="bound on waiting for the driver's fds after the attacks")
    p.add_argument("--fd-slack", type=int, default=8, help="fds above the baseline that count as back")
    p.add_argument("--hold-s", type=float, default=5.0, help="the driver's fds are read (informational) this long "
                   "after the flood's last socket connected")
    p.add_argument("--flood-issue-s", type=float, default=5.5, help="bound on starting the flood's connects")
    p.add_argument("--slowloris-s", type=float, default=20.0)
    p.add_argument("--max-s", type=float, default=400)
    o = p.parse_args()
    try:
        asyncio.run(Hostile(o).main())
    finally:
        if not os.path.exists(o.driver_stop_file):
            with open(o.driver_stop_file, "w") as f:  # whatever happened: the driver's stream may end
                f.write("attacker exited\n")


if __name__ == "__main__":
    main()
