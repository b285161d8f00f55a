#!/usr/bin/env bash
# Fault injection on a rail of THIS guest (runs inside a test-bed guest, as root).
#
#   fault.sh rail-down RAIL         the rail's NIC down (its local rxe port goes DOWN at once;
#                                   the peer gets no event, only its retries run out)
#   fault.sh rail-up RAIL           link up again; waits until the rxe port is ACTIVE
#   fault.sh flap RAIL COUNT MS     COUNT times: link down, MS ms, link up, MS ms (no waiting for
#                                   port states in between); at the end waits until ACTIVE
#   fault.sh loss RAIL PERCENT      netem: drop PERCENT% of outgoing frames (port stays up)
#   fault.sh delay RAIL MS          netem: delay outgoing frames by MS milliseconds
#   fault.sh netem RAIL ARGS...     netem with any tc netem arguments, e.g. "loss 5% delay 10ms"
#   fault.sh readdress RAIL         the rail's IPv4 address moves to another in its subnet (host
#                                   part + 100): its RoCE GID changes (GID_CHANGE), the link stays
#                                   up; waits until the rxe port lists the new GID
#   fault.sh clear RAIL             remove netem, put the rail's own address back, bring the link
#                                   up (all faults off)
#   fault.sh status                 links, qdiscs and rxe port states
#
# RAIL is a rail number, 0..VM_RAILS-1: the command acts on this guest's NIC and rxe device of
# that rail ($VM_RAIL_IF_<RAIL>, $VM_RAIL_DEV_<RAIL>; eth<RAIL>/rxe<RAIL> unless run-pair.sh
# renumbered the NICs with --rail-order-a/b). RAIL may also list rails, e.g. 0+1, done in turn;
# rail-down of a list takes every link down at once, then waits for each port.
# The management network ($VM_MGMT_IF) is never faulted.
# netem acts on this guest's egress only, and each loss/delay/netem replaces the previous one.
set -euo pipefail

die() { echo "fault.sh: ERROR: $*" >&2; exit 2; }
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
RAILS=${VM_RAILS:-2}

wait_port() { # STATE: until this rail's rxe port is in STATE (10 s max; no processes per poll)
  local f=/sys/class/infiniband/$rxe/ports/1/state s='' i
  for ((i = 0; i < 100; i++)); do
    read -r s <"$f" 2>/dev/null || true
    [[ $s == *"$1"* ]] && return 0
    sleep 0.1
  done
  die "$rxe port did not become $1 (now: $s)"
}

# Link up, and the on-link routes of an island (run-pair.sh's net.conf) back: a link going
# down takes its routes with it.
link_up() {
  local what net via metric
  ip link set "$dev" up
  [[ -r /run/vmout/net.conf ]] || return 0
  while read -r what net via metric; do
    [[ $what != route || $via != "$dev" ]] || ip route replace "$net" dev "$dev" metric "$metric"
  done </run/vmout/net.conf
}

# The rail's own ADDR/LEN (run-pair.sh's net.conf line "nic IF MAC ADDR/LEN MTU RXE").
own_addr() { awk -v d="$dev" '$1 == "nic" && $2 == d { print $4 }' /run/vmout/net.conf 2>/dev/null; }
gid_of() { # a.b.c.d -> its RoCE v2 GID as sysfs shows it
  local IFS=.
  set -- $1
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}
set_addr() { # ADDR/LEN: the rail's only global address; waits for its GID (10 s max)
  local i
  ip -4 addr flush dev "$dev" scope global
  ip addr add "$1" dev "$dev"
  link_up
  for ((i = 0; i < 100; i++)); do
    grep -qx "$(gid_of "${1%/*}")" /sys/class/infiniband/"$rxe"/ports/1/gids/* 2>/dev/null && return 0
    sleep 0.1
  done
  die "$rxe did not list the GID of ${1%/*}"
}

(($#)) || usage
cmd=$1
shift
if [[ $cmd == status ]]; then
  ip -br link show
  tc qdisc show | grep -E 'eth[0-9]'
  for d in /sys/class/infiniband/rxe*; do echo "$(basename "$d"): $(cat "$d/ports/1/state")"; done
  for ((r = 0; r < RAILS; r++)); do
    v=VM_RAIL_IF_$r w=VM_RAIL_DEV_$r
    echo "rail $r: ${!v:-eth$r} ${!w:-rxe$r}"
  done
  exit 0
fi
rails=${1:-}
shift || true
n='(0|[1-9][0-9]*)'
[[ $rails =~ ^$n([+]$n)*$ ]] || die "RAIL must be a rail number 0..$((RAILS - 1)) or a list like 0+1 (got '$rails')"
set_rail() { # RAIL: dev, rxe
  rail=$1
  ((rail < RAILS)) || die "RAIL must be 0..$((RAILS - 1)) (got '$rail')"
  local v=VM_RAIL_IF_$rail w=VM_RAIL_DEV_$rail
  dev=${!v:-eth$rail} rxe=${!w:-rxe$rail}
  [[ -d /sys/class/net/$dev ]] || die "$dev not found: run this inside a test-bed guest"
}
if [[ $rails == *+* && $cmd == rail-down ]]; then # at once: every link down, then the waits
  batch=''
  for r in ${rails//+/ }; do set_rail "$r"; batch+="link set $dev down"$'\n'; done
  ip -batch - <<<"$batch" # one process: the links go down back to back (an exec each costs ~0.1 s here)
  for r in ${rails//+/ }; do set_rail "$r"; wait_port DOWN; echo "fault.sh: rail-down rail $rail ($dev, $rxe)" >&2; done
  exit 0
fi
if [[ $rails == *+* ]]; then # each rail in turn
  for rail in ${rails//+/ }; do "$0" "$cmd" "$rail" "$@"; done
  exit 0
fi
set_rail "$rails"

case $cmd in
  rail-down)
    ip link set "$dev" down
    wait_port DOWN ;;
  rail-up)
    link_up
    wait_port ACTIVE ;;
  flap)
    [[ ${1:-} =~ ^[0-9]+$ && ${2:-} =~ ^[0-9]+$ ]] || die "flap needs COUNT and MS (whole numbers)"
    gap=$(printf '%d.%03d' $(($2 / 1000)) $(($2 % 1000)))
    for ((i = 0; i < $1; i++)); do
      ip link set "$dev" down
      sleep "$gap"
      ip link set "$dev" up
      sleep "$gap"
    done
    link_up
    wait_port ACTIVE ;;
  loss)
    [[ ${1:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "loss needs PERCENT (number)"
    tc qdisc replace dev "$dev" root netem loss "$1%" ;;
  delay)
    [[ ${1:-} =~ ^[0-9]+$ ]] || die "delay needs MS (whole milliseconds)"
    tc qdisc replace dev "$dev" root netem delay "${1}ms" ;;
  netem)
    (($#)) || die "netem needs tc netem arguments"
    tc qdisc replace dev "$dev" root netem "$@" ;;
  readdress)
    own=$(own_addr)
    [[ $own =~ ^([0-9]+\.[0-9]+\.[0-9]+)\.([0-9]+)/([0-9]+)$ ]] || die "no address of $dev in net.conf"
    set_addr "${BASH_REMATCH[1]}.$((BASH_REMATCH[2] + 100))/${BASH_REMATCH[3]}" ;;
  clear)
    tc qdisc del dev "$dev" root 2>/dev/null || true
    own=$(own_addr)
    if [[ -n $own ]] && ! ip -4 -o addr show dev "$dev" | grep -q " inet $own "; then set_addr "$own"; fi
    link_up
    wait_port ACTIVE ;;
  *) usage ;;
esac
echo "fault.sh: $cmd rail $rail ($dev, $rxe) ${*}" >&2
