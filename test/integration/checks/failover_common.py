"""Shared checks of the failover VM tests (test/integration/failover-*.guest.sh, issue #4).

Every run NAME left, per VM, in <logdir>/{a,b}/out/: NAME.rc, NAME.ms, NAME.json (ha-net-driver),
NAME.log (its stderr with the plugin's NCCL INFO/WARN lines), NAME.stats.jsonl (HA_NCCL_STATS_FILE)
and, on the side that injected faults, NAME.fault_ms ("<start_ms> <end_ms> <fault.sh args>" per
fault, wall clock of that VM). Rank 0 (receiver of the --one-way stream) ran in VM a, rank 1 (the
sender) in VM b. The two VMs' clocks differ: times from b are moved to a's clock with the offset the
driver measured over its management connection (report "clock").

Bounds after a fault count from the end of fault.sh (when it returns, the port is DOWN or the netem
qdisc is in place), and events must not come before its start: fault.sh's own start-up takes
0.1-3 s on the TCG guests, which is no part of the plugin's reaction time.
"""
import json
import re

from check import expect, expect_exit, fail

# The plugin's defaults (the guest scripts do not change them).
HEARTBEAT_MS = 200
RTO_MS = 1000
FAILOVER_TIMEOUT_MS = 1000
# Scheduling slack on the 1-vCPU TCG guests (one verbs call can take 20-30 ms there, a process
# start 50-150 ms, and fault.sh itself runs for a few hundred ms).
SLACK_MS = 3000
# Bounds asserted by the tests (the benchmark reports the real figures against the tighter targets).
PORT_DOWN_STALL_BOUND_MS = RTO_MS + SLACK_MS          # a failover must not wait for more than one RTO
BLACK_HOLE_STALL_BOUND_MS = RTO_MS + FAILOVER_TIMEOUT_MS + SLACK_MS
# The hardware retry window of the plugin's Soft-RoCE QPs (timeout 17, retry count 6): 4.096 us x
# 2^17 x 7 tries. The soft RTO never kills the last path (issue #9), so a side that sees no port
# event of its own learns that its last path died from its retries running out.
HW_RETRY_WINDOW_MS = round(4.096e-3 * 2**17 * 7)
# After the last path died: the failover's bound ("2 s"), or the hardware window for a side
# without a local event, + slack.
FATAL_BOUND_MS = max(RTO_MS + FAILOVER_TIMEOUT_MS, HW_RETRY_WINDOW_MS) + SLACK_MS
STANDBY_DOWN_BOUND_MS = 3 * HEARTBEAT_MS + SLACK_MS
# After a failover the stream must run as before: no receive gap longer than the unfaulted run's
# longest gap + this (TCG jitter); gaps shorter than POST_FAILOVER_GAP_MIN_MS are not listed.
POST_FAILOVER_EXTRA_MS = 500
POST_FAILOVER_GAP_MIN_MS = 200

PRIMARY, STANDBY_PORT = "rxe0:1", "rxe1:1"
ncclSystemError = 2
STATS_KEYS = ("event", "time_unix_ms", "host", "pid", "comm", "comm_id", "peer", "kind", "primary", "standby_port", "active",
              "standby", "failovers", "replayed", "duplicates_dropped", "heartbeats_sent", "heartbeat_failures",
              "messages", "bytes_sent", "bytes_received", "last_stall_ms", "failbacks", "reprotections",
              "reprotect_attempts", "reprotect_reminders", "reprotect_dropped", "flush_reads", "flush_rebuilds", "flush_redirects")
INIT_KEYS = ("event", "time_unix_ms", "host", "pid", "plugin_version")
EVENT_KEYS = {"failover": ("from", "to", "cause", "stall_ms", "replayed_now"),
              "failback": ("from", "to", "cause", "stall_ms", "replayed_now"), "standby": ("state", "why"),
              "fatal": ("why",), "rescue": ("why",), "close": (),
              "failback_failed": ("from", "to", "why", "stage"),
              "resync": ("from", "to", "cause", "stall_ms", "replayed_now")}
CRASH_TEXT = re.compile(r"Segmentation fault|core dumped|Aborted|terminate called|AddressSanitizer|"
                        r"UndefinedBehaviorSanitizer|runtime error:|double free|stack smashing|"
                        r"SIGSEGV|SIGABRT|SIGBUS|Illegal instruction|Bus error")
FAILOVER_INFO = re.compile(r"NET/HA: failover of (send|recv) comm (\S+) (\S+) -> (\S+): cause (.+), "
                           r"replayed (\d+) message\(s\), stall ([\d.]+) ms")
STANDBY_INFO = re.compile(r"NET/HA: standby (\S+) of (send|recv) comm (\S+) is (\S+) \((.*)\)")
# Single path: "<kind> comm <ptr>: single path on <dev> (<why>)" (per comm), or as the plugin logs
# it once per device and kind: "<kind> comms on <dev>: single path (<why>)".
SINGLE_PATH_INFO = re.compile(r"NET/HA: (?P<kind>send|recv) (?:comm \S+: single path on (?P<dev1>\S+)|comms on "
                              r"(?P<dev2>\S+): single path) \((?P<why>.*)\)")
NO_PATH_WARN = re.compile(r"NET/HA: (send|recv) comm (\S+): no usable path left \((.+)\)")
DATA_KIND = {"a": "recv", "b": "send"}  # --one-way: b's send comm -> a's recv comm carry the stream
RANK = {"a": 0, "b": 1}


# ---------------------------------------------------------------- recorded files

def stats(run, role, name, inits=None):
    """The JSON lines of NAME.stats.jsonl, each checked for the documented keys; the per-process
    "init" records go to `inits` (a list, when given), not into the result."""
    path = run.out(role, f"{name}.stats.jsonl")
    if not path.exists():
        fail(f"{role} {name}: {path.name} is missing (HA_NCCL_STATS_FILE not written)")
    events = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except ValueError as err:
            fail(f"{role} {name}: {path.name} line {n} is not JSON ({err}): {line[:200]}")
        if e.get("event") == "init":
            missing = [k for k in INIT_KEYS if k not in e]
            if missing:
                fail(f"{role} {name}: {path.name} line {n}: init record misses keys {missing}")
            if inits is not None:
                inits.append(e)
            continue
        missing = [k for k in STATS_KEYS + EVENT_KEYS.get(e.get("event"), ()) if k not in e]
        if e.get("event") not in EVENT_KEYS or missing:
            fail(f"{role} {name}: {path.name} line {n}: event {e.get('event')!r}, missing keys {missing}")
        events.append(e)
    print(f"check: info: {role} {name}: {len(events)} stats events: "
          f"{', '.join(e['event'] + '/' + e['kind'] for e in events)}")
    return events


def data_comm(run, role, name, events=None):
    """(events of the comm that carried the stream on this side, its last event)."""
    events = stats(run, role, name) if events is None else events
    kind = DATA_KIND[role]
    comms = sorted({(e["pid"], e["comm"]) for e in events if e["kind"] == kind})
    expect(len(comms) == 1, f"{role} {name}: stats name exactly one {kind} comm (the stream's): {comms}")
    mine = [e for e in events if (e["pid"], e["comm"]) == comms[0]]
    return mine, mine[-1]


def faults(run, role, name):
    """[(start_ms, end_ms, args)] of the faults injected in VM role (its wall clock)."""
    out = []
    for line in run.text(role, f"{name}.fault_ms").splitlines():
        t0, t1, args = line.split(" ", 2)
        out.append((int(t0), int(t1), args))
    return out


def log_text(run, role, name):
    p = run.out(role, f"{name}.log")
    return p.read_text(errors="replace") if p.exists() else ""


def to_a_clock(rep_b, t_ms):
    """A wall-clock time of VM b, on VM a's clock (rep_b: b's driver report of the same run)."""
    return t_ms + rep_b["clock"]["peer_offset_ms"]


def on_a_clock(role, rep_b, t_ms):
    return t_ms if role == "a" else to_a_clock(rep_b, t_ms)


# ---------------------------------------------------------------- assertions

def expect_no_crash(run, name):
    for role in ("a", "b"):
        m = CRASH_TEXT.search(log_text(run, role, name))
        expect(m is None, f"{role} {name}: no crash/abort text in the driver log" + (f" (found '{m.group(0)}')" if m else ""))


HOME_SHARE = 0.9  # issue #19: of the packets once a rail is back for the failback's hold + 5 s


def counters(run, role, name):
    """[(unix_ms, [packets of rail 0, rail 1, ...])] (sent + received) of VM role's samples
    (NAME.counters: PL_COUNTERS in plugin-lib.sh)."""
    out = []
    for line in run.text(role, f"{name}.counters").splitlines():
        v = [int(x) for x in line.split()]
        out.append((v[0], [v[1 + 2 * r] + v[2 + 2 * r] for r in range((len(v) - 1) // 2)]))
    return out


def expect_home_share(run, name, fault_role, rail, after_ms):
    """On both hosts, at least HOME_SHARE of the packets (rxe counters) run on RAIL from AFTER_MS
    after FAULT_ROLE brought it back up (its one "rail-up RAIL" fault) to the end of the stream."""
    ups = [f for f in faults(run, fault_role, name) if f[2] == f"rail-up {rail}"]
    expect(len(ups) == 1, f"{name}: {fault_role}'s rail {rail} came back once: {ups}")
    offset = run.report("b", name)["clock"]["peer_offset_ms"]  # b's clock + offset = a's
    up_a = ups[0][1] + (0 if fault_role == "a" else offset)
    for role in ("a", "b"):
        since = up_a + after_ms - (0 if role == "a" else offset)  # on role's clock
        s = [x for x in counters(run, role, name) if x[0] >= since]
        expect(len(s) >= 4, f"{role} {name}: {len(s)} counter samples from {after_ms} ms after rail {rail} came back "
                            f"(at least 4: 2 s)")
        if len(s) < 2:
            continue
        delta = [b - a for a, b in zip(s[0][1], s[-1][1])]
        share = delta[rail] / max(1, sum(delta))
        expect(share >= HOME_SHARE, f"{role} {name}: {share:.1%} of {sum(delta)} packets on rail {rail} over the last "
                                    f"{(s[-1][0] - s[0][0]) / 1000:.1f} s (at least {HOME_SHARE:.0%}; per rail {delta})")


def profiler_events(run, role, name):
    """What the plugin told the driver's profiler stand-in (tools/ha-net-driver/profiler_standin.hpp)."""
    return run.report(role, name)["profiler"]


def expect_profiler_clean(run, name, closed=True):
    """Every profiler call of the plugin was one NCCL can take: a start only under a request still in
    flight, with nccl-ha's id and descriptor, an update or a stop only of an open event; with
    `closed`, every event it opened was ended."""
    for role in ("a", "b"):
        p = profiler_events(run, role, name)
        started = {k: v for k, v in p["started"].items() if v}
        print(f"check: info: {name}: rank {RANK[role]} profiler events started {started or 'none'}, "
              f"{p['stopped']} stopped, {p['updates']} updates, longest {p['longest_ms']:.0f} ms")
        expect(not p["errors"], f"{name}: rank {RANK[role]}: every profiler call valid ({p['errors'][:3]})")
        if closed:
            expect(p["open"] == 0, f"{name}: rank {RANK[role]}: no profiler event left open ({p['open']})")


def expect_stream_ok(run, name, min_seconds):
    """Both drivers exit 0; rank 0 verified every byte of every message rank 1 sent, each counted once."""
    expect_exit(run, name)
    a, b = run.report("a", name), run.report("b", name)
    for rep in (a, b):
        expect(rep["ok"] and "one_way=1" in rep["params"], f"{name}: rank {rep['rank']} report ok, --one-way stream")
    ia, ib = a["integrity"], b["integrity"]
    expect(ia["ok"] and ia["mismatches"] == 0 and ia["size_errors"] == 0 and ia["overruns"] == 0,
           f"{name}: rank 0 verified {ia['messages_received']} messages / {ia['bytes_received']} bytes byte for byte "
           f"(mismatches {ia['mismatches']}, size errors {ia['size_errors']}, overruns {ia['overruns']})")
    expect(ia["messages_received"] == ib["messages_sent"] > 0 and ia["bytes_received"] == ib["bytes_sent"],
           f"{name}: every message counted once: {ib['messages_sent']} sent by rank 1, {ia['messages_received']} "
           f"received by rank 0")
    expect(ia["messages_sent"] == 0 and ib["messages_received"] == 0, f"{name}: one way only (b -> a)")
    # The sender's clock bounds the stream's length (the receiver's phase may start later).
    t, tb = a["timeline"], b["timeline"]
    expect(tb["duration_ms"] >= min_seconds * 1000 and sum(t["recv_msgs"]) == ia["messages_received"],
           f"{name}: streamed for {tb['duration_ms'] / 1000:.1f} s (>= {min_seconds} s); timeline holds every receive")
    print(f"check: info: {name}: {ia['bytes_received'] / t['duration_ms'] * 1000 / 2**20:.1f} MiB/s, longest gap "
          f"between receives {t['max_gap_ms']:.0f} ms at +{t['max_gap_at_ms']:.0f} ms")
    expect_profiler_clean(run, name)
    return a, b


def expect_counters(role, name, last, rep, failovers):
    """The data comm's final counters against the driver's own count."""
    kind = DATA_KIND[role]
    want = rep["integrity"]["messages_received" if kind == "recv" else "messages_sent"]
    expect(last["event"] == "close", f"{role} {name}: the {kind} comm's last stats event is 'close' ({last['event']})")
    expect(last["failovers"] == failovers, f"{role} {name}: {kind} comm: {last['failovers']} failover(s) (expected {failovers})")
    expect(last["duplicates_dropped"] == 0, f"{role} {name}: {kind} comm: duplicates_dropped 0 ({last['duplicates_dropped']})")
    expect(last["replayed"] >= 0, f"{role} {name}: {kind} comm: replayed {last['replayed']}")
    expect(last["messages"] == want, f"{role} {name}: {kind} comm: the plugin completed {last['messages']} data messages, "
                                     f"the driver counted {want}")


def expect_baseline(run, name, min_seconds):
    """The unfaulted run: verified, and the standby QP was there all along (standby up, no failover).
    In a boot group it may be the stream of an earlier test of the boot (pl_shared_stream)."""
    if run.out("a", name + ".shared").exists():
        shared = run.text("a", name + ".shared")
        print(f"check: info: {name}: the stream {shared} ran in this boot (shared, pl_shared_stream)")
    a, b = expect_stream_ok(run, name, min_seconds)
    for role, rep in (("a", a), ("b", b)):
        events = stats(run, role, name)
        expect(not [e for e in events if e["event"] in ("failover", "fatal")], f"{role} {name}: no failover or fatal event")
        mine, last = data_comm(run, role, name, events)
        expect(last["primary"] == PRIMARY and last["standby_port"] == STANDBY_PORT and last["active"] == PRIMARY,
               f"{role} {name}: {DATA_KIND[role]} comm primary {last['primary']}, standby port {last['standby_port']}, "
               f"active {last['active']}")
        expect(last["standby"] == "up", f"{role} {name}: standby {last['standby']} at close (expected up)")
        expect_counters(role, name, last, rep, 0)
    expect_no_crash(run, name)
    return a, b


def stall_around(timeline, t_ms, window_ms):
    """Longest run of bins without a receive completion that overlaps [t, t + window] (a's clock),
    in ms (10 ms resolution), and where it started (ms after the phase start)."""
    bin_ms = timeline["bin_ms"]
    msgs = timeline["recv_msgs"]
    lo = int((t_ms - timeline["start_unix_ms"]) // bin_ms)
    hi = int((t_ms + window_ms - timeline["start_unix_ms"]) // bin_ms)
    best, best_at, i = 0, None, 0
    while i < len(msgs):
        if msgs[i]:
            i += 1
            continue
        j = i
        while j < len(msgs) and not msgs[j]:
            j += 1
        if j > lo and i <= hi and (j - i) > best:
            best, best_at = j - i, i
        i = j
    return best * bin_ms, (best_at or 0) * bin_ms


def gaps(timeline, min_ms):
    """[(start ms after the phase start, length ms)] of the runs of bins without a receive completion
    of at least min_ms, excluding the one before the first receive."""
    bin_ms, msgs = timeline["bin_ms"], timeline["recv_msgs"]
    out, i = [], 0
    first = next((k for k, v in enumerate(msgs) if v), len(msgs))
    i = first
    while i < len(msgs):
        if msgs[i]:
            i += 1
            continue
        j = i
        while j < len(msgs) and not msgs[j]:
            j += 1
        if j < len(msgs) and (j - i) * bin_ms >= min_ms:
            out.append((i * bin_ms, (j - i) * bin_ms))
        i = j
    return out


def received_between(timeline, t0_ms, t1_ms):
    """Messages whose receive completed in [t0, t1] (a's clock, bin resolution)."""
    bin_ms = timeline["bin_ms"]
    lo = max(0, int((t0_ms - timeline["start_unix_ms"]) // bin_ms))
    hi = int((t1_ms - timeline["start_unix_ms"]) // bin_ms)
    return sum(timeline["recv_msgs"][lo:hi + 1])


def check_failover(run, fault_role, min_seconds, stall_bound_ms, cause_re=None, baseline="baseline", name="fault"):
    """One fault on fault_role mid-stream -> exactly one failover per data comm, all verified."""
    base_a, _ = expect_baseline(run, baseline, min_seconds)
    a, b = expect_stream_ok(run, name, min_seconds)
    fs = faults(run, fault_role, name)
    expect(len(fs) == 1, f"{name}: one fault injected on {fault_role}: {fs}")
    (f0, f1, what), = fs
    t_start, t_fault = on_a_clock(fault_role, b, f0), on_a_clock(fault_role, b, f1)
    t = a["timeline"]
    print(f"check: info: {name}: '{what}' on {fault_role} at +{t_fault - t['start_unix_ms']:.0f} ms of the stream "
          f"(fault.sh took {f1 - f0} ms and returned then; clock offset b-a {b['clock']['peer_offset_ms']:.1f} ms +- "
          f"{b['clock']['rtt_ms'] / 2:.1f})")
    firsts = []
    for role, rep in (("a", a), ("b", b)):
        events = stats(run, role, name)
        mine, last = data_comm(run, role, name, events)
        kind = DATA_KIND[role]
        fo = [e for e in mine if e["event"] == "failover"]
        expect(len(fo) == 1, f"{role} {name}: exactly one failover event for the {kind} comm ({len(fo)})")
        e = fo[0]
        expect(e["from"] == PRIMARY and e["to"] == STANDBY_PORT, f"{role} {name}: {kind} comm failed over {e['from']} -> {e['to']}")
        if cause_re:
            print(f"check: info: {role} {name}: cause '{e['cause']}'")
        else:
            expect(e["cause"], f"{role} {name}: failover cause '{e['cause']}'")
        at = on_a_clock(role, b, e["time_unix_ms"])
        firsts.append((at, role, e))
        expect(t_start - 50 <= at <= t_fault + stall_bound_ms,
               f"{role} {name}: failover {at - t_fault:.0f} ms after the fault (bound {stall_bound_ms} ms); "
               f"plugin stall {e['stall_ms']} ms, replayed {e['replayed_now']}")
        expect(not [x for x in mine if x["event"] == "fatal"], f"{role} {name}: no fatal event")
        expect(last["active"] == STANDBY_PORT, f"{role} {name}: {kind} comm ends active on {last['active']} (the standby)")
        expect_counters(role, name, last, rep, 1)
        info = [m for m in FAILOVER_INFO.finditer(log_text(run, role, name)) if m.group(1) == kind]
        expect(len(info) == 1 and info[0].group(3) == PRIMARY and info[0].group(4) == STANDBY_PORT,
               f"{role} {name}: one INFO line 'failover of {kind} comm ... {PRIMARY} -> {STANDBY_PORT}': "
               f"{[m.group(0) for m in info]}")
        expect(not NO_PATH_WARN.search(log_text(run, role, name)), f"{role} {name}: no 'no usable path' WARN")
    if cause_re:
        # The side that detected the fault names the detector; the other one follows its peer (the
        # stats are written when each side's switch is complete, so their order says nothing).
        causes = [f"{r}: {e['cause']}" for _, r, e in firsts]
        driven = [e for _, _, e in firsts if re.search(cause_re, e["cause"], re.I)]
        followers = [e for _, _, e in firsts if not re.search(cause_re, e["cause"], re.I)]
        expect(driven, f"{name}: a failover driven by '{cause_re}': {causes}")
        expect(all(re.search(r"peer", e["cause"], re.I) for e in followers),
               f"{name}: any other side followed its peer (no port event in this fault): {causes}")
    stall, stall_at = stall_around(t, t_start, t_fault - t_start + stall_bound_ms)
    base = base_a["timeline"]["max_gap_ms"]
    print(f"check: info: {name}: receive stall around the fault {stall} ms (bins) at +{stall_at} ms, longest gap "
          f"{t['max_gap_ms']:.0f} ms; baseline longest gap {base:.0f} ms -> excess {stall - base:.0f} ms")
    expect(stall <= stall_bound_ms, f"{name}: receives stalled {stall} ms around the fault (bound {stall_bound_ms} ms)")
    after = received_between(t, t_fault + stall_bound_ms, t["start_unix_ms"] + t["duration_ms"])
    expect(after > 0, f"{name}: {after} messages received on the standby after the failover")
    # Transparent means the stream on the standby runs as before: no further stall (from re-protection
    # attempts, heartbeats, ...) longer than the unfaulted run's longest gap + POST_FAILOVER_EXTRA_MS.
    t_done = max(f[0] for f in firsts)
    later = [(at, n) for at, n in gaps(t, POST_FAILOVER_GAP_MIN_MS) if t["start_unix_ms"] + at > t_done + 100]
    bound = base + POST_FAILOVER_EXTRA_MS
    expect(all(n <= bound for _, n in later),
           f"{name}: after the failover no receive gap above {bound:.0f} ms (unfaulted longest {base:.0f} ms + "
           f"{POST_FAILOVER_EXTRA_MS}); gaps >= {POST_FAILOVER_GAP_MIN_MS} ms at +ms: {later}")
    expect_no_crash(run, name)
    return a, b


def check_fatal(run, name, t_last_fault, a, b, first_fault=None):
    """Both drivers ended with ncclSystemError from the plugin, within the bound after the last
    path died (t_last_fault: the end of its fault.sh, a's clock), not before first_fault (the start
    of the first fault.sh), with a WARN naming what failed and a fatal stats event."""
    for role, rep in (("a", a), ("b", b)):
        rc = run.rc(role, name)
        expect(rc == 3, f"{role} {name}: driver exit {rc} (expected 3: plugin error; 4 would be a hang)")
        pe = rep["plugin_error"]
        expect(pe is not None and pe["code"] == ncclSystemError and pe["phase"] == "integrity",
               f"{role} {name}: {pe and pe['call']} returned {pe and pe['result']} in the integrity phase")
        at = on_a_clock(role, b, rep["error_unix_ms"])
        lo = first_fault if first_fault is not None else t_last_fault
        expect(lo - 50 <= at <= t_last_fault + FATAL_BOUND_MS,
               f"{role} {name}: the error came {at - t_last_fault:+.0f} ms from the end of the fault.sh that took "
               f"the last path ({at - lo:.0f} ms after the first fault.sh started; bound {FATAL_BOUND_MS} ms "
               f"after that end)")
        warns = [w for w in rep["plugin_warning_lines"] if NO_PATH_WARN.search(w)]
        expect(warns, f"{role} {name}: WARN 'no usable path left (...)': {warns[:1] or rep['plugin_warning_lines'][:3]}")
        events = stats(run, role, name)
        mine, _ = data_comm(run, role, name, events)
        fatal = [e for e in mine if e["event"] == "fatal"]
        expect(len(fatal) == 1 and fatal[0]["why"], f"{role} {name}: one fatal stats event: {fatal[:1]}")
        expect(rep["integrity"]["mismatches"] == 0 and rep["integrity"]["size_errors"] == 0,
               f"{role} {name}: what arrived before the end was verified")
    expect_profiler_clean(run, name, closed=False)
    expect_no_crash(run, name)


# ---------------------------------------------------------------- Prometheus snapshot

PROM_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def prom(path, what):
    """Parses a Prometheus text exposition file: {(name, frozenset(labels.items())): value} and
    {name: type}. Fails on a malformed line, a sample without # TYPE, or a repeated series."""
    if not path.exists():
        fail(f"{what}: {path.name} is missing")
    samples, types, helps = {}, {}, set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("# HELP "):
            helps.add(line.split(" ", 3)[2])
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in ("counter", "gauge", "untyped", "summary", "histogram"):
                fail(f"{what}: {path.name} line {n}: bad TYPE line {line!r}")
            types[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = PROM_SAMPLE.match(line)
        if not m:
            fail(f"{what}: {path.name} line {n} is no sample: {line!r}")
        name, body, value = m.groups()
        labels = {}
        pos = 0
        while body and pos < len(body):
            lm = PROM_LABEL.match(body, pos)
            if not lm:
                fail(f"{what}: {path.name} line {n}: malformed labels {body!r}")
            labels[lm.group(1)] = re.sub(r"\\(.)", lambda x: {"n": "\n"}.get(x.group(1), x.group(1)), lm.group(2))
            pos = lm.end()
        if name not in types or name not in helps:
            fail(f"{what}: {path.name} line {n}: {name} has no # TYPE / # HELP before it")
        key = (name, frozenset(labels.items()))
        if key in samples:
            fail(f"{what}: {path.name} line {n}: series repeated: {line!r}")
        try:
            samples[key] = float(value)
        except ValueError:
            fail(f"{what}: {path.name} line {n}: value {value!r} is no number")
    return samples, types


def prom_value(samples, name, **labels):
    """The value of the one sample of `name` whose labels include `labels` (None: no such sample)."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    if len(found) > 1:
        fail(f"{name}{labels}: {len(found)} samples match")
    return found[0] if found else None
