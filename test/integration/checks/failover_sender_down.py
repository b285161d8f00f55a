"""failover-sender-down: rail 0 pulled on VM b, the sender of a --one-way stream, ~5 s into a 20 s
stream. b gets the port event; a only learns from the protocol. Expected: both drivers exit 0,
every byte verified, exactly one failover (rxe0:1 -> rxe1:1) for b's send comm and one for a's
recv comm, no duplicate delivered, the stream goes on over rail 1."""
from failover_common import PORT_DOWN_STALL_BOUND_MS, check_failover

MIN_SECONDS = 20  # failover-sender-down.guest.sh


def check(run):
    check_failover(run, "b", MIN_SECONDS, PORT_DOWN_STALL_BOUND_MS)
