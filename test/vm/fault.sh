#!/usr/bin/env bash
# Fault injection on a rail of THIS guest (runs inside a test-bed guest, as root).
#
#   fault.sh rail-down RAIL         ip link set ethRAIL down (local rxe port goes DOWN at once;
#                                   the peer gets no event, only its retries run out)
#   fault.sh rail-up RAIL           link up again; waits until the rxe port is ACTIVE
#   fault.sh flap RAIL COUNT MS     COUNT times: link down, MS ms, link up, MS ms (no waiting for
#                                   port states in between); at the end waits until ACTIVE
#   fault.sh loss RAIL PERCENT      netem: drop PERCENT% of outgoing frames (port stays up)
#   fault.sh delay RAIL MS          netem: delay outgoing frames by MS milliseconds
#   fault.sh netem RAIL ARGS...     netem with any tc netem arguments, e.g. "loss 5% delay 10ms"
#   fault.sh clear RAIL             remove netem and bring the link up (all faults off)
#   fault.sh status                 links, qdiscs and rxe port states
#
# RAIL is 0 or 1 (eth0/rxe0, eth1/rxe1); the management network (eth2) is never faulted.
# netem acts on this guest's egress only, and each loss/delay/netem replaces the previous one.
set -euo pipefail

die() { echo "fault.sh: ERROR: $*" >&2; exit 2; }
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

wait_port() { # RAIL STATE
  local f=/sys/class/infiniband/rxe$1/ports/1/state
  for _ in $(seq 100); do
    grep -q "$2" "$f" 2>/dev/null && return 0
    sleep 0.1
  done
  die "rxe$1 port did not become $2 (now: $(cat "$f" 2>/dev/null))"
}

(($#)) || usage
cmd=$1
shift
if [[ $cmd == status ]]; then
  ip -br link show
  tc qdisc show | grep -E 'eth[0-2]'
  for d in /sys/class/infiniband/rxe*; do echo "$(basename "$d"): $(cat "$d/ports/1/state")"; done
  exit 0
fi
rail=${1:-}
[[ $rail == 0 || $rail == 1 ]] || die "RAIL must be 0 or 1 (got '${rail}')"
shift
dev=eth$rail
[[ -d /sys/class/net/$dev ]] || die "$dev not found: run this inside a test-bed guest"

case $cmd in
  rail-down)
    ip link set "$dev" down
    wait_port "$rail" DOWN ;;
  rail-up)
    ip link set "$dev" up
    wait_port "$rail" ACTIVE ;;
  flap)
    [[ ${1:-} =~ ^[0-9]+$ && ${2:-} =~ ^[0-9]+$ ]] || die "flap needs COUNT and MS (whole numbers)"
    gap=$(printf '%d.%03d' $(($2 / 1000)) $(($2 % 1000)))
    for ((i = 0; i < $1; i++)); do
      ip link set "$dev" down
      sleep "$gap"
      ip link set "$dev" up
      sleep "$gap"
    done
    wait_port "$rail" ACTIVE ;;
  loss)
    [[ ${1:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "loss needs PERCENT (number)"
    tc qdisc replace dev "$dev" root netem loss "$1%" ;;
  delay)
    [[ ${1:-} =~ ^[0-9]+$ ]] || die "delay needs MS (whole milliseconds)"
    tc qdisc replace dev "$dev" root netem delay "${1}ms" ;;
  netem)
    (($#)) || die "netem needs tc netem arguments"
    tc qdisc replace dev "$dev" root netem "$@" ;;
  clear)
    tc qdisc del dev "$dev" root 2>/dev/null || true
    ip link set "$dev" up
    wait_port "$rail" ACTIVE ;;
  *) usage ;;
esac
echo "fault.sh: $cmd rail $rail ($dev) ${*}" >&2
