"""Check of the plugin-teardown VM test (plugin-teardown.guest.sh): retired QPs accept nothing,
finalize is bounded with QPs stuck on a dead port, finalize with comms still open releases
everything without a crash, a rank closing 5 s after its peer hears of it (no WARN), and NCCL's
abort with a host's both rails down closes and finalizes within 1 s.

Rank 0 ran in VM a, rank 1 in VM b; each run left NAME.rc / NAME.ms / NAME.json / NAME.log.
"""
import re

from check import expect, expect_each, fail
from failover_common import stats

FINALIZE_BOUND_US = 1_000_000  # issue #19's bound on close and finalize with dead ports (dead-rail, abort)
FINALIZE_OPEN_US = 2_500_000   # finalize-open: healthy ports, generous for the 1-vCPU guests
CRASH_TEXT = re.compile(r"Segmentation fault|core dumped|Aborted|terminate called|AddressSanitizer|"
                        r"UndefinedBehaviorSanitizer|runtime error:|double free|stack smashing|"
                        r"SIGSEGV|SIGABRT|SIGBUS|Illegal instruction|Bus error")


def no_crash(run, role, name):
    log = run.out(role, f"{name}.log")
    text = log.read_text(errors="replace") if log.exists() else ""
    m = CRASH_TEXT.search(text)
    expect(m is None, f"{role} {name}: no crash/abort text in the driver log" + (f" (found '{m.group(0)}')" if m else ""))
    return text


def finished(run, role, name):
    """(driver log text, report, "NAME: rank R") of a run that must have ended well."""
    text = no_crash(run, role, name)
    rep = run.report(role, name)
    tag = f"{name}: rank {rep['rank']}"
    expect(run.rc(role, name) == 0 and rep["ok"] and rep["phase"] == "done",
           f"{tag}: exit 0, phase done (errors: {rep['errors']})")
    return text, rep, tag


def step(rep, name):
    steps = {s["name"]: s for s in rep["fault"]["steps"]}
    if name not in steps:
        fail(f"rank {rep['rank']} {rep['fault']['name']}: no step '{name}' (steps: {list(steps)})")
    return steps[name]


def check_named(rep, prefix):
    c = [x for x in rep["checks"] if x["name"].startswith(prefix)]
    expect(len(c) == 1 and c[0]["ok"], f"rank {rep['rank']}: {prefix} ({c[0]['detail'] if c else 'missing'})")
    return c[0]


def warns(rep):
    return rep.get("plugin_warning_lines", [])


def finalize_us(rep):
    return rep["calls"]["finalize"]["max_us"]


def late_writes(run):
    for role in ("a", "b"):
        no_crash(run, role, "late-writes")
        rep = run.report(role, "late-writes")
        expect(run.rc(role, "late-writes") == 0 and rep["ok"] and rep["phase"] == "done",
               f"late-writes: rank {rep['rank']} exit 0, phase done (errors: {rep['errors']})")
    r0 = run.report("a", "late-writes")
    expect(any("HA_NCCL_TEST_REAPER_DELAY_MS=5000" in w for w in warns(r0)),
           "late-writes: rank 0's reaper delays every destruction by 5 s (the retired QPs stay alive meanwhile)")
    for i in (0, 1):
        check_named(r0, f"fault late-writes: message {i} verified before the close")
    s = step(r0, "closeRecv with 6 receives posted")
    expect(s["ok"] and s["code"] == 0, f"late-writes: rank 0 closeRecv returned {s['result']} after {s['ms']:.1f} ms")
    s = step(r0, "the closed comm's buffers stay poisoned while the peer sends")
    expect(s["ok"], f"late-writes: rank 0: nothing landed in the closed comm's registered buffers ({s['detail']})")
    r1 = run.report("b", "late-writes")
    s = step(r1, "sends into the closed receiver's clear-to-send entries fail or never complete")
    expect(s["ok"], f"late-writes: rank 1's sends after the close: {s['detail']}")
    m = re.search(r"; (\d+) posted, (\d+) completed", s["detail"])
    expect(m and int(m.group(1)) >= 1 and int(m.group(2)) == 0,
           f"late-writes: rank 1 really wrote into the closed comm's entries, none completed ({s['detail']})")


def finalize_open(run):
    for role in ("a", "b"):
        no_crash(run, role, "finalize-open")
        rep = run.report(role, "finalize-open")
        tag = f"finalize-open: rank {rep['rank']}"
        expect(run.rc(role, "finalize-open") == 0 and rep["ok"] and rep["phase"] == "done",
               f"{tag}: exit 0, phase done (errors: {rep['errors']})")
        for name in ("MRs released after finalize", "threads, fds and QPs back after the linger"):
            check_named(rep, name)
        text = run.out(role, "finalize-open.log").read_text(errors="replace")
        hits = re.findall(r"NET/HA: finalize: 16 comm\(s\) were never closed", text)
        expect(len(hits) == 1, f"{tag}: one WARN says finalize closed the 16 comms NCCL left open")
        expect("still held" not in text, f"{tag}: no path held by anything after finalize")
        took = re.search(r"NET/HA: finalize took .*", text)
        print(f"check: info: {tag}: {took.group(0) if took else 'no finalize INFO line'}")
        if run.out(role, "finalize-open.exit_ms").exists():
            print(f"check: info: {tag}: process exit {run.text(role, 'finalize-open.exit_ms')} ms after its report")
        for w in re.findall(r"NET/HA: (?:finalize: \d+ QP\(s\) not destroyed within|background reaper finished).*", text):
            print(f"check: info: {tag}: {w}")
        us = finalize_us(rep)
        expect(us <= FINALIZE_OPEN_US, f"{tag}: finalize took {us / 1000:.0f} ms (<= {FINALIZE_OPEN_US // 1000} ms)")


def dead_rail(run):
    handed = 0
    for role in ("a", "b"):
        text, rep, tag = finished(run, role, "dead-rail")
        check_named(rep, "fault dead-rail: messages flowed on every link")
        expect(re.search(r"NET/HA: (failover|failback) of \S+ comm \S+ rxe0:1 -> rxe1:1", text),
               f"{tag}: the comms failed over from the dead rail 0 to rail 1")
        close = step(rep, "close 64 comm pairs after the rail went down")
        us = finalize_us(rep)
        exit_ms = run.text(role, "dead-rail.exit_ms") if run.out(role, "dead-rail.exit_ms").exists() else "?"
        print(f"check: info: {tag}: close of 64 pairs {close['ms']:.0f} ms, finalize {us / 1000:.0f} ms, "
              f"process exit {exit_ms} ms after its report, linger {rep.get('linger_ms')}")
        expect(us <= FINALIZE_BOUND_US, f"{tag}: finalize returned within 1 s ({us / 1000:.0f} ms)")
        bg = re.findall(r"NET/HA: finalize: \d+ QP\(s\) not destroyed within .*", text)
        if bg:
            handed += 1
            expect(len(bg) == 1 and re.search(r"finalize: \d+ QP\(s\) not destroyed within 700 ms \(rxe0:1: \d+", bg[0]),
                   f"{tag}: one WARN accounts for the QPs left, naming rxe0:1 ({bg[0]})")
        if role == "a":  # lingered after dlclose until the background reaper was done
            if bg:
                expect(re.search(r"NET/HA: background reaper finished: \d+ QP\(s\) destroyed [\d.]+ s after finalize; "
                                 r"closed .*rxe0", text),
                       f"{tag}: the background reaper said at INFO that it finished and closed rxe0")
            after = rep["resources"]["after_dlclose"]
            before = rep["resources"]["before_init"]
            expect(after["threads"] <= before["threads"] and after["fds"] <= before["fds"],
                   f"{tag}: after the linger, threads {before['threads']} -> {after['threads']}, "
                   f"fds {before['fds']} -> {after['fds']} (the background closed everything)")
    expect(handed >= 1, f"dead-rail: QPs on the dead port outlived finalize's bound on {handed} rank(s) "
                        "(the scenario exercised the background hand-off)")
    text_b = run.out("b", "dead-rail.log").read_text(errors="replace")
    if "HA_NCCL_TEST_REAPER_DELAY_MS=5000: " in text_b:  # b exited with its background still busy
        expect(re.search(r"finalize: \d+ QP\(s\) not destroyed within", text_b) and
               "background reaper finished" not in text_b,
               "dead-rail: rank 1 handed QPs to the background and exited before it was done "
               "(its exit_ms is an exit with QPs left to the kernel)")


def late_close(run):
    """Quiet endings: rank 1 closed its ring 5 s after rank 0; rank 0's goodbye reached it."""
    for role in ("a", "b"):
        text, rep, tag = finished(run, role, "late-close")
        expect(not warns(rep), f"{tag}: no WARN from the plugin ({warns(rep)[:6]})")
        recs = stats(run, role, "late-close")
        for kind in ("send", "recv"):
            expect(any(r["event"] == "standby" and r["kind"] == kind and r.get("state") == "up" for r in recs),
                   f"{tag}: the {kind} comm was protected (a standby came up)")
        bad = [(r["event"], r["kind"], r.get("state"), r.get("why")) for r in recs
               if r["event"] in ("failover", "failback", "fatal") or (r["event"] == "standby" and r.get("state") != "up")]
        expect(not bad, f"{tag}: no failover, fatal or standby-down record ({bad[:6]})")
        expect("did not acknowledge the goodbye" not in text, f"{tag}: no goodbye went unanswered")
        if role == "b":
            heard = re.findall(r"NET/HA: (send|recv) comm \S+ on \S+: the peer closed the connection", text)
            expect(sorted(heard) == ["recv", "send"],
                   f"{tag}: the late rank heard the goodbye on both its comms ({heard})")


def abort(run):
    """NCCL's abort with dead ports: a's both rails down, then every comm closed with requests
    outstanding and the plugin finalized on both ranks, each call within 1 s."""
    for role in ("a", "b"):
        text, rep, tag = finished(run, role, "abort")
        close = [s for s in rep["fault"]["steps"] if s["name"].startswith("close 16 comm pairs")]
        expect(len(close) == 1 and close[0]["ok"], f"{tag}: every deregMr and close returned ncclSuccess "
                                                   f"({close[0]['detail'] if close else 'no close step'})")
        slowest = check_named(rep, "fault abort: every deregMr + close returned within 1 s")
        us = finalize_us(rep)
        print(f"check: info: {tag}: {close[0]['name']}: {close[0]['ms']:.0f} ms in all, {slowest['detail']}; "
              f"finalize {us / 1000:.0f} ms")
        took = re.search(r"NET/HA: finalize took .*", text)
        print(f"check: info: {tag}: {took.group(0) if took else 'no finalize INFO line'}")
        exit_ms = run.text(role, "abort.exit_ms") if run.out(role, "abort.exit_ms").exists() else "?"
        print(f"check: info: {tag}: process exit: {exit_ms} (ms after its report; the kernel's cleanup of "
              f"QPs on dead ports, not waited for beyond 20 s)")
        expect(us <= FINALIZE_BOUND_US, f"{tag}: finalize returned within 1 s ({us / 1000:.0f} ms)")
    text_a = run.out("a", "abort.log").read_text(errors="replace")
    expect(re.search(r"async event: port error", text_a), "abort: a saw its ports go down before the abort")
    expect(re.search(r"finalize: \d+ QP\(s\) not destroyed within 700 ms", text_a),
           "abort: a's QPs on the dead ports outlived finalize's bound (handed to the background)")


def check(run):
    expect_each("plugin-teardown", [
        ("late-writes", lambda: late_writes(run)),
        ("finalize-open", lambda: finalize_open(run)),
        ("late-close", lambda: late_close(run)),
        ("dead-rail", lambda: dead_rail(run)),
        ("abort", lambda: abort(run)),
    ])
