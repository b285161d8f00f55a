#!/usr/bin/env bash
# Smoke test of the bed's rails: checks from inside the guests what run-pair.sh's --rails,
# --rail-order-a/b and --islands promise. A SCRIPT for run-pair.sh, e.g.
#   test/vm/run-pair.sh --rails 4 --islands 0-1,2-3 --rail-order-b 2,3,0,1 -- test/vm/smoke-rails.sh
#
#  map    VM_RAILS rxe devices; per rail r: VM_RAIL_IF_r has address VM_SELF_RAILr, VM_RAIL_DEV_r
#         sits on that NIC with GID index 1 = ::ffff:VM_SELF_RAILr; the peer's own map equals
#         our VM_PEER_RAIL_DEV_r (exchanged over mgmt).
#  fault  fault.sh rail-down/rail-up/loss/clear of rail NCCL_HA_SMOKE_RAILS_FAULT_RAIL (default
#         0) act on that rail's NIC and rxe device, here: port states, netem, island routes back
#         after rail-up (reach then shows the rail healed).
#  reach  ibv_rc_pingpong (20 x 4 KiB, QP info over mgmt, so only RDMA crosses the rails) from
#         a's device of one rail to b's device of another, one pair after the other:
#         every rail to itself (must work); in each island of several rails, each rail to the
#         next one of the island (must work); each island's first rail to the next island's
#         first rail (must fail: b's server cannot move its QP to RTR, as no ARP reply comes).
#         Results in $VM_OUT/reach.txt on a.
#  bw     only with NCCL_HA_SMOKE_RAILS_BW_ROUNDS=N: N rounds of ib_write_bw (64 KiB x
#         NCCL_HA_SMOKE_RAILS_BW_ITERS, default 500) on each rail in turn; MB/s per rail and
#         round in $VM_OUT/bw.txt on a; each rxe device's packet and loss counters in
#         $VM_OUT/counters.txt.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PORT=18700 # + check number
T=30       # per-tool time limit (s)
fails=0
bad() { vm_log "UNEXPECTED: $*"; fails=$((fails + 1)); }
var() { local v=$1; echo "${!v}"; }

# --- map ------------------------------------------------------------------------------------
devs=(/sys/class/infiniband/rxe*)
((${#devs[@]} == VM_RAILS)) || bad "${#devs[@]} rxe devices, expected VM_RAILS=$VM_RAILS"
declare -A inet=() netdev=() # NIC -> " addr/len ...", rxe device -> its NIC
while read -r line; do
  if [[ $line =~ ^[0-9]+:\ ([^ ]+)\ +inet\ ([^ ]+) ]]; then inet[${BASH_REMATCH[1]}]+=" ${BASH_REMATCH[2]}"; fi
done < <(ip -o -4 addr show)
while read -r line; do
  if [[ $line =~ ^link\ ([^/]+)/1\ .*\ netdev\ ([^ ]+) ]]; then netdev[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}; fi
done < <(rdma link show)
mine=
for ((r = 0; r < VM_RAILS; r++)); do
  if=$(vm_rail_if $r) dev=$(vm_rdma_dev $r) addr=$(var VM_SELF_RAIL$r)
  [[ "${inet[$if]:-} " == *" $addr/24 "* ]] || bad "rail $r: $if has${inet[$if]:- no address}, not $addr/24"
  [[ ${netdev[$dev]:-} == "$if" ]] || bad "rail $r: $dev is on '${netdev[$dev]:-}', not $if"
  IFS=. read -r o1 o2 o3 o4 <<<"$addr"
  gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
  [[ $(<"/sys/class/infiniband/$dev/ports/1/gids/1") == "$gid" ]] || bad "rail $r: $dev GID 1 is not $gid"
  mine+="$r:$dev "
done
theirs=$(vm_exchange map "$mine")
for ((r = 0; r < VM_RAILS; r++)); do
  want=$(var VM_PEER_RAIL_DEV_$r)
  [[ " $theirs" == *" $r:$want "* ]] || bad "rail $r: the peer's device is not $want (peer: $theirs)"
done
vm_log "map: rails ${mine}(peer: ${theirs})"

# --- fault: fault.sh takes rail numbers and acts on this guest's NIC of that rail ----------------
F=${NCCL_HA_SMOKE_RAILS_FAULT_RAIL:-0}
state() { local s; s=$(<"/sys/class/infiniband/$(vm_rdma_dev "$1")/ports/1/state"); echo "${s#*: }"; }
routes() { ip route show dev "$(vm_rail_if "$1")" | sort | tr '\n' ' '; }
before=$(routes "$F")
vm_fault rail-down "$F" 2>/dev/null
for ((r = 0; r < VM_RAILS; r++)); do
  want=ACTIVE
  ((r != F)) || want=DOWN
  [[ $(state $r) == "$want" ]] || bad "fault: after rail-down $F, rail $r's $(vm_rdma_dev $r) is $(state $r), not $want"
done
vm_fault rail-up "$F" 2>/dev/null
[[ $(routes "$F") == "$before" ]] || bad "fault: rail-up $F did not restore the routes '$before' (now '$(routes "$F")')"
vm_fault loss "$F" 100 2>/dev/null
[[ $(tc qdisc show dev "$(vm_rail_if "$F")") == *"netem"*"loss 100%"* ]] || bad "fault: loss $F 100 is not on $(vm_rail_if "$F")"
vm_fault clear "$F" 2>/dev/null
[[ $(tc qdisc show dev "$(vm_rail_if "$F")") != *netem* ]] || bad "fault: clear $F left netem on $(vm_rail_if "$F")"
vm_log "fault: rail-down/rail-up/loss/clear of rail $F act on $(vm_rail_if "$F")/$(vm_rdma_dev "$F")"

# --- reach ----------------------------------------------------------------------------------
checks=() # "A-RAIL B-RAIL ok|fail"
firsts=() # first rail of each island, in island order
for ((r = 0; r < VM_RAILS; r++)); do
  checks+=("$r $r ok")
  i=$(var VM_RAIL_ISLAND_$r)
  [[ -n ${firsts[i]:-} ]] || firsts[i]=$r
done
for ((r = 0; r < VM_RAILS; r++)); do # each rail to the next of its island (if any)
  i=$(var VM_RAIL_ISLAND_$r)
  for ((k = 1; k < VM_RAILS; k++)); do
    q=$(((r + k) % VM_RAILS))
    (($(var VM_RAIL_ISLAND_$q) == i)) || continue
    checks+=("$r $q ok")
    break
  done
done
n=${#firsts[@]}
for ((i = 0; n > 1 && i < n; i++)); do
  checks+=("${firsts[i]} ${firsts[(i + 1) % n]} fail")
  ((n > 2)) || break # with two islands, one direction is enough
done

# The default bed (no --islands/--rail-order/--rails 4) keeps the kernel's ARP defaults: every
# NIC answers for every address of its host, so a QP to a rail it cannot reach connects to the
# wrong NIC of the peer and retries forever instead of failing at RTR. There a "fail" check
# passes when nothing gets through in FLUX_T seconds.
flux=0 FLUX_T=10
[[ $(<"/proc/sys/net/ipv4/conf/$(vm_rail_if 0)/arp_ignore") != 0 ]] || flux=1

if [[ $VM_ROLE == b ]]; then # all servers up front: they wait for their client idly
  pids=()
  for c in "${!checks[@]}"; do
    read -r ra rb want <<<"${checks[c]}"
    timeout $((T * ${#checks[@]})) ibv_rc_pingpong -d "$(vm_rdma_dev "$rb")" -g 1 -p $((PORT + c)) -n 20 \
      >"$VM_OUT/reach-$ra-$rb.log" 2>&1 &
    pids[c]=$!
  done
  for c in "${!checks[@]}"; do vm_wait_listen $((PORT + c)); done
  vm_barrier servers-up
  vm_barrier clients-done
  for c in "${!checks[@]}"; do
    read -r ra rb want <<<"${checks[c]}"
    kill "${pids[c]}" 2>/dev/null || true
    rc=0
    wait "${pids[c]}" || rc=$?
    log=$VM_OUT/reach-$ra-$rb.log
    if [[ $want == ok && $rc != 0 ]]; then
      bad "reach: b's server for a's rail $ra to b's rail $rb: expected ok, got exit $rc: $(tail -n 2 "$log" | tr '\n' ' ')"
    elif [[ $want == fail ]] && ((!flux)) && ! grep -q 'Failed to modify QP to RTR' "$log"; then
      bad "reach: b's server for a's rail $ra to b's rail $rb: expected an RTR error, got exit $rc: $(tail -n 2 "$log" | tr '\n' ' ')"
    fi
  done
else
  echo "# a-rail b-rail expected got seconds" >"$VM_OUT/reach.txt"
  vm_barrier servers-up
  for c in "${!checks[@]}"; do
    read -r ra rb want <<<"${checks[c]}"
    log=$VM_OUT/reach-$ra-$rb.log
    t0=$EPOCHREALTIME rc=0 t=$T
    [[ $want == ok ]] || ((!flux)) || t=$FLUX_T
    timeout $t ibv_rc_pingpong -d "$(vm_rdma_dev "$ra")" -g 1 -p $((PORT + c)) -n 20 "$VM_PEER_MGMT" \
      >"$log" 2>&1 || rc=$?
    took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    what="rail $ra ($(vm_rdma_dev "$ra")) to the peer's rail $rb ($(var "VM_PEER_RAIL_DEV_$rb"))"
    got=fail
    ((rc != 0)) || got=ok
    echo "$ra $rb $want $got $took" >>"$VM_OUT/reach.txt"
    if [[ $want == ok && $rc == 0 ]]; then
      vm_log "reach: $what works (${took}s: $(grep -m1 -o '[0-9.]* usec/iter' "$log" || true))"
    elif [[ $want == fail && $rc != 0 && ($rc != 124 || $flux == 1) ]]; then
      why=$(grep -m1 -iE 'fail|couldn' "$log" || echo "nothing got through in ${t}s (ARP flux)")
      vm_log "reach: $what fails as it must (${took}s): $why"
    else
      bad "reach: $what: expected $want, got exit $rc after ${took}s: $(tail -n 2 "$log" | tr '\n' ' ')"
    fi
  done
  vm_barrier clients-done
fi

# --- bw (optional) --------------------------------------------------------------------------
ROUNDS=${NCCL_HA_SMOKE_RAILS_BW_ROUNDS:-0}
ITERS=${NCCL_HA_SMOKE_RAILS_BW_ITERS:-500}
PORT=$((PORT + ${#checks[@]}))
for ((round = 1; round <= ROUNDS; round++)); do
  for ((r = 0; r < VM_RAILS; r++)); do
    PORT=$((PORT + 1))
    bw=(ib_write_bw -d "$(vm_rdma_dev $r)" -x 1 -F -s 65536 -n "$ITERS" -p "$PORT")
    log=$VM_OUT/bw-rail$r-round$round.log
    if [[ $VM_ROLE == b ]]; then
      timeout 120 "${bw[@]}" >"$log" 2>&1 &
      vm_wait_listen $PORT
      vm_barrier "bw-$round-$r"
      wait $! || bad "bw: ib_write_bw server on rail $r failed (see $log)"
    else
      vm_barrier "bw-$round-$r"
      timeout 120 "${bw[@]}" "$VM_PEER_MGMT" >"$log" 2>&1 || bad "bw: ib_write_bw on rail $r failed (see $log)"
      mbs=$(awk '/^ *#bytes/ { getline; print $4 }' "$log")
      echo "round $round rail $r island $(var VM_RAIL_ISLAND_$r) MB/s ${mbs:-?}" | tee -a "$VM_OUT/bw.txt" >&2
    fi
  done
done

if ((ROUNDS)); then # losses on the way show as retransmissions (a) and out-of-sequence packets (b)
  for ((r = 0; r < VM_RAILS; r++)); do
    c=/sys/class/infiniband/$(vm_rdma_dev $r)/ports/1/hw_counters
    line="rail $r:"
    for k in sent_pkts rcvd_pkts completer_retry_err out_of_seq_request duplicate_request; do
      line+=" $k $(<"$c/$k")"
    done
    echo "$line" | tee -a "$VM_OUT/counters.txt" >&2
  done
fi

((fails == 0)) || vm_die "$fails check(s) failed"
vm_log "smoke-rails passed (${#checks[@]} reach checks)"
