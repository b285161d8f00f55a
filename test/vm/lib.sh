# Helpers for test scripts that run INSIDE a test-bed guest (started by run-pair.sh).
# Usage, at the top of a test script:   source "$(dirname "$0")/lib.sh"
#
#   vm_log MSG...                 timestamped "[a 12:00:01.123] MSG" on stderr
#   vm_die MSG...                 vm_log + exit 1
#   vm_wait_tcp HOST PORT [SEC]   wait until HOST:PORT accepts a TCP connection (default 60 s).
#                                 It connects and closes: don't aim it at one-shot servers such
#                                 as ibv_rc_pingpong/perftest (use vm_wait_listen on their side).
#   vm_wait_listen PORT [SEC]     wait until a local TCP or RDMA CM listener exists on PORT
#                                 (default 60 s)
#   vm_exchange NAME [VALUE]      rendezvous with the peer over the mgmt network; prints the
#                                 peer's VALUE (one line). Both sides must use the same NAME.
#   vm_barrier NAME               vm_exchange without a value
#   vm_rdma_dev RAIL              this guest's rxe device of RAIL ($VM_RAIL_DEV_<RAIL>)
#   vm_rail_if RAIL               this guest's NIC of RAIL ($VM_RAIL_IF_<RAIL>)
#   vm_fault ARGS...              fault.sh ARGS... (see fault.sh), in a subshell of this one
#   vm_nap SECONDS                sleep without a process (fractions allowed); vm_nap_ms MS
#
# A guest's one vCPU is shared with the traffic under test (a driver polling, rxe copying): an
# exec costs 50-100 ms of its CPU (a bash 100 ms, iproute2's ip 90 ms, python3 5 s), and a
# fault.sh run as a script took ~2 s of wall time there. The control side (faults, waits, logs)
# therefore starts as few processes as it can.
#
# Rendezvous: a listens on mgmt TCP port $NCCL_HA_VM_BARRIER_PORT (default 7777), b connects.
# Timeout: $NCCL_HA_VM_BARRIER_TIMEOUT seconds (default 300). Tests must not use that port.

: "${VM_ROLE:?lib.sh must be sourced inside a run-pair.sh guest (VM_ROLE is unset)}"
VM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_BARRIER_PORT=${NCCL_HA_VM_BARRIER_PORT:-7777}
VM_BARRIER_TIMEOUT=${NCCL_HA_VM_BARRIER_TIMEOUT:-300}

vm_log() {
  local us=${EPOCHREALTIME/[.,]/}
  printf '[%s %(%T)T.%03d] %s\n' "$VM_ROLE" $((us / 1000000)) $((us / 1000 % 1000)) "$*" >&2
}
vm_die() { vm_log "FAIL: $*"; exit 1; }
vm_rdma_dev() { local v=VM_RAIL_DEV_$1; echo "${!v:-rxe$1}"; }
vm_rail_if() { local v=VM_RAIL_IF_$1; echo "${!v:-eth$1}"; }
# fault.sh's functions, run in a subshell: one fork per fault, no exec of bash (see fault.sh)
source "$VM_LIB_DIR/fault.sh"
vm_fault() { (fault_main "$@"); }
# vm_nap: a read that times out on a pipe this shell holds both ends of (nobody writes to it)
exec {VM_NAP_FD}<> <(:)
vm_nap() { read -r -t "$1" -u "$VM_NAP_FD" _ || true; }
vm_nap_ms() { local s; printf -v s '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); vm_nap "$s"; }  # MS

vm_wait_tcp() { # HOST PORT [TIMEOUT]
  local host=$1 port=$2 deadline=$((SECONDS + ${3:-60}))
  until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
    ((SECONDS < deadline)) || { vm_log "vm_wait_tcp: $host:$port not reachable"; return 1; }
    sleep 0.2
  done
}

vm_wait_listen() { # PORT [TIMEOUT]   (a TCP listener, or an RDMA CM one as with perftest -R)
  local port=$1 deadline=$((SECONDS + ${2:-60}))
  until [[ -n $(ss -Hltn "sport = :$port") ]] ||
    [[ $(rdma resource show cm_id 2>/dev/null) =~ state\ LISTEN\ [^$'\n']*:$port\  ]]; do
    ((SECONDS < deadline)) || { vm_log "vm_wait_listen: nothing listens on port $port"; return 1; }
    sleep 0.1
  done
}

vm_exchange() { # NAME [VALUE] -> prints the peer's value
  local name=$1 value=${2:-} deadline=$((SECONDS + VM_BARRIER_TIMEOUT)) line left
  [[ $name != *[[:space:]]* && $value != *$'\n'* ]] || { vm_log "vm_exchange: bad name/value"; return 1; }
  while :; do
    left=$((deadline - SECONDS))
    ((left > 0)) || { vm_log "barrier '$name': timed out after ${VM_BARRIER_TIMEOUT}s"; return 1; }
    if [[ $VM_ROLE == a ]]; then
      # One-shot listener: sends our line, prints what b sent, ends when b closes.
      line=$(printf '%s\t%s\n' "$name" "$value" |
        timeout "$left" busybox nc -l -p "$VM_BARRIER_PORT" 2>/dev/null | head -n1) || true
    else
      line=$(
        exec 2>/dev/null
        exec 3<>"/dev/tcp/$VM_PEER_MGMT/$VM_BARRIER_PORT" || exit 1
        printf '%s\t%s\n' "$name" "$value" >&3
        IFS= read -r -t 30 l <&3 && printf '%s' "$l"
      ) || true
    fi
    if [[ -z $line ]]; then # peer not there yet (or a stray connection): retry
      [[ $VM_ROLE == b ]] && sleep 0.2
      continue
    fi
    if [[ ${line%%$'\t'*} != "$name" ]]; then
      vm_log "barrier mismatch: $VM_ROLE is at '$name', peer at '${line%%$'\t'*}'"
      return 1
    fi
    printf '%s\n' "${line#*$'\t'}"
    return 0
  done
}

vm_barrier() { vm_exchange "$1" >/dev/null; }
