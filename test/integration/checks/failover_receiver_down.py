"""failover-receiver-down: rail 0 pulled on VM a, the receiver of a --one-way stream, ~5 s into a
15 s stream. a gets the port event; b, the sender, only learns from the protocol (or its RTO).
Expected as for failover-sender-down: exit 0, every byte verified, one failover per data comm.
With forced flushes (HA_NCCL_FORCE_FLUSH=1, --flush-each) a flushes every received group by an
RDMA READ: through rxe0 before the failover, through rxe1 after it."""
from check import expect
from failover_common import PORT_DOWN_STALL_BOUND_MS, check_failover, data_comm, stats

MIN_SECONDS = 15  # failover-receiver-down.guest.sh
GROUP = 4  # PL_STREAM_ARGS --group 4


PEER_PORT_DOWN = "the peer's port of that pair is down"
PEER_PORT_DOWN_S = 5  # reprotect.cpp kPeerPortDownNs


def check_refusals(run):
    """b re-protects its data comm while a's rail 0 stays down, and the only standby pair has a's rxe0:
    a refuses naming its port down (kPortDown), and b leaves that port out until a's note that it
    came back, or 5 s: one attempt (a QP built and refused) per 5 s of the outage, not one per
    backoff step (100 ms doubling to 5 s: 9 or so in 15 s)."""
    mine, last = data_comm(run, "b", "fault")
    fo = [e for e in mine if e["event"] == "failover"]
    expect(fo, "fault: b's data comm failed over")
    if not fo:
        return
    refused = [e for e in mine if e["event"] == "standby" and PEER_PORT_DOWN in e.get("why", "")]
    expect(refused, f"fault: b was told a's port is down ('{PEER_PORT_DOWN}' in a standby record)")
    outage_s = (last["time_unix_ms"] - fo[0]["time_unix_ms"]) / 1000
    bound = 2 + int(outage_s // PEER_PORT_DOWN_S)
    expect(last["reprotect_attempts"] <= bound,
           f"fault: b made {last['reprotect_attempts']} re-protection attempt(s) in the {outage_s:.1f} s a's rail 0 "
           f"stayed down after the failover (bound {bound}: one per {PEER_PORT_DOWN_S} s)")


def check(run):
    check_failover(run, "a", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS)
    check_refusals(run)
    for name in ("baseline", "fault"):
        rep = run.report("a", name)
        got = rep["integrity"]
        msgs = got["messages_received"]
        expect(rep["properties"]["forceFlush"] == 1, f"{name}: forceFlush reported with HA_NCCL_FORCE_FLUSH=1")
        expect(msgs // GROUP <= got["flushes"] <= msgs and got["flushes"] > 0,
               f"{name}: {got['flushes']} flushes waited for, one per received group ({msgs} messages, groups of <= {GROUP})")
        closes = [e for e in stats(run, "a", name) if e["event"] == "close" and e["kind"] == "recv"]
        reads = [sum(e["flush_reads"][i] for e in closes) for i in (0, 1)]
        # + 1: the driver's iflush of the last group at the end of the phase ("flush": "completed");
        # a flush of a group both devices wrote (across the failover) reads through both, if both are up
        extra = 0 if name == "baseline" else 4
        expect(got["flushes"] + 1 <= sum(reads) <= got["flushes"] + 1 + extra and got["flush"] == "completed",
               f"{name}: the plugin completed {reads[0]} flush reads on rxe0 and {reads[1]} on rxe1, one per flush "
               f"(+ at most {extra} around the failover: one per device that wrote)")
        if name == "fault":
            expect(reads[0] > 0 and reads[1] > 0, "fault: flushes read through rxe0 before the failover, rxe1 after")
        else:
            expect(reads[1] == 0, "baseline: every flush read through rxe0 (the active path)")
