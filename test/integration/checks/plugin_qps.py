"""plugin-qps: several QPs per path as net_ib has them (NCCL_IB_QPS_PER_CONNECTION,
NCCL_IB_SPLIT_DATA_ON_QPS), on real Soft-RoCE QPs. a is rank 0 (the listener, the receiver), b rank 1
(the connector, the sender); each case a --one-way stream b -> a on rxe0 (standby rxe1), sizes 8 B,
4 KiB, 64 KiB and 1 MiB, groups of 4, 8 in flight (plugin-qps.guest.sh). Per case and side:

- the stream: both drivers exit 0, rank 0 verified every byte, every message counted once (the data
  comms' counters agree with the drivers'), no crash; rr and split: exactly one failover of each
  data comm (rail 0 pulled on a at 3 s), re-protected after the rail-up at 6 s, still on the standby
  port at the end (failback off); one and min: no failover;
- the log: every connect / accept INFO line ends its "(tc N sl M)" with " K QPs" (k > 1) and " split"
  (splitting), nothing for k = 1; the settings line names HA_NCCL_IB_QPS_PER_CONNECTION and
  HA_NCCL_IB_SPLIT_DATA_ON_QPS as this side set them; no WARN calls them not honoured;
- the QPs (CASE.qps.jsonl: `rdma -j resource show qp` samples of the driver's QPs while it
  streams): before the fault, the RC QPs in RTS on rxe0 (the primaries) and rxe1 (the standbys) are
  k times those of `one` (the same driver and comms; in `one` one per comm and port, the comms
  counted in the stats records); after the re-protection, rxe0's are a multiple of k again;
- the wire (CASE.pcap, each side's capture of both rails; tcpdump in the guests drops packets under
  load, so proportions and presence, not exact counts): the data writes b sends (RDMA WRITE FIRST /
  ONLY, with or without immediate data, each with its RETH; control writes, whose immediate has the
  top bit set, and retransmissions left out):
    one    every 4 KiB / 64 KiB / 1 MiB write to one QP (the one the accept line names) on rail 0,
           none on rail 1; each 1 MiB message one 1048576-byte write
    rr     4 destination QPs on rail 0 (before the fault) and 4 on rail 1 (after it), each with at
           least 15 % of the rail's writes; 1 MiB messages as 1048576-byte writes; no split part
    split  1 MiB messages as 262144-byte writes, 64 KiB as 16384, 4 KiB as 1024, on 4 QPs per rail
           with a fair share each; no 1048576-, 65536- or 4096-byte write; zero-length writes with
           immediate data (the 8 B messages' empty parts) on 3 of the 4 QPs, never on the fourth
           (QP 0); the parts' target addresses give each QP one part index, 0..3, the part at
           offset 0 on QP 0 (on rail 0 the QP the accept line names): part j at j * 262144 on QP j
    calm   as split, on rail 0 only: the same stream without a fault
    min    as rr with 2 QPs, no fault: a asks for 4 and a split, b for 2 (HA_NCCL_IB_QPS_PER_CONNECTION=2
           over NCCL_IB_QPS_PER_CONNECTION=8) without: the smaller count, no split
"""
import json
import re
from collections import Counter, namedtuple

from check import expect, expect_each, fail
from failover_common import (STANDBY_PORT, data_comm, expect_counters, expect_no_crash, expect_stream_ok, faults,
                             log_text, stats)
from plugin_qos import SENDER, W_FIRST, W_ONLY, W_ONLY_IMM, pcap_packets

# case: (QPs per path both sides use, split, --min-seconds, faulted)
CASES = {
    "one": (1, False, 4, False),
    "rr": (4, False, 12, True),
    "split": (4, True, 12, True),
    "calm": (4, True, 4, False),
    "min": (2, False, 4, False),
}
# case: {side: (HA_NCCL_IB_QPS_PER_CONNECTION, HA_NCCL_IB_SPLIT_DATA_ON_QPS) on its settings line}
SETTINGS = {
    "one": {"a": (1, 0), "b": (1, 0)},
    "rr": {"a": (4, 0), "b": (4, 0)},
    "split": {"a": (4, 1), "b": (4, 1)},
    "calm": {"a": (4, 1), "b": (4, 1)},
    "min": {"a": (4, 1), "b": (2, 0)},
}
BIG_SIZES = (4096, 65536, 1048576)  # the stream's sizes but 8 B (--sizes 8,4K,64K,1M)
FAIR_SHARE = 0.6  # of 1/k: each QP's least share of a rail's data writes (15 % of 4, 30 % of 2)
MIN_WRITES_PER_QP = 5  # captured data writes per rail and QP, at least, for a judgement of shares
MAPPING_AGREEMENT = 0.95
CTL_IMM = 0x80000000  # src/plugin/core/rdma_records.hpp kCtlImm: a control write's immediate
CONNECT_LINE = re.compile(r"NET/HA: (?:connected|accepted) .*\(tc \d+ sl \d+\)(.*)$")
ACCEPTED = re.compile(r"NET/HA: accepted on rxe0:1 QP (\d+) <- QP \d+")
SETTINGS_LINE = re.compile(r"NET/HA: settings: .*$", re.M)
QPS_SETTING = re.compile(r"(?<!\S)HA_NCCL_IB_QPS_PER_CONNECTION=(\S+)")
SPLIT_SETTING = re.compile(r"(?<!\S)HA_NCCL_IB_SPLIT_DATA_ON_QPS=(\S+)")
NOT_HONOURED = re.compile(r"does not honour|QPS_PER_CONNECTION|SPLIT_DATA_ON_QPS")

Write = namedtuple("Write", "t rail qpn op length va imm")


def chunk(size, k):
    """A split part's length: net_ib's ceil(ceil(size / k) / 128) * 128."""
    return -(-(-(-size // k)) // 128) * 128


def tail_of(k, split):
    return "" if k == 1 else f" {k} QPs" + (" split" if split else "")


# ---------------------------------------------------------------- the wire

def data_writes(packets):
    """Every RDMA write b sent (source: b's rail addresses) that opens a message or a part of one, in
    capture order: BTH opcode WRITE FIRST or WRITE ONLY (with or without immediate data), each with its
    RETH (target address, length) and, for ONLY with immediate, the immediate data; control writes
    (kCtlImm set) are left out, and each packet counts once (a retransmission repeats the
    destination QP and the PSN)."""
    seen, out = set(), []
    for t, src, _dst, _tos, qpn, h in packets:
        if src not in SENDER or len(h) < 28 or h[0] not in (W_FIRST, W_ONLY, W_ONLY_IMM):
            continue
        rail = int(src.split(".")[1]) - 20
        key = (rail, qpn, int.from_bytes(h[9:12], "big"))
        if key in seen:
            continue
        seen.add(key)
        imm = int.from_bytes(h[28:32], "big") if h[0] == W_ONLY_IMM and len(h) >= 32 else None
        if imm is not None and imm & CTL_IMM:
            continue
        out.append(Write(t, rail, qpn, h[0], int.from_bytes(h[24:28], "big"), int.from_bytes(h[12:20], "big"), imm))
    return out


def part_indices(parts, length, k):
    """{QP: part index} from the target addresses of the `length`-byte parts on one rail, and the
    share of the votes that agree with it. Two parts close in capture order whose addresses differ
    by d * length (0 < |d| < k) are parts of one receive buffer (a buffer's parts start at its
    address + j * length: the driver's buffers are 1 MiB + 4 KiB apart, so parts of different
    buffers never differ by such a multiple): they vote that their QPs' indices differ by d."""
    votes = []
    for i, x in enumerate(parts):
        for y in parts[i + 1:i + 2 * k]:
            d, r = divmod(y.va - x.va, length)
            if y.qpn != x.qpn and r == 0 and 0 < abs(d) < k:
                votes.append((x.qpn, y.qpn, d))
    if not votes:
        return {}, 0.0, 0
    ref = Counter(w.qpn for w in parts).most_common(1)[0][0]
    idx = {ref: 0}
    for q in {w.qpn for w in parts} - {ref}:
        ds = Counter([d for a, b, d in votes if (a, b) == (ref, q)] + [-d for a, b, d in votes if (a, b) == (q, ref)])
        if ds:
            idx[q] = ds.most_common(1)[0][0]
    low = min(idx.values())
    idx = {q: j - low for q, j in idx.items()}
    agree = sum(1 for a, b, d in votes if a in idx and b in idx and idx[b] - idx[a] == d)
    return idx, agree / len(votes), len(votes)


def accepted_qp(run, name):
    """a's receive comm's QP on rxe0 as its accept INFO line names it (QP 0 of the primary path)."""
    qps = set(ACCEPTED.findall(log_text(run, "a", name)))
    expect(len(qps) == 1, f"a {name}: one 'accepted on rxe0:1 QP N' line names the stream's primary QP ({sorted(qps)})")
    return int(next(iter(qps)))


def expect_wire(run, name, role, k, split, faulted, qp0_rail0):
    tag = f"{name}: {role}'s capture"
    log = run.out(role, f"{name}.tcpdump.log")
    if log.exists():
        said = [line for line in log.read_text(errors="replace").splitlines() if "dropped" in line or "captured" in line]
        print(f"check: info: {tag}: tcpdump: {'; '.join(said)}")
    ws = data_writes(pcap_packets(run.out(role, f"{name}.pcap")))
    lengths = {chunk(s, k) for s in BIG_SIZES} if split else set(BIG_SIZES)
    largest = chunk(1048576, k) if split else 1048576
    # Split: no whole message above 8 B; otherwise no part of a split message (for any k of 2..8).
    forbidden = set(BIG_SIZES) if split else {chunk(s, j) for s in BIG_SIZES for j in range(2, 9)}
    bad = Counter(w.length for w in ws if w.length in forbidden)
    expect(not bad, f"{tag}: no data write of the lengths {'a split leaves whole' if split else 'of split parts'} "
                    f"({sorted(forbidden)}): found {dict(bad) or 'none'}")
    empty = [w for w in ws if w.length == 0 and w.op == W_ONLY_IMM and w.imm is not None]
    if not split:
        expect(not empty, f"{tag}: no zero-length data write with immediate data (nothing is split): {len(empty)}")
    for rail in (0, 1):
        big = [w for w in ws if w.rail == rail and w.length in lengths]
        per_qp = Counter(w.qpn for w in big)
        if rail == 1 and not faulted:
            expect(not big, f"{tag}: no data write on rail 1 (no failover): {len(big)} to QPs {sorted(per_qp)}")
            continue
        when = "before the fault" if faulted and rail == 0 else "after the failover" if faulted else "the stream"
        expect(len(per_qp) == k and len(big) >= MIN_WRITES_PER_QP * k,
               f"{tag}: rail {rail} ({when}): the writes of {sorted(lengths)} bytes go to {k} destination QP(s) "
               f"(found {len(per_qp)}: {dict(per_qp)}; {len(big)} writes, at least {MIN_WRITES_PER_QP * k} needed)")
        if k > 1:
            least = FAIR_SHARE / k
            shares = {q: n / len(big) for q, n in per_qp.items()}
            expect(all(s >= least for s in shares.values()),
                   f"{tag}: rail {rail}: each QP carries a fair share of them (at least {least:.0%}): "
                   + ", ".join(f"QP {q} {s:.0%}" for q, s in sorted(shares.items())))
        n_largest = sum(1 for w in big if w.length == largest)
        expect(n_largest > 0, f"{tag}: rail {rail}: 1 MiB messages as {largest}-byte writes ({n_largest})")
        if rail == 0 and qp0_rail0 is not None:
            expect(qp0_rail0 in per_qp, f"{tag}: rail 0: QP {qp0_rail0} (the accept line's) among the data QPs "
                                        f"{sorted(per_qp)}")
        if not split:
            continue
        z = Counter(w.qpn for w in empty if w.rail == rail)
        expect(len(z) == k - 1 and set(z) <= set(per_qp),
               f"{tag}: rail {rail}: zero-length writes with immediate data (the 8 B messages' empty parts) on "
               f"{k - 1} of the {k} data QPs (found {dict(z)}; data QPs {sorted(per_qp)})")
        first = (set(per_qp) - set(z)).pop() if len(set(per_qp) - set(z)) == 1 else None
        parts = [w for w in big if w.length == largest]
        idx, agree, n = part_indices(parts, largest, k)
        print(f"check: info: {tag}: rail {rail}: part index by QP {idx} ({n} votes of neighbouring parts, "
              f"{agree:.1%} agree)")
        expect(sorted(idx.values()) == list(range(k)) and agree >= MAPPING_AGREEMENT,
               f"{tag}: rail {rail}: 1 MiB messages in groups of {k} parts, each QP always the same part "
               f"(part index by QP {idx}, {agree:.1%} of {n} votes agree; at least {MAPPING_AGREEMENT:.0%})")
        expect(first is not None and idx.get(first) == 0,
               f"{tag}: rail {rail}: the part at offset 0 goes to QP {[q for q, j in idx.items() if j == 0]}, the QP "
               f"without zero-length parts ({first}): QP 0")
        if rail == 0 and qp0_rail0 is not None:
            expect(first == qp0_rail0, f"{tag}: rail 0: QP 0 is the accept line's QP {qp0_rail0} ({first})")


# ---------------------------------------------------------------- the QPs

def qp_samples(run, role, name):
    """[(start, end, {device: RC QPs in RTS})] of CASE.qps.jsonl, the times on a's clock. A QP is the
    driver's when the thread that created it is one of its threads, or when it has no pid and no
    comm (its creating thread has exited), as ha-net-driver's count_owned counts them."""
    offset = 0.0 if role == "a" else run.report("b", name)["clock"]["peer_offset_ms"]
    out = []
    for n, line in enumerate(run.text(role, f"{name}.qps.jsonl").splitlines(), 1):
        try:
            s = json.loads(line)
        except ValueError as e:
            fail(f"{role} {name}: {name}.qps.jsonl line {n} is no JSON ({e}): {line[:160]}")
        if s["qps"] is None:
            print(f"check: info: {role} {name}: sample {n}: `rdma resource show qp` said nothing")
            continue
        tids = set(s["tids"])
        counts = Counter()
        for q in s["qps"]:
            mine = q["pid"] in tids if "pid" in q else "comm" not in q
            if mine and q.get("type") == "RC" and q.get("state") == "RTS":
                counts[q.get("ifname")] += 1
        out.append((s["unix_ms"] + offset, s["end_ms"] + offset, counts))
    expect(out, f"{role} {name}: QP samples while the stream ran ({len(out)})")
    return out


def before_fault(run, name, samples):
    """The samples taken before a's rail-down started (all of them in a case without faults)."""
    fs = [f for f in faults(run, "a", name) if f[2] == "rail-down 0"] if CASES[name][3] else []
    return [s for s in samples if not fs or s[1] < fs[0][0]]


def rts_before_fault(run, role, name):
    """{device: the most RC QPs in RTS of the driver in a sample before the fault}, every sample's counts."""
    pre = before_fault(run, name, qp_samples(run, role, name))
    expect(pre, f"{role} {name}: QP samples before the fault ({len(pre)})")
    seen = [dict(c) for _, _, c in pre]
    print(f"check: info: {role} {name}: the driver's RC QPs in RTS per sample before the fault: {seen}")
    return {dev: max(c[dev] for _, _, c in pre) for dev in ("rxe0", "rxe1")}


def expect_qp_counts(run, name, role, k):
    got = rts_before_fault(run, role, name)
    if name == "one":
        comms = {(e["pid"], e["comm"]) for e in stats(run, role, name)}
        expect(got["rxe0"] == got["rxe1"] == len(comms) > 0,
               f"{role} {name}: one QP per path: {got['rxe0']} RC QPs in RTS on rxe0 (primaries) and {got['rxe1']} on "
               f"rxe1 (standbys) for the {len(comms)} comm(s) of the stats records")
        return
    base = rts_before_fault(run, role, "one")
    expect(all(got[dev] == k * base[dev] > 0 for dev in ("rxe0", "rxe1")),
           f"{role} {name}: {k} QPs per path: RC QPs in RTS on rxe0 {got['rxe0']}, on rxe1 {got['rxe1']} before the "
           f"fault (expected {k} x those of case one: {k * base['rxe0']}, {k * base['rxe1']})")
    if not CASES[name][3]:
        return
    ups = [f for f in faults(run, "a", name) if f[2] == "rail-up 0"]
    # The stream's comms close at its end: the last samples may show none (or only some) left.
    late = [s for s in qp_samples(run, role, name) if ups and s[0] > ups[0][1] + 2000 and s[2]["rxe0"] > 0]
    expect(late, f"{role} {name}: QP samples from 2 s after rail 0 came back with QPs on rxe0 ({len(late)})")
    n = max(s[2]["rxe0"] for s in late) if late else 0
    expect(n >= k and n % k == 0, f"{role} {name}: after the re-protection on rail 0, {n} RC QPs in RTS on rxe0 "
                                  f"(a positive multiple of {k}: every path there has {k})")


# ---------------------------------------------------------------- the case

def check_case(run, name):
    k, split, min_seconds, faulted = CASES[name]
    reps = dict(zip(("a", "b"), expect_stream_ok(run, name, min_seconds)))
    if faulted:
        fs = [f[2] for f in faults(run, "a", name)]
        expect(fs == ["rail-down 0", "rail-up 0"], f"{name}: rail 0 pulled and restored on a: {fs}")
    for role in ("a", "b"):
        _, last = data_comm(run, role, name, stats(run, role, name))
        expect_counters(role, name, last, reps[role], 1 if faulted else 0)
        if faulted:
            expect(last["reprotections"] >= 1 and last["active"] == STANDBY_PORT,
                   f"{role} {name}: re-protected on rail 0 ({last['reprotections']}), ends active on {last['active']} "
                   f"(expected {STANDBY_PORT}: failback off)")
    expect_no_crash(run, name)
    want = tail_of(k, split)
    for role in ("a", "b"):
        log = log_text(run, role, name)
        tails = [re.sub(r" ECE 0x[0-9a-f]+$", "", m.group(1)) for m in map(CONNECT_LINE.search, log.splitlines()) if m]
        expect(tails and all(t == want for t in tails),
               f"{role} {name}: every connect / accept INFO line ends '(tc N sl M){want}': "
               f"{sorted(Counter(tails).items())}")
        lines = [" ".join(SETTINGS_LINE.findall(log))] if SETTINGS_LINE.search(log) else []  # one setting per line of them
        got = [(QPS_SETTING.findall(s), SPLIT_SETTING.findall(s)) for s in lines]
        q, sp = SETTINGS[name][role]
        expect(lines and all(g == ([str(q)], [str(sp)]) for g in got),
               f"{role} {name}: the settings line says HA_NCCL_IB_QPS_PER_CONNECTION={q} "
               f"HA_NCCL_IB_SPLIT_DATA_ON_QPS={sp}: {got}")
        warns = [w for w in reps[role]["plugin_warning_lines"] if NOT_HONOURED.search(w)]
        expect(not warns, f"{role} {name}: no WARN about the QP settings (honoured now): {warns[:2]}")
    for role in ("a", "b"):
        expect_qp_counts(run, name, role, k)
    qp0 = accepted_qp(run, name)
    for role in ("a", "b"):
        expect_wire(run, name, role, k, split, faulted, qp0)


def check(run):
    expect_each("plugin-qps", [(n, lambda n=n: check_case(run, n)) for n in CASES])
