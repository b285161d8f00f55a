"""failover-recovered: rail 0 of b went down and up again before the streams (a flapped link that
recovered); then, as in failover-sender-down, b's rail 0 goes down 5 s into a 20 s --one-way stream
b -> a. Expected exactly as for failover-sender-down: exit 0, every byte verified, one failover per
data comm within the port-down bound, no later stall on the backup."""
from failover_common import PORT_DOWN_STALL_BOUND_MS, check_failover

MIN_SECONDS = 20  # failover-recovered.guest.sh


def check(run):
    check_failover(run, "b", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS)
