"""Checks for plugin-traffic: libnccl-net-ha.so through ha-net-driver between the two VMs."""
import json

from check import expect

ENTRY_POINTS = ("listen", "connect", "accept", "regMr", "isend", "irecv", "test", "iflush",
                "closeSend", "closeRecv", "closeListen")


def check(run):
    ps = run.report("b", "post-send")["rails"][0]["post_send_us"]
    expect(ps["calls"] > 0, f"bare ibv_post_send on rail 0: median {ps['median']:.0f} us, "
                            f"max {ps['max']:.0f} us over {ps['calls']} calls")
    yardstick = max(20 * ps["max"], 250_000)

    for name in ("integrity", "large", "small", "flush", "comms"):
        for role in ("a", "b"):
            expect(run.rc(role, name) == 0, f"{name}: rank {'0' if role == 'a' else '1'} exit 0")
        rep = run.report("a", name)
        expect(rep["ok"] and rep["api_version"] == 12, f"{name}: driver verified everything through ncclNetPlugin_v12")
        res = rep["resources"]
        expect(res["after_close"]["fds"] == res["before_init"]["fds"],
               f"{name}: fds back to {res['before_init']['fds']} after close + finalize")
        expect(res["after_close"]["mrs"] == res["before_init"]["mrs"] == 0, f"{name}: no MR left after close")
        expect(res["after_close"]["qps"] == res["before_init"]["qps"] == 0, f"{name}: no QP left after close")
        expect(res["after_dlclose"]["threads"] == res["before_init"]["threads"],
               f"{name}: no plugin thread left after dlclose")

    rep = run.report("a", "integrity")
    p = rep["properties"]
    expect(p["name"] == "rxe0" and p["port"] == 1 and p["speed"] > 0 and p["pciPath"],
           f"properties: {p['name']} port {p['port']} {p['speed']} Mbps pci {p['pciPath']}")
    expect(p["ptrSupport"] == 1 and p["regIsGlobal"] == 1 and p["maxRecvs"] == 8 and 0 < p["maxComms"] <= 256,
           f"properties: ptrSupport HOST, regIsGlobal, maxRecvs 8, maxComms {p['maxComms']}")
    expect(p["netDeviceType"] == 0 and p["vProps"]["ndevs"] == 1, "properties: host device, one physical NIC")
    calls = rep["calls"]
    for ep in ENTRY_POINTS:
        c = calls[ep]
        expect(c["max_us"] <= yardstick,
               f"{ep}: longest of {c['count']} calls {c['max_us'] / 1000:.1f} ms "
               f"({c['max_us'] / max(ps['max'], 1):.1f} x the longest bare ibv_post_send)")
    expect(calls["connect"]["count"] > 1 and calls["accept"]["count"] > 1,
           f"connect/accept are non-blocking: {calls['connect']['count']} / {calls['accept']['count']} calls "
           f"during a {rep['connect']['ms']:.0f} ms handshake")

    for name, sizes_note in (("integrity", "0 B .. 4 MiB, groups of 4"), ("large", "16 MiB, 64 MiB"),
                             ("small", "12000 x 8 B")):
        i = run.report("a", name)["integrity"]
        j = run.report("b", name)["integrity"]
        expect(i["ok"] and j["ok"] and i["mismatches"] == 0 and i["size_errors"] == 0 and i["overruns"] == 0,
               f"{name} ({sizes_note}): {i['messages_received']} messages / {i['bytes_received']} bytes "
               f"verified byte for byte on rank 0, {j['messages_received']} on rank 1")
        expect(i["messages_sent"] == i["messages_received"] == j["messages_sent"], f"{name}: every message counted once")
    expect(run.report("a", "small")["integrity"]["messages_received"] == 12000, "small: 12000 messages")

    # Forced flushes: 400 messages each way in groups of 4, every group carries data (one size
    # in five is 0 B), so 100 RDMA READ flushes per rank, each waited for before the check.
    expect(run.report("a", "integrity")["integrity"]["flush"] == "completed"
           and run.report("a", "integrity")["properties"]["forceFlush"] == 0,
           "integrity: forceFlush 0 by default, iflush of host memory completes")
    for role in ("a", "b"):
        rep = run.report(role, "flush")
        i = rep["integrity"]
        expect(rep["properties"]["forceFlush"] == 1 and i["flushes"] == 100 and i["mismatches"] == 0
               and i["messages_received"] == 400,
               f"flush: rank {'0' if role == 'a' else '1'} reports forceFlush 1 and waited for {i['flushes']} "
               f"flush reads of 100 groups, 400 messages verified")
        lines = [json.loads(x) for x in run.out(role, "flush.stats.jsonl").read_text().splitlines() if x.strip()]
        reads = [e["flush_reads"] for e in lines if e["event"] == "close" and e["kind"] == "recv"]
        # 101: the 100 groups and the driver's iflush of the last group at the end of the phase
        expect(reads == [[101, 0]], f"flush: the plugin's receive comm completed {reads} RDMA READs (rxe0, -)")

    c = run.report("a", "comms")["comms_test"]
    max_comms = int(run.text("a", "max-comms"))
    expect(c["n"] == max_comms and c["messages_ok"] == max_comms,
           f"comms: {c['n']} send/recv pairs (maxComms) open at once, each carried a verified message")
    expect(c["fds_returned"], f"comms: fds back after closing them all ({c['before']['fds']} before, "
                              f"{c['after_close']['fds']} after, {c.get('fds_wait_ms', 0):.0f} ms after the last close)")
    expect(c["rss_per_comm_kib"] < 1024, f"comms: {c['rss_per_comm_kib']:.0f} KiB of host memory per comm")
