"""failover-receiver-down: rail 0 pulled on VM a, the receiver of a --one-way stream, ~5 s into a
20 s stream. a gets the port event; b, the sender, only learns from the protocol (or its RTO).
Expected as for failover-sender-down: exit 0, every byte verified, one failover per data comm."""
from failover_common import PORT_DOWN_STALL_BOUND_MS, check_failover

MIN_SECONDS = 20  # failover-receiver-down.guest.sh


def check(run):
    check_failover(run, "a", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS)
