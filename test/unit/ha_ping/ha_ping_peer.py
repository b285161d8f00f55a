#!/usr/bin/env python3
"""A hand-made ha-ping client for test_ha_ping_server.sh: the wire format of tools/ha-ping/protocol.hpp
written independently, to misbehave where the real client never does.

  ha_ping_peer.py silent PORT            connect, send nothing
  ha_ping_peer.py partial PORT           read the challenge, send half a frame header, stall
  ha_ping_peer.py stall TOKEN PORT       a proved Hello (one rail, --timeout of 2^32-1 ms), read the
                                         ack, then stall: the server must end the session by itself
Each waits until the server closes the connection (at most 60 s) and prints one JSON line:
{"closed_after_s": S, "ack_timeout_ms": N or null, "answer": "..."}.
"""
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time

MAGIC, WIRE_VERSION, TAG = 0x4148434E, 1, 0x68612D70696E6721
HELLO, HELLO_ACK, CHALLENGE, ERROR = 0x100, 0x101, 0x106, 2


def frame(typ, payload):
    return struct.pack("<IHHIIQ", MAGIC, WIRE_VERSION, typ, len(payload), 0, TAG) + payload


def read_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise EOFError
        b += chunk
    return b


def read_frame(s):
    magic, _, typ, length, _, tag = struct.unpack("<IHHIIQ", read_exact(s, 24))
    assert magic == MAGIC and tag == TAG, "not an ha-ping frame"
    return typ, read_exact(s, length)


def string(b):
    return struct.pack("<H", len(b)) + b


def proof(token, label, challenge, response, body):
    key = b"ha-tools token v1:" + token.encode()
    return hmac.new(key, bytes([len(label)]) + label + challenge + response + body, hashlib.sha256).digest()


def hello(token, server_nonce):
    nonce = os.urandom(32)
    body = struct.pack("<H", 1) + string(b"rxe9:1")                   # one rail
    body += struct.pack("<H", 1) + struct.pack("<Q", 8)                # sizes: 8
    body += struct.pack("<IIIII", 20, 8, 8, 0xFFFFFFFF, 0) + bytes([0, 0])  # iters bw window timeout duration tc sl
    body += nonce
    return nonce, body + proof(token, b"ha-ping hello", server_nonce, nonce, body)


def wait_closed(s, start, deadline=60):
    s.settimeout(deadline)
    try:
        while s.recv(4096):
            pass
    except (ConnectionResetError, socket.timeout):
        pass
    return round(time.monotonic() - start, 2)


def main():
    mode = sys.argv[1]
    token = sys.argv[2] if mode == "stall" else None
    port = int(sys.argv[-1])
    out = {"ack_timeout_ms": None, "answer": ""}
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    start = time.monotonic()
    if mode in ("partial", "stall"):
        typ, payload = read_frame(s)
        assert typ == CHALLENGE and len(payload) == 34, f"no challenge: type {typ:#x}"
        start = time.monotonic()
        if mode == "partial":
            s.sendall(frame(HELLO, b"x" * 100)[:12])
        else:
            _, payload = hello(token, payload[2:])
            s.sendall(frame(HELLO, payload))
            typ, payload = read_frame(s)
            if typ == ERROR:
                out["answer"] = payload.decode()
            else:
                assert typ == HELLO_ACK, f"type {typ:#x}"
                nrails, = struct.unpack_from("<H", payload)
                off = 2
                for _ in range(nrails):
                    n, = struct.unpack_from("<H", payload, off)
                    off += 2 + n
                out["ack_timeout_ms"], = struct.unpack_from("<I", payload, off)
                out["answer"] = "hello ack"
                start = time.monotonic()
    out["closed_after_s"] = wait_closed(s, start)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
