"""failover-blackhole: VM a drops 100 % of its outgoing frames on rail 0 (netem; the port stays
ACTIVE, so no port event anywhere) ~5 s into a 15 s --one-way stream b -> a. The plugin must find
out by itself: the first failover is driven by the soft RTO (its cause says rto/timeout), and the
stream goes on, verified, over rail 1."""
from failover_common import BLACK_HOLE_STALL_BOUND_MS, check_failover

MIN_SECONDS = 15  # failover-blackhole.guest.sh


def check(run):
    check_failover(run, "a", MIN_SECONDS, BLACK_HOLE_STALL_BOUND_MS, cause_re=r"rto|timeout|timed out")
