"""failover-reprotect: rail 0 down (failover to rail 1), rail 0 back (re-protected there), then
rail 1 down: the second failure fails over back to rail 0; then rail 1 is re-protected.
maxretries: the same faults with HA_NCCL_MAX_RETRIES=1: the second failure ends the stream with
ncclSystemError on both sides, within the bound, b's WARN naming HA_NCCL_MAX_RETRIES."""
from check import expect
from failover_common import PRIMARY, check_fatal, faults, on_a_clock
from failover_sequence import check_sequence


def check(run):
    check_sequence(run, "fault", 26, "b", n_faults=4, failovers=2, end_active=PRIMARY, end_standby="up")
    a, b = run.report("a", "maxretries"), run.report("b", "maxretries")
    fs = faults(run, "b", "maxretries")
    expect(len(fs) >= 3 and fs[2][2] == "rail-down 1", f"maxretries: the third fault is rail-down 1 on b: {fs}")
    second = on_a_clock("b", b, fs[2][0])
    check_fatal(run, "maxretries", second, a, b, first_fault=second)
    # b (the port event's side) is refused its second failover by the limit; a, whose peer is gone by
    # then, may find its standby dead first - check_fatal() has its "no usable path" WARN either way.
    warns = [w for w in b["plugin_warning_lines"] if "HA_NCCL_MAX_RETRIES (1)" in w]
    expect(warns, f"b maxretries: the WARN names HA_NCCL_MAX_RETRIES (1): {b['plugin_warning_lines'][:3]}")
