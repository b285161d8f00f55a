#!/usr/bin/env bash
# Guest side of security-hostile (issue #31, item 8): a hostile client attacks every listening TCP
# socket of the plugin in both ranks while a verified stream flows and new comms keep connecting.
#
# Both guests: ha-net-driver (rank 0 in a, rank 1 in b; handshakes over the management NIC) streams
# both ways, every byte verified, for MIN_SECONDS and until hostile.py ends it (once this driver's
# fds are back after the attacks), and opens and closes CHURN comm pairs one after another meanwhile
# (--churn-retry: a failed connect or accept is counted and retried, not the end of the run); fds,
# QPs and MRs must be back after finalize. The driver runs under `ulimit -n 1024`. (No
# --check-resources: its thread count flips when a reactor worker starts after the ring connected,
# and its settle wait then costs 50 s.)
# Beside it, hostile.py (see its header for the attacks, their schedule and what it records) watches
# the driver's listeners (as `ss -ltnp` does, from /proc), captures the handshakes on the management
# NIC, and attacks this guest's listeners from here (the same host) and the peer's (told over its
# relay connection) from here (the peer VM).
#
# Files ($VM_OUT): hostile.{json,log,rc,ms,phase,stats.jsonl,pid,rescue_port,ss.txt} (the driver's
# report, its stderr with the plugin's INFO/WARN lines, ...), attacker.{json,log} (hostile.py's).
# checks/security_hostile.py judges them. The script itself fails only when it cannot run.
#   NCCL_HA_HOSTILE_ATTACKS=garbage,ff,reset,replay,slowloris,silent,forge,hijack,flood  (the default: all)
# Against another build of the plugin (e.g. the one before issue #31, which must fail it):
#   test/integration/vm-test.sh security-hostile --env PL_PLUGIN=/path/to/libnccl-net-ha.so
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver_start, test/vm/lib.sh

# INFO lines with the wall clock: the check times each churn pair's handshake from them
export NCCL_SOCKET_IFNAME=$VM_MGMT_IF NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET NCCL_DEBUG_TIMESTAMP_LEVELS=INFO,WARN \
  NCCL_DEBUG_TIMESTAMP_FORMAT='%s.%3f '
unset HA_NCCL_IB_HCA NCCL_IB_HCA HA_NCCL_STATS_FILE HA_NCCL_HANDSHAKE_TIMEOUT_MS
name=hostile
PORT=18790   # the driver's management port (rank 0)
RELAY=18791  # hostile.py's relay between the two guests
MIN_SECONDS=30
CHURN=6  # a pair every 5 s: pair i is due (i + 0.5) x 5 s into the stream
ATTACKS=${NCCL_HA_HOSTILE_ATTACKS:-garbage,ff,reset,replay,slowloris,silent,forge,hijack,flood}
# The schedule (hostile.py's header), in ms into the stream. Pair 2 (due at 12.5 s) is held open on
# both ranks: b's driver is idle from 0.4 s before it is due for 2.8 s, so a's listener waits for its
# connector; a's is idle from 0.2 s before b's idle ends, so b's listener, opened as b resumes, waits
# for its connector: every handshake attack hits each of them (pair 1 has 4.6 s to finish its message
# first: an unattacked pair took up to 5.7 s on a host at load 8). The forged rescue requests at
# 17.8 s; the flood from 18.3 s (its connects started within 5.5 s): pairs 3 and 4 connect during
# it, 5 after it. Then hostile.py waits (at most 30 s, every socket still open) until this driver's
# fds are back to their count before the attacks, and ends its stream (--stop-file; both hostile.py
# close their sockets to it first): it lasts MIN_SECONDS, or longer until then.
if [[ $VM_ROLE == a ]]; then idle=14700:2800; else idle=12100:2800; fi
FORGE_MS=17800 FLOOD_MS=18300 FLOOD_ISSUE_S=5.5 SETTLE_S=30
out=$VM_OUT
rm -f "$out"/attacker.* "$out/$name".*

# The attacker, first: it must capture the ring's handshakes. Its own fd limit is high (thousands of
# sockets); /usr/bin/python3 directly (no pyenv shim: a process start is costly in the guest).
(
  ulimit -n 16384
  exec /usr/bin/python3 -S "$HERE/hostile.py" --role "$VM_ROLE" --self-ip "$VM_SELF_MGMT" --peer-ip "$VM_PEER_MGMT" \
    --self-rail0 "$VM_SELF_RAIL0" --peer-rail0 "$VM_PEER_RAIL0" --self-rail1 "$VM_SELF_RAIL1" \
    --peer-rail1 "$VM_PEER_RAIL1" --iface "$VM_MGMT_IF" --relay-port "$RELAY" \
    --exclude "$PORT,$RELAY,${NCCL_HA_VM_BARRIER_PORT:-7777}" --attacks "$ATTACKS" \
    --driver-log "$out/$name.log" --forge-ms "$FORGE_MS" --flood-ms "$FLOOD_MS" --flood-issue-s "$FLOOD_ISSUE_S" \
    --driver-stop-file "$out/$name.stop" --settle-s "$SETTLE_S" --idle-at-ms "${idle%%:*}" \
    --pid-file "$out/$name.pid" --phase-file "$out/$name.phase" --rescue-file "$out/$name.rescue_port" \
    --ready-file "$out/attacker.ready" --stop-file "$out/attacker.stop" --out "$out/attacker.json"
) 2>"$out/attacker.log" &
hpid=$!
trap 'kill "$hpid" 2>/dev/null || true' EXIT  # never left behind (a boot group's next test)
for ((i = 0; i < 600; i++)); do
  [[ -s $out/attacker.ready ]] && break
  kill -0 "$hpid" 2>/dev/null || vm_die "the attacker exited before it was ready: $(tail -n 5 "$out/attacker.log")"
  sleep 0.1
done
[[ -s $out/attacker.ready ]] || vm_die "the attacker was not ready within 60 s"
vm_log "attacker ready"

# The driver under `ulimit -n 1024` (soft limit, inherited by the driver's subshell only).
soft=$(ulimit -Sn)
ulimit -S -n 1024
# A soft RTO of 8 s (at least twice rxe's hardware retry window, 3.8 s, or the plugin WARNs): the
# attacker shares the emulated guest's one vCPU with the driver and the kernel's rxe, and on a
# loaded host its bursts starve completions past the default 1 s (failovers of the four-rail bed's
# ring comms at load 8-10, no network fault): this test is about strangers, not failover.
PL_ENV=("HA_NCCL_STATS_FILE=$out/$name.stats.jsonl" HA_NCCL_RTO_MS=8000)
pl_driver_start "$name" "$PORT" --dev 0 --sizes 0,8,4K,64K --messages 200 --inflight 8 --group 1 \
  --min-seconds "$MIN_SECONDS" --churn "$CHURN" --churn-retry --idle "$idle" --timeout 90 \
  --phase-file "$out/$name.phase" --stop-file "$out/$name.stop"
PL_ENV=()
ulimit -S -n "$soft"
echo "$PL_PID" >"$out/$name.pid"

# `ss -ltnp` once the stream runs (the ring's listeners are closed by then): the driver's listeners
# on the handshake address besides rank 0's management port: the rescue service, and a churn pair's
# listener at times. hostile.py found the rescue service itself; this is its cross-check.
if pl_wait_phase "$out/$name.phase" integrity "$PL_PID" 90 >/dev/null; then
  ss -Hltnp >"$out/$name.ss.txt" 2>&1 || true
  awk -v pid="pid=$PL_PID," -v ip="$VM_SELF_MGMT:" -v mgmt="$PORT" \
    'index($0, pid) && index($4, ip) == 1 { p = $4; sub(/.*:/, "", p); if (p != mgmt) printf "%s ", p }' \
    "$out/$name.ss.txt" >"$out/$name.rescue_port.tmp"
  mv "$out/$name.rescue_port.tmp" "$out/$name.rescue_port"
  vm_log "ss -ltnp: the driver listens on $VM_SELF_MGMT port(s) $(<"$out/$name.rescue_port")"
else
  vm_log "the integrity phase never started here"
fi

pl_driver_wait_report "$out/$name.phase" 30
: >"$out/attacker.stop"
for ((i = 0; i < 300; i++)); do kill -0 "$hpid" 2>/dev/null || break; sleep 0.1; done
kill "$hpid" 2>/dev/null || true
wait "$hpid" || vm_log "attacker exit $?"
echo "$PL_RC" >"$out/$name.rc"
echo "$PL_MS" >"$out/$name.ms"
vm_log "$name: driver exit $PL_RC after $PL_MS ms"
tail -n 15 "$out/$name.log" >&2
vm_barrier "$name-done"
