#!/usr/bin/env bash
# Guest side of plugin-errors: the plugin's error paths, through the real libnccl-net-ha.so, real
# verbs on rxe, real sockets and processes. ha-net-driver --fault NAME runs each scenario; rank 0
# (listener / receiver) in VM a, rank 1 (connector / sender) in VM b, handshakes over eth2.
#   bad-dev       --dev 99: getProperties, listen, connect -> ncclInvalidArgument, "out of range"
#   bad-handle    rank 1 corrupts magic / version / length: connect -> ncclInvalidArgument at once
#   bad-token     rank 1 flips the handle's listener id: rank 0's listener closes the connection
#                 without a word (one INFO line), connect -> error, bounded
#   close-listen  rank 0 closes its listener before / during rank 1's handshake: connect -> error
#   close-listen-ack  HA_NCCL_TEST_ACK_DELAY_MS=2000 holds every accepted handshake before its
#                 acknowledgement (a WARN says so); rank 0 closes its listener right then: rank 1's
#                 connect -> error (never a comm whose peer was dropped)
#   flood         raw TCP connectors (garbage, another id, half a frame, a hello without the proof,
#                 nothing, ...) among 8 good connects on one listener: not a byte back, no WARN, one
#                 INFO line, every good connection verified, no fd left; silent ones dropped after
#                 the admission deadline (min(5 s, HA_NCCL_HANDSHAKE_TIMEOUT_MS))
#   abandon-connect  rank 1 calls connect() once and never again, then finalizes: the finished
#                 connection's QPs are released (no QP, fd or thread left; no crash at dlclose)
#   oversize      N-byte receive, N+1-byte isend -> ncclInvalidUsage naming both sizes
#   peer-death    rank 1 SIGKILLs itself mid-stream: rank 0's isend/test -> error within 30 s.
#                 HA_NCCL_QP_RETRY_CNT is unset on purpose: the plugin must cap rxe's "retry
#                 forever" count 7 by itself (with 7, rank 0 hangs until --timeout: exit 4).
#                 HA_NCCL_QP_TIMEOUT is unset too: on rxe the plugin defaults to 17 (~0.54 s per
#                 retry); 14 (~67 ms) ended healthy loaded streams with "retry counter exceeded".
#   ipv6          no fault: handshakes over IPv6. Each VM adds a ULA address to eth2 (fd00:aa::1 on
#                 a, ::2 on b; nodad: usable at once); NCCL_SOCKET_FAMILY=AF_INET6 makes the plugin
#                 advertise it; traffic must pass (NCCL_DEBUG=INFO: the log shows the address).
#   ipv6-link-local  the same over eth2's link-local address (NCCL_SOCKET_IFNAME==eth2): the handle
#                 carries the scope id.
#   no-ifname     NCCL_SOCKET_IFNAME=nosuchif: init fails (ncclSystemError) on both ranks with a WARN
#                 naming the variable and the interfaces seen; never a silent 127.0.0.1.
#   pkey, bad-pkey  NCCL_IB_PKEY=0 is used (INFO) and traffic passes, with NCCL_IB_TIMEOUT=18 and
#                 NCCL_IB_RETRY_CNT=5 on every QP (INFO) and one WARN on the soft RTO below their
#                 retry window, and one naming NCCL_IB_USE_INLINE=1 as not honoured; NCCL_IB_PKEY=1
#                 (an empty entry of rxe's table) leaves both ports out (a WARN each): no device, no
#                 traffic.
# Each run records NAME.rc, NAME.ms (wall), NAME.json and NAME.log (stderr, plugin lines included)
# in $VM_OUT; check.py (checks/plugin_errors.py) judges them. The script itself always exits 0.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver, test/vm/lib.sh

export NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=eth2
export HA_NCCL_HANDSHAKE_TIMEOUT_MS=5000  # checks/plugin_errors.py uses the same value
unset HA_NCCL_QP_RETRY_CNT HA_NCCL_QP_TIMEOUT NCCL_DEBUG_SUBSYS

# run NAME PORT [driver args...]: one driver pair, rank 0 here on a / rank 1 on b.
run() {
  local name=$1 port=$2
  shift 2
  pl_driver "$name" "$port" --fault "$name" --timeout 60 "$@"
  echo "$PL_RC" >"$VM_OUT/$name.rc"
  echo "$PL_MS" >"$VM_OUT/$name.ms"
  vm_log "$name: exit $PL_RC after $PL_MS ms"
  vm_barrier "$name-done"
}

run bad-dev 18711 --dev 99
run bad-handle 18712
PL_ENV=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)  # the listener's INFO line on connections that prove nothing
run bad-token 18713
PL_ENV=()
run close-listen 18714
PL_ENV=(HA_NCCL_TEST_ACK_DELAY_MS=2000)
run close-listen-ack 18720
PL_ENV=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)
run flood 18721
PL_ENV=()
run abandon-connect 18722
run oversize 18715 --sizes 64K
# 1 MiB messages keep the rail busy, so rank 0 has writes in flight when rank 1 dies.
run peer-death 18716 --sizes 1M --messages 40 --inflight 8

# plain NAME PORT [driver args...]: like run, without --fault.
plain() {
  local name=$1 port=$2
  shift 2
  pl_driver "$name" "$port" --timeout 120 "$@"
  PL_ENV=()
  echo "$PL_RC" >"$VM_OUT/$name.rc"
  echo "$PL_MS" >"$VM_OUT/$name.ms"
  vm_log "$name: exit $PL_RC after $PL_MS ms"
  vm_barrier "$name-done"
}

v6=fd00:aa::$([[ $VM_ROLE == a ]] && echo 1 || echo 2)
ip -6 addr add "$v6/64" dev eth2 nodad
ip -6 addr show dev eth2 >"$VM_OUT/ipv6.addr" 2>&1 || true
vm_barrier ipv6-addr
PL_ENV=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET NCCL_SOCKET_FAMILY=AF_INET6)
plain ipv6 18717 --sizes 0,8,64K,1M --messages 200 --group 4 --inflight 8
ip -6 addr del "$v6/64" dev eth2 || true
# Only eth2's link-local address is left: the handle carries its scope id (eth2 has the same
# interface index in both VMs, which NCCL's rule, and so the plugin's, relies on).
PL_ENV=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET NCCL_SOCKET_FAMILY=AF_INET6 NCCL_SOCKET_IFNAME==eth2)
plain ipv6-link-local 18719 --sizes 8,64K --messages 100 --inflight 8
PL_ENV=(NCCL_SOCKET_IFNAME=nosuchif)
plain no-ifname 18718 --messages 10
# NCCL_IB_PKEY (net_ib's meaning: an index into the port's P_Key table): index 0 (rxe's one P_Key,
# 0xffff) is taken and said; index 1 (an empty entry) leaves every port out with a WARN each, so the
# plugin reports no device: never the default partition instead. NCCL_IB_TIMEOUT / _RETRY_CNT
# are taken as net_ib takes them, and the trade-off against the soft RTO is WARNed about;
# NCCL_IB_USE_INLINE=1 is not honoured (no inline data) and one WARN says so (ADAPTIVE_ROUTING=0 asks
# for nothing).
PL_ENV=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET NCCL_IB_PKEY=0 NCCL_IB_TIMEOUT=18 NCCL_IB_RETRY_CNT=5
        NCCL_IB_USE_INLINE=1 NCCL_IB_ADAPTIVE_ROUTING=0)
plain pkey 18723 --sizes 8,64K --messages 50 --inflight 8
PL_ENV=(NCCL_IB_PKEY=1)
plain bad-pkey 18724 --messages 10
