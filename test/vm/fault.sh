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
# Also sourced by lib.sh, which runs fault_main in a subshell per vm_fault call: a guest busy with
# the traffic under test pays ~0.1 s of CPU per bash or iproute2 exec (a fault took 0.3 s in an
# idle guest, ~2 s in a loaded one), so a fault costs one fork here, and links go up and down
# through busybox's static ip (~15 ms) instead of iproute2's (~90 ms). Errors are checked
# explicitly: a function called as `vm_fault ... || ...` runs without set -e.
FAULT_SH=${BASH_SOURCE[0]}

fault_die() { echo "fault.sh: ERROR: $*" >&2; exit 2; }
fault_usage() { sed -n '2,18p' "$FAULT_SH" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fault_link() { # DEV up|down
  if [[ -x /bin/busybox ]]; then /bin/busybox ip link set dev "$1" "$2"; else ip link set dev "$1" "$2"; fi ||
    fault_die "cannot set $1 $2"
}
fault_nap() { # SECONDS (vm_nap when sourced by lib.sh)
  if declare -F vm_nap >/dev/null; then vm_nap "$1"; else sleep "$1"; fi
}

fault_wait_port() { # STATE: until this rail's rxe port is in STATE (10 s max)
  local f=/sys/class/infiniband/$rxe/ports/1/state s='' i
  for ((i = 0; i < 100; i++)); do
    read -r s <"$f" 2>/dev/null || true
    [[ $s == *"$1"* ]] && return 0
    fault_nap 0.1
  done
  fault_die "$rxe port did not become $1 (now: $s)"
}

# Link up, and the on-link routes of an island (run-pair.sh's net.conf) back: a link going
# down takes its routes with it.
fault_link_up() {
  local what net via metric
  fault_link "$dev" up
  [[ -r /run/vmout/net.conf ]] || return 0
  while read -r what net via metric; do
    [[ $what != route || $via != "$dev" ]] || ip route replace "$net" dev "$dev" metric "$metric" ||
      fault_die "cannot restore the route to $net via $dev"
  done </run/vmout/net.conf
}

# The rail's own ADDR/LEN (run-pair.sh's net.conf line "nic IF MAC ADDR/LEN MTU RXE").
fault_own_addr() {
  local what d mac addr rest
  [[ -r /run/vmout/net.conf ]] || return 0
  while read -r what d mac addr rest; do
    [[ $what == nic && $d == "$dev" ]] && { echo "$addr"; return 0; }
  done </run/vmout/net.conf
}
fault_gid_of() { # a.b.c.d -> its RoCE v2 GID as sysfs shows it
  local IFS=.
  set -- $1
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}
fault_set_addr() { # ADDR/LEN: the rail's only global address; waits for its GID (10 s max)
  local i
  ip -4 addr flush dev "$dev" scope global || fault_die "cannot flush the addresses of $dev"
  ip addr add "$1" dev "$dev" || fault_die "cannot add $1 to $dev"
  fault_link_up
  for ((i = 0; i < 100; i++)); do
    grep -qx "$(fault_gid_of "${1%/*}")" /sys/class/infiniband/"$rxe"/ports/1/gids/* 2>/dev/null && return 0
    fault_nap 0.1
  done
  fault_die "$rxe did not list the GID of ${1%/*}"
}

fault_set_rail() { # RAIL: rail, dev, rxe
  rail=$1
  ((rail < RAILS)) || fault_die "RAIL must be 0..$((RAILS - 1)) (got '$rail')"
  local v=VM_RAIL_IF_$rail w=VM_RAIL_DEV_$rail
  dev=${!v:-eth$rail} rxe=${!w:-rxe$rail}
  [[ -d /sys/class/net/$dev ]] || fault_die "$dev not found: run this inside a test-bed guest"
}

fault_main() { # the command line above
  local RAILS=${VM_RAILS:-2} cmd rails r n rail dev rxe gap i own v w
  (($#)) || fault_usage
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
    return 0
  fi
  rails=${1:-}
  shift || true
  n='(0|[1-9][0-9]*)'
  [[ $rails =~ ^$n([+]$n)*$ ]] || fault_die "RAIL must be a rail number 0..$((RAILS - 1)) or a list like 0+1 (got '$rails')"
  if [[ $rails == *+* && $cmd == rail-down ]]; then # at once: every link down, then the waits
    for r in ${rails//+/ }; do fault_set_rail "$r"; fault_link "$dev" down; done  # ~15 ms apart
    for r in ${rails//+/ }; do fault_set_rail "$r"; fault_wait_port DOWN; echo "fault.sh: rail-down rail $rail ($dev, $rxe)" >&2; done
    return 0
  fi
  if [[ $rails == *+* ]]; then # each rail in turn
    for r in ${rails//+/ }; do (fault_main "$cmd" "$r" "$@") || exit $?; done
    return 0
  fi
  fault_set_rail "$rails"

  case $cmd in
    rail-down)
      fault_link "$dev" down
      fault_wait_port DOWN ;;
    rail-up)
      fault_link_up
      fault_wait_port ACTIVE ;;
    flap)
      [[ ${1:-} =~ ^[0-9]+$ && ${2:-} =~ ^[0-9]+$ ]] || fault_die "flap needs COUNT and MS (whole numbers)"
      gap=$(printf '%d.%03d' $(($2 / 1000)) $(($2 % 1000)))
      for ((i = 0; i < $1; i++)); do
        fault_link "$dev" down
        fault_nap "$gap"
        fault_link "$dev" up
        fault_nap "$gap"
      done
      fault_link_up
      fault_wait_port ACTIVE ;;
    loss)
      [[ ${1:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] || fault_die "loss needs PERCENT (number)"
      tc qdisc replace dev "$dev" root netem loss "$1%" || fault_die "tc netem loss failed on $dev" ;;
    delay)
      [[ ${1:-} =~ ^[0-9]+$ ]] || fault_die "delay needs MS (whole milliseconds)"
      tc qdisc replace dev "$dev" root netem delay "${1}ms" || fault_die "tc netem delay failed on $dev" ;;
    netem)
      (($#)) || fault_die "netem needs tc netem arguments"
      tc qdisc replace dev "$dev" root netem "$@" || fault_die "tc netem $* failed on $dev" ;;
    readdress)
      own=$(fault_own_addr)
      [[ $own =~ ^([0-9]+\.[0-9]+\.[0-9]+)\.([0-9]+)/([0-9]+)$ ]] || fault_die "no address of $dev in net.conf"
      fault_set_addr "${BASH_REMATCH[1]}.$((BASH_REMATCH[2] + 100))/${BASH_REMATCH[3]}" ;;
    clear)
      tc qdisc del dev "$dev" root 2>/dev/null || true
      own=$(fault_own_addr)
      if [[ -n $own ]] && ! ip -4 -o addr show dev "$dev" | grep -q " inet $own "; then fault_set_addr "$own"; fi
      fault_link_up
      fault_wait_port ACTIVE ;;
    *) fault_usage ;;
  esac
  echo "fault.sh: $cmd rail $rail ($dev, $rxe) ${*}" >&2
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  fault_main "$@"
fi
