"""failover-dmabuf: the plugin on a dma-buf-only node (no GPU peer-memory client, no
HA_NCCL_FORCE_FLUSH): the ring's buffers registered with regMrDmaBuf as NCCL_PTR_CUDA, every received
group flushed with iflush and waited for, rail 0 pulled on a (the receiver) 5 s into the stream and
back at 8 s.

Expected: every byte verified, one failover per comm (rxe0:1 -> rxe1:1), re-protected on rxe0; both
devices probed dma-buf as supported and offered NCCL_PTR_DMABUF without NCCL_PTR_CUDA; no regMr,
two regMrDmaBuf per rank; a's receive comm built flush QPs (net_ib's rule: peer memory *or*
dma-buf) and read back every flush (CommStats::flush_reads), through rxe1 after the failover. Before
issue #32 the plugin built no flush QPs there and test() of the first flush dereferenced a request
whose comm was never set: a crashed.

gdr-off: the same node with NCCL_IB_GDR_FLUSH_DISABLE=1 (net_ib's meaning), an unfaulted stream of
groups flushed and waited for: every byte verified, DMABUF still offered, the settings line says
so, and not one flush READ (the flush QPs are not built; each iflush completes at once)."""
import re

from check import expect
from failover_common import STANDBY_PORT, data_comm, expect_counters, expect_no_crash, expect_stream_ok, log_text, stats
from failover_sequence import check_sequence

NAME = "fault"
MIN_SECONDS = 16  # failover-dmabuf.guest.sh
PTR_CUDA, PTR_DMABUF = 0x2, 0x4
PROBED = re.compile(r"NET/HA: (rxe\d:1): dma-buf supported")
FLUSH_FAILED_WARN = re.compile(r"NET/HA: recv comm \S+: flush \(RDMA READ of \S+\) failed")


def check(run):
    a, b = check_sequence(run, NAME, MIN_SECONDS, "a", n_faults=2, failovers=1, end_active=STANDBY_PORT, end_standby="up")
    for role, rep in (("a", a), ("b", b)):
        ptr = rep["properties"]["ptrSupport"]
        expect(ptr & PTR_DMABUF and not ptr & PTR_CUDA and rep["properties"]["forceFlush"] == 0,
               f"{role} {NAME}: ptrSupport 0x{ptr:x}: DMABUF without CUDA (no peer memory), forceFlush 0")
        probed = sorted(set(PROBED.findall(log_text(run, role, NAME))))
        expect(probed == ["rxe0:1", "rxe1:1"], f"{role} {NAME}: dma-buf probed as supported on {probed}")
        calls = rep["calls"]
        expect(calls.get("regMrDmaBuf", {}).get("count") == 2 and "regMr" not in calls,
               f"{role} {NAME}: the ring registered with regMrDmaBuf "
               f"({calls.get('regMrDmaBuf', {}).get('count')} calls), no regMr")
    got = a["integrity"]
    expect(got["flushes"] > 0 and got["flush"] == "completed", f"a {NAME}: {got['flushes']} flushes waited for")
    mine, last = data_comm(run, "a", NAME, stats(run, "a", NAME))
    reads = last["flush_reads"]
    # + 1: the driver's iflush of the last group at the end of the phase; a flush whose data both
    # devices wrote (around the switch) reads through both
    expect(got["flushes"] + 1 <= sum(reads) <= got["flushes"] + 1 + 32,
           f"a {NAME}: every flush read back: {reads[0]} reads on rxe0, {reads[1]} on rxe1 for {got['flushes'] + 1} "
           f"flushes")
    fo = [e for e in mine if e["event"] == "failover"][0]
    after = reads[1] - fo["flush_reads"][1]
    expect(after > 0, f"a {NAME}: {after} flush reads through rxe1 after the failover (the NIC that wrote)")
    bad = FLUSH_FAILED_WARN.findall(log_text(run, "a", NAME))
    expect(not bad, f"a {NAME}: no 'flush ... failed' WARN ({len(bad)})")
    check_gdr_off(run)


def check_gdr_off(run):
    name = "gdr-off"
    expect_no_crash(run, name)
    a, b = expect_stream_ok(run, name, 3)
    expect(a["properties"]["ptrSupport"] & PTR_DMABUF, f"a {name}: ptrSupport 0x{a['properties']['ptrSupport']:x} offers DMABUF")
    said = re.findall(r"HA_NCCL_IB_GDR_FLUSH_DISABLE=(\d)", log_text(run, "a", name))
    expect(said and set(said) == {"1"}, f"a {name}: the settings line says HA_NCCL_IB_GDR_FLUSH_DISABLE=1 ({said})")
    got = a["integrity"]
    expect(got["flushes"] > 0 and got["flush"] == "completed", f"a {name}: {got['flushes']} flushes waited for")
    _, last = data_comm(run, "a", name, stats(run, "a", name))
    expect_counters("a", name, last, a, 0)
    expect(last["flush_reads"] == [0, 0], f"a {name}: no flush READ ({last['flush_reads']} on rxe0, rxe1)")
