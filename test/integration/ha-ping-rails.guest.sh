#!/usr/bin/env bash
# Guest side of ha-ping-rails: a is the client, b the server.
#  run 1: both rails, three sizes        -> every rail healthy, exit 0
#  run 2: rail 0 only, --min-bw absurd   -> rail 0 degraded, exit 1
#  run 3: --min-bw 1% of the link speed, -t 16 -D 1 --report_gbits -> healthy, Gb/s, exit 0
#  run 4: --tclass 96 --sl 3 on the client only -> both sides' QPs read back tclass 96 (the
#         server takes the client's QoS; Soft-RoCE keeps no SL: it reads back 0, reported as such);
#         tcpdump on a's rail 0 sees RoCE packets with tos 0x60
#  run 5: one server (--count 3) serves clients one after another: a non-ha-ping connection is
#         dropped, client 1 is killed mid-run (its report says so), clients 2 and 3 are healthy
#         -> three JSON lines, server exit 1 (the worst session)
#  --list on both guests: the plugin (build tree) lists rxe0:1 and rxe1:1, each the other's standby port
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/test/vm/lib.sh"
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
HA_PING=$BUILD/tools/ha-ping/ha-ping
COMMON=(--iters 50 --bw-iters 16 --timeout 60)

run() { # NAME ARGS... : runs ha-ping, records text, JSON and exit code under $VM_OUT
  local name=$1 rc=0
  shift
  if [[ $VM_ROLE == b ]]; then
    "$HA_PING" "${COMMON[@]}" "$@" --json-file "$VM_OUT/$name.json" >"$VM_OUT/$name.txt" 2>"$VM_OUT/$name.log" &
    local pid=$!
    vm_wait_listen 18600
    vm_barrier "$name"
    wait $pid || rc=$?
  else
    vm_barrier "$name"
    "$HA_PING" "${COMMON[@]}" "$@" --json-file "$VM_OUT/$name.json" "$VM_PEER_MGMT" >"$VM_OUT/$name.txt" \
      2>"$VM_OUT/$name.log" || rc=$?
  fi
  echo "$rc" >"$VM_OUT/$name.rc"
  vm_log "$name: exit $rc"
  cat "$VM_OUT/$name.txt"
}

run healthy --sizes 8,64K,1M
run degraded --sizes 64K --rails 0 --min-bw 1000000
run percent --sizes 1M --rails 0 --min-bw 1% -t 16 -D 1 --report_gbits
run selected --sizes 8,64K -d rxe1 -i 1 -x 1  # perftest-style device, port and GID index

# QoS: tcpdump on rail 0 (eth0) of a while the client runs with --tclass 96 --sl 3.
if [[ $VM_ROLE == a ]] && command -v tcpdump >/dev/null; then
  tcpdump -i eth0 -c 5 -v -n udp port 4791 >"$VM_OUT/qos-tcpdump.txt" 2>"$VM_OUT/qos-tcpdump.log" &
  tcpdump_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$VM_OUT/qos-tcpdump.log" 2>/dev/null && break; sleep 0.2; done
  run qos --sizes 8,64K --tclass 96 --sl 3
  for _ in $(seq 50); do kill -0 $tcpdump_pid 2>/dev/null || break; sleep 0.2; done
  kill $tcpdump_pid 2>/dev/null || true
  wait $tcpdump_pid || true
  vm_log "tcpdump: $(grep -c 'tos 0x60' "$VM_OUT/qos-tcpdump.txt" || true) packet(s) with tos 0x60"
elif [[ $VM_ROLE == a ]]; then
  echo "tcpdump not installed (scripts/setup.sh installs it)" >"$VM_OUT/qos-tcpdump.skipped"
  run qos --sizes 8,64K --tclass 96 --sl 3
else
  run qos --sizes 8,64K
fi

# One server (--count 3), clients one after another: first a connection that is no ha-ping
# client (dropped, not counted), then client 1 killed in the middle of its run (its session
# fails, the server goes on), then clients 2 and 3 run to the end.
if [[ $VM_ROLE == b ]]; then
  rc=0
  "$HA_PING" "${COMMON[@]}" --sizes 8,64K --count 3 --json-file "$VM_OUT/serve-clients.json" >"$VM_OUT/serve-clients.txt" \
    2>"$VM_OUT/serve-clients.log" &
  pid=$!
  vm_wait_listen 18600
  for n in 0 1 2 3; do vm_barrier "serve-clients-$n"; done
  wait $pid || rc=$?
  echo "$rc" >"$VM_OUT/serve-clients.rc"
  vm_log "serve-clients: exit $rc"
  cat "$VM_OUT/serve-clients.txt"
else
  vm_barrier serve-clients-0
  echo "GET / HTTP/1.0" >"/dev/tcp/$VM_PEER_MGMT/18600" || true
  vm_barrier serve-clients-1
  "$HA_PING" "${COMMON[@]}" --rails 0 --sizes 8 --iters 1000000 --json-file "$VM_OUT/serve-clients-killed.json" \
    "$VM_PEER_MGMT" >"$VM_OUT/serve-clients-killed.txt" 2>"$VM_OUT/serve-clients-killed.log" &
  pid=$!
  for _ in $(seq 300); do [[ -n $(ss -Htn state established "dport = :18600") ]] && break; sleep 0.1; done
  sleep 3
  kill -KILL $pid
  wait $pid || true
  vm_log "serve-clients: killed client 1"
  for n in 2 3; do
    vm_barrier "serve-clients-$n"
    rc=0
    "$HA_PING" "${COMMON[@]}" --sizes 8,64K --json-file "$VM_OUT/serve-clients-$n.json" "$VM_PEER_MGMT" \
      >"$VM_OUT/serve-clients-$n.txt" 2>"$VM_OUT/serve-clients-$n.log" || rc=$?
    echo "$rc" >"$VM_OUT/serve-clients-$n.rc"
    vm_log "serve-clients-$n: exit $rc"
  done
fi

# The plugin's view, no traffic: default plugin search (text) and the build tree's path (JSON).
rc=0
"$HA_PING" --list >"$VM_OUT/list.txt" 2>"$VM_OUT/list.log" || rc=$?
echo "$rc" >"$VM_OUT/list.rc"
rc=0
"$HA_PING" --list --json --plugin "$BUILD/src/plugin/libnccl-net-ha.so" >"$VM_OUT/list.json" 2>"$VM_OUT/list-json.log" || rc=$?
echo "$rc" >"$VM_OUT/list-json.rc"
vm_log "list: exit $(cat "$VM_OUT/list.rc") / $rc"
cat "$VM_OUT/list.txt"
