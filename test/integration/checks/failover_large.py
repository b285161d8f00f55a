"""failover-large: failover-sender-down with 4 MiB messages only (32 MiB of writes in flight when
b's rail 0 goes down 5 s into the 15 s --one-way stream b -> a). Expected as for
failover-sender-down; the bound grows by the time the replayed 32 MiB take at the unfaulted rate."""
from check import expect
from failover_common import PORT_DOWN_STALL_BOUND_MS, check_failover

MIN_SECONDS = 15  # failover-large.guest.sh


def check(run):
    base = run.report("a", "baseline")
    mib_s = base["integrity"]["bytes_received"] / 2**20 / (base["timeline"]["duration_ms"] / 1000)
    expect(mib_s > 0, f"baseline: {mib_s:.1f} MiB/s")
    replay_ms = int(32 / mib_s * 1000)
    check_failover(run, "b", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS + replay_ms)
