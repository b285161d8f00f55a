"""failover-both-down: rail 0, then at once rail 1, pulled on VM a mid-stream. No path is left:
both drivers must end with a plugin error (exit 3) whose ncclResult_t is ncclSystemError, within
max(RTO + failover timeout, the hardware retry window) + slack of the second fault (a at once: it
saw both port events, so its standby is known down; never a hang: --timeout would give exit 4;
never a crash), with a WARN 'no usable path left (...)' and a fatal stats event on each side. b
runs with --outlive-peer, so its own plugin has to report the failure (a's abort does not count)."""
from check import expect
from failover_common import FAILOVER_TIMEOUT_MS, check_fatal, expect_baseline, faults

MIN_SECONDS = 15  # failover-both-down.guest.sh


def check(run):
    expect_baseline(run, "baseline", MIN_SECONDS)
    a, b = run.report("a", "fault"), run.report("b", "fault")
    fs = faults(run, "a", "fault")
    expect([f[2] for f in fs] == ["rail-down 0", "rail-down 1"], f"fault: rail 0 then rail 1 down on a: {fs}")
    t = a["timeline"]
    print(f"check: info: fault: rail 0 down at +{fs[0][0] - t['start_unix_ms']} ms, rail 1 at "
          f"+{fs[1][0] - t['start_unix_ms']} ms of the stream; {t['recv_messages']} messages verified before")
    check_fatal(run, "fault", fs[1][1], a, b, first_fault=fs[0][0])
    # Fail fast (issue #9): a saw both port events, so when its last path fails the standby is
    # known down: the error comes at once, not after a failover's sync deadline.
    at = a["error_unix_ms"]
    expect(at <= fs[1][1] + FAILOVER_TIMEOUT_MS,
           f"a fault: with both ports known down the error came {at - fs[1][1]:+.0f} ms from the end of rail 1's fault.sh "
           f"(at once: less than a sync deadline, {FAILOVER_TIMEOUT_MS} ms)")
