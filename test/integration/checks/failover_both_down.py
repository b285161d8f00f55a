"""failover-both-down: rail 0, then at once rail 1, pulled on VM a mid-stream. No path is left:
both drivers must end with a plugin error (exit 3) whose ncclResult_t is ncclSystemError, within
RTO + failover timeout + slack of the second fault (never a hang: --timeout would give exit 4;
never a crash), with a WARN 'no usable path left (...)' and a fatal stats event on each side. b
runs with --outlive-peer, so its own plugin has to report the failure (a's abort does not count)."""
from check import expect
from failover_common import check_fatal, expect_baseline, faults

MIN_SECONDS = 20  # failover-both-down.guest.sh


def check(run):
    expect_baseline(run, "baseline", MIN_SECONDS)
    a, b = run.report("a", "fault"), run.report("b", "fault")
    fs = faults(run, "a", "fault")
    expect([f[2] for f in fs] == ["rail-down 0", "rail-down 1"], f"fault: rail 0 then rail 1 down on a: {fs}")
    t = a["timeline"]
    print(f"check: info: fault: rail 0 down at +{fs[0][0] - t['start_unix_ms']} ms, rail 1 at "
          f"+{fs[1][0] - t['start_unix_ms']} ms of the stream; {t['recv_messages']} messages verified before")
    check_fatal(run, "fault", fs[1][1], a, b, first_fault=fs[0][0])
