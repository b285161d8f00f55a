"""Check of the plugin-errors VM test (plugin-errors.guest.sh): every error path of the plugin
ends with the exact ncclResult_t, the WARN text, within its time bound, and nothing crashes.

Rank 0 ran in VM a, rank 1 in VM b; each run left NAME.rc / NAME.ms / NAME.json / NAME.log.
"""
import re

from check import expect, fail

HANDSHAKE_TIMEOUT_MS = 5000  # HA_NCCL_HANDSHAKE_TIMEOUT_MS in plugin-errors.guest.sh
SLACK_MS = 3000              # scheduling slack on the 1-vCPU TCG guests

ncclSuccess, ncclSystemError, ncclInvalidArgument, ncclInvalidUsage, ncclRemoteError = 0, 2, 4, 5, 6
DRIVER_EXIT_CODES = {0, 1, 2, 3, 4, 5}  # ha-net-driver's documented exit statuses
SIGKILL_STATUS = 128 + 9
CRASH_TEXT = re.compile(r"Segmentation fault|core dumped|Aborted|terminate called|AddressSanitizer|"
                        r"UndefinedBehaviorSanitizer|runtime error:|double free|stack smashing|"
                        r"SIGSEGV|SIGABRT|SIGBUS|Illegal instruction|Bus error")
SCENARIOS = ["bad-dev", "bad-handle", "bad-token", "close-listen", "close-listen-ack", "flood", "abandon-connect",
             "oversize", "peer-death"]
# flood: the kinds of bad connector (ha-net-driver flood.hpp); none proves the handle's secret, so
# the listener closes each without a byte sent back and says so in an INFO line at most once a
# minute per source (admission.cpp), no WARN.
FLOOD_KINDS = ["garbage", "wrong-token", "silent-close", "half-frame", "wrong-type", "oversize", "short-request",
               "bad-sl", "bad-proof", "silent-hold"]
REFUSED_INFO = (r"NCCL INFO NET/HA: listener on rxe0:1: closed (\d+) connection\(s\) from 10\.30\.0\.2 that did not "
                r"prove the job's secret \(last: (.*)\); nothing was sent to them")
FLOOD_ROUNDS, FLOOD_HOLDERS = 8, 6  # ha-net-driver fault.cpp kFloodRounds, kFloodHolders
ROLE_RANK = {"a": 0, "b": 1}


def step(rep, name):
    steps = {s["name"]: s for s in rep["fault"]["steps"]}
    if name not in steps:
        fail(f"rank {rep['rank']} {rep['fault']['name']}: no step '{name}' (steps: {list(steps)})")
    return steps[name]


def expect_step(rep, name, code, *, max_ms=None, comm_null=None, calls=None):
    s = step(rep, name)
    tag = f"rank {rep['rank']} {rep['fault']['name']}: {name}"
    expect(s["code"] == code, f"{tag}: {s['call']} returned {s['result']} ({s['code']}), expected {code}")
    expect(s["ok"], f"{tag}: the driver judged the step ok ({s['detail']})")
    if comm_null is not None:
        expect(s["comm_null"] is comm_null, f"{tag}: comm/request {'stayed NULL' if comm_null else 'returned'}")
    if calls is not None:
        expect(s["calls"] == calls, f"{tag}: {s['calls']} call(s) (expected {calls})")
    if max_ms is not None:
        expect(s["ms"] < max_ms, f"{tag}: outcome after {s['ms']:.1f} ms (bound {max_ms} ms)")
    return s


def warns(rep):
    return rep.get("plugin_warning_lines", [])


# init's one WARN when a test hook is set (src/plugin/runtime/test_hooks.hpp; close-listen-ack sets one)
TEST_HOOKS_WARN = r"NET/HA: test hooks set \(this plugin was built with NCCL_HA_TEST_HOOKS=ON, for tests only\): " \
                  r"HA_NCCL_TEST_ACK_DELAY_MS=2000: "


def expect_warn(rep, pattern, what, count=None):
    hits = [w for w in warns(rep) if re.search(pattern, w)]
    n = f"exactly {count}" if count is not None else "a"
    expect(len(hits) >= 1 and (count is None or len(hits) == count),
           f"rank {rep['rank']} {rep['fault']['name']}: {n} WARN {what}: {hits[:1] or warns(rep)}")
    return hits


def expect_check(rep, name):
    c = [x for x in rep["checks"] if x["name"] == name]
    expect(len(c) == 1 and c[0]["ok"], f"rank {rep['rank']} {rep['fault']['name']}: {name} ({c[0]['detail'] if c else 'missing'})")


def expect_clean(rep):
    """A rank that finished its scenario: exit 0, fault steps all ok, plugin resources released."""
    tag = f"rank {rep['rank']} {rep['fault']['name']}"
    expect(rep["ok"] and rep["exit_code"] == 0 and rep["phase"] == "done",
           f"{tag}: report ok, exit_code 0, phase done (errors: {rep['errors']})")
    expect(all(s["ok"] for s in rep["fault"]["steps"]) and rep["fault"]["steps"], f"{tag}: every fault step ok")
    expect_check(rep, "fds returned after finalize")
    expect_check(rep, "no plugin threads left after dlclose")
    res = rep["resources"]
    if res["before_init"]["qps"] is not None:
        expect_check(rep, "QPs destroyed after finalize")
        expect_check(rep, "MRs released after finalize")


def refused_infos(run, role, name):
    """The listener's INFO lines about connections that did not prove the secret (count, last reason)."""
    return re.findall(REFUSED_INFO, run.out(role, f"{name}.log").read_text(errors="replace"))


def no_crash(run, role, name):
    log = run.out(role, f"{name}.log")
    text = log.read_text(errors="replace") if log.exists() else ""
    m = CRASH_TEXT.search(text)
    expect(m is None, f"{role} {name}: no crash/abort text in the driver log" + (f" (found '{m.group(0)}')" if m else ""))


def check(run):
    times = {}
    for name in SCENARIOS:
        for role in ("a", "b"):
            rc = run.rc(role, name)
            want = SIGKILL_STATUS if (name, role) == ("peer-death", "b") else 0
            expect(rc == want and (rc in DRIVER_EXIT_CODES or want == SIGKILL_STATUS),
                   f"{name}: rank {ROLE_RANK[role]} exit {rc} (expected {want})")
            no_crash(run, role, name)
            times[(name, role)] = int(run.text(role, f"{name}.ms"))
    for role in ("a", "b"):
        stderr = (run.dir / role / "stderr.log").read_text(errors="replace")
        killed = [l for l in stderr.splitlines() if re.search(CRASH_TEXT.pattern + "|Killed", l)]
        want = 1 if role == "b" else 0  # bash reports the one intended SIGKILL of peer-death
        expect(len(killed) == want and all("Killed" in l and "--rank 1" in l for l in killed),
               f"{role}: guest script stderr reports {want} killed process(es) and no crash: {killed}")

    # 6. Bad device index: getProperties / listen / connect -> ncclInvalidArgument, "out of range".
    for role in ("a", "b"):
        r = run.report(role, "bad-dev")
        expect_clean(r)
        expect(r["dev"] == 99 and r["properties"] is None and r["ndev"] == 2, f"rank {r['rank']} bad-dev: --dev 99 of {r['ndev']} devices")
        expect_step(r, "getProperties(99)", ncclInvalidArgument, max_ms=1000)
        expect_step(r, "listen(99)", ncclInvalidArgument, max_ms=1000, comm_null=True)
        expect_step(r, "connect(99)", ncclInvalidArgument, max_ms=1000, comm_null=True)
        for call in ("getProperties", "listen", "connect"):
            expect_warn(r, rf"NET/HA: {call}: device index 99 out of range \(2 devices\)", f"'{call}: ... out of range'", 1)
        expect(len(warns(r)) == 3, f"rank {r['rank']} bad-dev: no other WARN ({len(warns(r))} in all)")

    # 1. Bad handle, rejected locally at once; rank 0 undisturbed.
    r1 = run.report("b", "bad-handle")
    expect_clean(r1)
    for name, reason in (("connect with a corrupted handle magic", r"not an nccl-ha handle \(bad magic\)"),
                         ("connect with a handle of another version", r"handle version (\d+) \(this plugin speaks (\d+)\)"),
                         ("connect with a handle of a shorter length", r"handle length 64")):
        expect_step(r1, name, ncclInvalidArgument, max_ms=1000, comm_null=True, calls=1)
        expect_warn(r1, r"NET/HA: connect: rejecting handle: " + reason, f"'rejecting handle: {reason}'", 1)
    expect(len(warns(r1)) == 3, f"rank 1 bad-handle: only the 3 rejections WARNed ({warns(r1)})")
    r0 = run.report("a", "bad-handle")
    expect_clean(r0)
    expect_step(r0, "accept() undisturbed by the rejected handles", ncclSuccess, comm_null=True)
    expect(warns(r0) == [], f"rank 0 bad-handle: no WARN at the listener ({warns(r0)})")
    expect_check(r0, "fault bad-handle: a verified message crossed a new connection afterwards")

    # 2. Bad token (the handle's listener id flipped: the hello names another listener): the listener
    # closes the connection without a word (an INFO line), connect() errors out (bounded), accept()
    # stays usable.
    r1 = run.report("b", "bad-token")
    expect_clean(r1)
    s = expect_step(r1, "connect with a flipped token", ncclSystemError, comm_null=True,
                    max_ms=min(35000, HANDSHAKE_TIMEOUT_MS + SLACK_MS))
    expect_warn(r1, r"NET/HA: connect to 10\.30\.0\.1:\d+ on rxe0:1 failed: .*peer closed the connection",
                "'connect to ... failed: ... peer closed the connection'", 1)
    r0 = run.report("a", "bad-token")
    expect_clean(r0)
    expect(warns(r0) == [], f"rank 0 bad-token: no WARN at the listener ({warns(r0)})")
    infos = refused_infos(run, "a", "bad-token")
    expect(len(infos) == 1 and infos[0][0] == "1" and "token mismatch" in infos[0][1],
           f"rank 0 bad-token: one INFO 'closed 1 connection(s) from 10.30.0.2 that did not prove the job's secret "
           f"(last: ... token mismatch)': {infos}")
    expect_step(r0, "accept() returned NULL through the rejected connection", ncclSuccess, comm_null=True)
    expect_check(r0, "fault bad-token: a verified message crossed a new connection afterwards")

    # 3. closeListen before and during rank 1's handshake: connect() fails (bounded), no dead comm.
    r1 = run.report("b", "close-listen")
    expect_clean(r1)
    bound = HANDSHAKE_TIMEOUT_MS + SLACK_MS
    expect_step(r1, "connect to a listener closed before the connect", ncclSystemError, comm_null=True, max_ms=bound)
    expect_step(r1, "first connect() starts the handshake", ncclSuccess, comm_null=True, calls=1)
    expect_step(r1, "connect while the listener is closed mid-handshake", ncclSystemError, comm_null=True, max_ms=bound)
    expect_warn(r1, r"NET/HA: connect to 10\.30\.0\.1:\d+ on rxe0:1 failed: ", "'connect to ... failed' per failed connect", 2)
    expect_warn(r1, r"failed: peer reported: the listener was closed during the handshake",
                "'peer reported: the listener was closed during the handshake'", 1)
    r0 = run.report("a", "close-listen")
    expect_clean(r0)
    expect_step(r0, "closeListen right after shipping the handle", ncclSuccess, max_ms=1000)
    s = expect_step(r0, "closeListen with the peer's handshake in flight", ncclSuccess, max_ms=1000)
    expect("handshake connection accepted" in s["detail"],
           f"rank 0 close-listen: closeListen ran after the plugin accepted the handshake connection ({s['detail']})")
    expect_warn(r0, r"NET/HA: rejected a connection from 10\.30\.0\.2 on rxe0:1: the listener was closed during the handshake",
                "'rejected a connection ... the listener was closed during the handshake'", 1)
    expect(len(warns(r0)) == 1, f"rank 0 close-listen: no other WARN ({warns(r0)})")
    expect_check(r0, "fault close-listen: a verified message crossed a new connection afterwards")
    fds = r0["resources"]
    expect(fds["after_close"]["fds"] == fds["before_init"]["fds"],
           f"rank 0 close-listen: fds {fds['before_init']['fds']} before init, {fds['after_close']['fds']} after finalize")

    # 3b. closeListen while the listener holds a finished handshake's acknowledgement
    # (HA_NCCL_TEST_ACK_DELAY_MS=2000): the connector fails, it never gets a comm whose peer is gone.
    r1 = run.report("b", "close-listen-ack")
    expect_clean(r1)
    expect_step(r1, "connect while the listener is closed before acknowledging", ncclSystemError, comm_null=True,
                max_ms=HANDSHAKE_TIMEOUT_MS + SLACK_MS)
    expect_warn(r1, r"failed: peer reported: the listener was closed during the handshake",
                "'peer reported: the listener was closed during the handshake'", 1)
    expect_warn(r1, TEST_HOOKS_WARN, "'test hooks set' at init", 1)
    expect(len(warns(r1)) == 2, f"rank 1 close-listen-ack: no other WARN ({warns(r1)})")
    r0 = run.report("a", "close-listen-ack")
    expect_clean(r0)
    s = expect_step(r0, "closeListen while the acknowledgement is held", ncclSuccess, max_ms=1000)
    expect_warn(r0, r"NET/HA: test setting HA_NCCL_TEST_ACK_DELAY_MS: holding the acknowledgement of the connection "
                    r"from 10\.30\.0\.2 on rxe0:1 for 2000 ms",
                "'holding the acknowledgement' per accepted handshake (the closed one, the good one after)", 2)
    expect_warn(r0, r"NET/HA: rejected a connection from 10\.30\.0\.2 on rxe0:1: the listener was closed during the handshake",
                "'rejected a connection ... the listener was closed during the handshake'", 1)
    expect_warn(r0, TEST_HOOKS_WARN, "'test hooks set' at init", 1)
    expect(len(warns(r0)) == 4, f"rank 0 close-listen-ack: no other WARN ({warns(r0)})")
    expect_check(r0, "fault close-listen-ack: a verified message crossed a new connection afterwards")

    # 3c. A flood of bad connectors among good ones on one listener: not a byte sent back to any,
    # no WARN, one INFO line for the source (rate-limited: at most one a minute); every good
    # connection carries a verified message; silent ones are dropped after the admission deadline
    # (the handshake timeout here, 5 s); no fd is left behind.
    r1 = run.report("b", "flood")
    expect_clean(r1)
    counts = r1["fault"]["counts"]
    want = {k: FLOOD_ROUNDS for k in FLOOD_KINDS}
    want["silent-hold"] = FLOOD_HOLDERS
    want["good"] = FLOOD_ROUNDS
    expect(counts == want, f"rank 1 flood: connectors made {counts} (expected {want})")
    bad = sum(n for k, n in counts.items() if k != "good")
    s = expect_step(r1, "silent connectors dropped by the listener", ncclSuccess)
    held = [float(x) for x in re.search(r"held for \[([^]]*)\] ms", s["detail"]).group(1).split(", ")]
    expect(len(held) == FLOOD_HOLDERS and all(HANDSHAKE_TIMEOUT_MS - 500 <= ms <= HANDSHAKE_TIMEOUT_MS + SLACK_MS for ms in held),
           f"rank 1 flood: each silent connector dropped after the handshake timeout "
           f"({HANDSHAKE_TIMEOUT_MS} ms, slack {SLACK_MS} ms): {held}")
    expect(warns(r1) == [], f"rank 1 flood: no WARN at the connector ({warns(r1)})")
    s = expect_step(r1, "nothing sent to the bad connectors", ncclSuccess)
    expect("; 0 bytes from the listener to " in s["detail"], f"rank 1 flood: {s['detail']}")
    r0 = run.report("a", "flood")
    expect_clean(r0)
    expect_check(r0, "fault flood: every good connection carried a verified message")
    s = expect_step(r0, "no WARN for the bad connectors", ncclSuccess)
    expect(f"; {bad} bad connectors, 0 WARN lines" in s["detail"], f"rank 0 flood: {s['detail']}")
    expect(r0["plugin_warnings"] == 0, f"rank 0 flood: {r0['plugin_warnings']} WARN lines in all ({warns(r0)})")
    infos = refused_infos(run, "a", "flood")
    expect(1 <= len(infos) <= 2 and infos[0][0] == "1",
           f"rank 0 flood: one INFO line for the source 10.30.0.2 (at most one a minute; the first counts 1): {infos}")
    s = expect_step(r0, "no fd left by the connectors (listener open)", ncclSuccess)

    # 3d. connect() called once and never again, then finalize: the finished connection's QPs go
    # with the plugin (counted by `rdma resource`), no fd, thread or crash left behind.
    for role in ("a", "b"):
        r = run.report(role, "abandon-connect")
        expect_clean(r)
        expect(r["resources"]["before_init"]["qps"] is not None, f"rank {r['rank']} abandon-connect: QPs were counted")
        expect(warns(r) == [], f"rank {r['rank']} abandon-connect: no WARN ({warns(r)})")
    expect_step(run.report("a", "abandon-connect"), "accept() returns the connection rank 1 never takes", ncclSuccess)
    r1 = run.report("b", "abandon-connect")
    expect_step(r1, "connect() called once, never again", ncclSuccess, comm_null=True, calls=1)
    res = r1["resources"]
    expect(res["after_close"]["qps"] == res["before_init"]["qps"],
           f"rank 1 abandon-connect: QPs {res['before_init']['qps']} before init, {res['after_close']['qps']} after finalize")

    # 4. A message larger than the posted receive: ncclInvalidUsage naming both sizes.
    r1 = run.report("b", "oversize")
    expect_clean(r1)
    expect_step(r1, "isend of 65537 bytes into a 65536-byte receive", ncclInvalidUsage, comm_null=True, max_ms=5000)
    expect_warn(r1, r"NET/HA: send comm \S+ on rxe0:1: message of 65537 bytes \(tag 0\) is larger than the receive "
                    r"buffer of 65536 bytes",
                "naming 65537 and 65536 bytes", 1)
    r0 = run.report("a", "oversize")
    expect_clean(r0)
    expect_step(r0, "the posted receive stays pending, its buffer untouched", ncclSuccess)
    expect(warns(r0) == [], f"rank 0 oversize: no WARN at the receiver ({warns(r0)})")

    # 5. Peer SIGKILLed mid-stream: rank 0's isend/test -> error within 30 s, clean close after.
    log1 = run.out("b", "peer-death.log").read_text(errors="replace")
    expect("fault peer-death: received 20 messages: SIGKILL to myself now" in log1,
           "rank 1 peer-death: killed itself after 20 of 40 received messages")
    r0 = run.report("a", "peer-death")
    expect_clean(r0)
    s = step(r0, "isend/test after the peer died mid-stream")
    expect(s["code"] in (ncclRemoteError, ncclSystemError) and s["call"] in ("isend", "test"),
           f"rank 0 peer-death: {s['call']} returned {s['result']} ({s['code']})")
    gone = s["since_peer_gone_ms"]
    expect(gone is not None and gone < 30000,
           f"rank 0 peer-death: error {gone} ms after the peer's death was visible (bound 30000 ms); {s['detail']}")
    # The dead peer takes both paths with it: the comm finds no usable path (error completions, the
    # soft RTO or the unanswered standby heartbeats, whichever comes first) and says what failed.
    expect_warn(r0, r"NET/HA: (send|recv) comm \S+: no usable path left \(rxe0:1 failed: ", "'no usable path left' naming rxe0:1")
    expect(r0["peer_ok"] is None, "rank 0 peer-death: no result exchange with the dead peer")

    # 7. IPv6 handshakes (NCCL_SOCKET_FAMILY=AF_INET6, a ULA address on eth2): the handle carries
    # the IPv6 address, connect reaches it, the traffic passes.
    for role, mine in (("a", "fd00:aa::1"), ("b", "fd00:aa::2")):
        no_crash(run, role, "ipv6")
        rc = run.rc(role, "ipv6")
        r = run.report(role, "ipv6")
        expect(rc == 0 and r["ok"] and r["exit_code"] == 0 and r["phase"] == "done",
               f"ipv6: rank {r['rank']} exit {rc}, phase {r['phase']} (errors: {r['errors']})")
        log = run.out(role, "ipv6.log").read_text(errors="replace")
        pat = rf"NET/HA: nccl-ha .* \d+ device\(s\): .*; handshakes on {re.escape(mine)} \(eth2\);"
        expect(re.search(pat, log), f"ipv6: rank {r['rank']} logs 'handshakes on {mine} (eth2)'")
        expect(warns(r) == [], f"ipv6: rank {r['rank']} no WARN ({warns(r)})")
    log_a = run.out("a", "ipv6.log").read_text(errors="replace")
    log_b = run.out("b", "ipv6.log").read_text(errors="replace")
    expect(re.search(r"NET/HA: listening for \S+ on \[fd00:aa::1\]:\d+", log_a),
           "ipv6: rank 0 listens on [fd00:aa::1]:port (the handle's address)")
    expect(re.search(r"NET/HA: connected \S+ QP \d+ -> fd00:aa::1 QP \d+", log_b),
           "ipv6: rank 1 connected to fd00:aa::1")

    # 7b. Link-local IPv6 (only eth2's fe80:: address, NCCL_SOCKET_IFNAME==eth2): scoped end to end.
    for role in ("a", "b"):
        no_crash(run, role, "ipv6-link-local")
        rc = run.rc(role, "ipv6-link-local")
        r = run.report(role, "ipv6-link-local")
        expect(rc == 0 and r["ok"] and r["exit_code"] == 0 and r["phase"] == "done",
               f"ipv6-link-local: rank {r['rank']} exit {rc}, phase {r['phase']} (errors: {r['errors']})")
        log = run.out(role, "ipv6-link-local.log").read_text(errors="replace")
        expect(re.search(r"NET/HA: nccl-ha .* \d+ device\(s\): .*; handshakes on fe80::[0-9a-f:]+%eth2 \(eth2\);", log),
               f"ipv6-link-local: rank {r['rank']} logs 'handshakes on fe80::...%eth2 (eth2)'")
        expect(re.search(r"NET/HA: connected \S+ QP \d+ -> fe80::[0-9a-f:]+%eth2 QP \d+", log),
               f"ipv6-link-local: rank {r['rank']} connected to its peer's fe80:: address scoped to eth2")
        expect(warns(r) == [], f"ipv6-link-local: rank {r['rank']} no WARN ({warns(r)})")

    # 8. NCCL_SOCKET_IFNAME=nosuchif: init fails on both ranks with a WARN naming the variable and
    # what was seen; no silent 127.0.0.1.
    for role in ("a", "b"):
        no_crash(run, role, "no-ifname")
        rc = run.rc(role, "no-ifname")
        r = run.report(role, "no-ifname")
        tag = f"no-ifname: rank {r['rank']}"
        expect(rc == 3 and r["exit_code"] == 3 and r["phase"] == "init", f"{tag}: exit {rc} in phase {r['phase']} (expected 3 in init)")
        pe = r.get("plugin_error") or {}
        expect(pe.get("call") == "init" and pe.get("code") == ncclSystemError,
               f"{tag}: init returned ncclSystemError ({pe})")
        hits = [w for w in warns(r) if re.search(r"NET/HA: NCCL_SOCKET_IFNAME='nosuchif' matches no usable interface; "
                                                 r"seen: .*eth2 10\.30\.0\.\d \(not listed\)", w)]
        expect(len(hits) == 1 and len(warns(r)) == 1,
               f"{tag}: one WARN naming NCCL_SOCKET_IFNAME='nosuchif' and listing eth2 ({warns(r)})")
        expect(not any("127.0.0.1" in w and "not listed" not in w for w in warns(r)), f"{tag}: no 127.0.0.1 fallback")

    # 9. NCCL_IB_PKEY: index 0 taken and said, traffic passes; index 1 (empty) leaves every port out.
    for role in ("a", "b"):
        no_crash(run, role, "pkey")
        r = run.report(role, "pkey")
        tag = f"pkey: rank {r['rank']}"
        expect(run.rc(role, "pkey") == 0 and r["ok"] and r["phase"] == "done", f"{tag}: exit 0 with NCCL_IB_PKEY=0")
        log = run.out(role, "pkey.log").read_text(errors="replace")
        used = re.findall(r"NET/HA: (rxe\d:1): P_Key index 0 \(0xffff, NCCL_IB_PKEY\)", log)
        expect(sorted(used) == ["rxe0:1", "rxe1:1"], f"{tag}: INFO 'P_Key index 0 (0xffff, NCCL_IB_PKEY)' for {used}")
        qp = re.findall(r"NET/HA: (rxe\d:1) is Soft-RoCE: QP timeout 18, retry count 5", log)
        expect(sorted(qp) == ["rxe0:1", "rxe1:1"], f"{tag}: NCCL_IB_TIMEOUT=18, NCCL_IB_RETRY_CNT=5 taken ({qp})")
        rto = [w for w in warns(r) if re.search(r"HA_NCCL_RTO_MS=1000 is below twice the hardware retry window "
                                                 r"\(6442 ms = 4\.096 us x 2\^18 x \(5 \+ 1\)\)", w)]
        unhonoured = [w for w in warns(r) if re.search(r"NET/HA: NCCL settings this plugin does not honour: "
                                                       r"NCCL_IB_USE_INLINE=1 \(no inline data\)$", w)]
        expect(len(rto) == 1 and len(unhonoured) == 1 and len(warns(r)) == 2,
               f"{tag}: two WARNs: the soft RTO against that window, NCCL_IB_USE_INLINE=1 not honoured "
               f"(no inline data) ({warns(r)})")
        no_crash(run, role, "bad-pkey")
        r = run.report(role, "bad-pkey")
        tag = f"bad-pkey: rank {r['rank']}"
        expect(run.rc(role, "bad-pkey") == 3 and r["phase"] == "devices" and r["ndev"] == 0,
               f"{tag}: exit {run.rc(role, 'bad-pkey')} in phase {r['phase']}, {r['ndev']} devices (expected 3, devices, 0)")
        left = [w for w in warns(r) if re.search(r"NET/HA: skipping rxe\d:1: NCCL_IB_PKEY=1 names no P_Key in its table", w)]
        expect(len(left) == 2 and len(warns(r)) == 2, f"{tag}: one WARN per port left out ({warns(r)})")

    total = sum(max(times[(n, "a")], times[(n, "b")]) for n in SCENARIOS)
    for n in SCENARIOS:
        print(f"check: info: {n}: {max(times[(n, 'a')], times[(n, 'b')])} ms wall")
    expect(total < 300000, f"all scenarios took {total / 1000:.1f} s of driver wall time (< 300 s)")
