"""failover-flaps: 10 flaps of the sender's rail 0: one failover to rail 1, the stream goes on
with every byte verified, the standby keeps being re-protected and is up at the end."""
from failover_common import STANDBY_PORT
from failover_sequence import check_sequence


def check(run):
    check_sequence(run, "fault", 40, "b", n_faults=1, failovers=1, end_active=STANDBY_PORT, end_standby="up")
