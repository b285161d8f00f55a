# Shared by the guest scripts that drive libnccl-net-ha.so with ha-net-driver between the two
# test-bed VMs (test/integration/plugin-*.guest.sh, failover-*.guest.sh, bench/*.guest.sh).
#   source "$(dirname "$0")/plugin-lib.sh"      (from test/integration)
#   source "$REPO/test/integration/plugin-lib.sh"
# It sources test/vm/lib.sh (vm_barrier, vm_fault, ...) and sets:
#   REPO BUILD DRIVER PLUGIN HA_PING     paths (BUILD = $NCCL_HA_BUILD_DIR, default REPO/build;
#                                        PLUGIN = $PL_PLUGIN if set: another build of the plugin,
#                                        e.g. a "before" run, run-pair.sh --env PL_PLUGIN=...)
#
# Driver pairs (rank 0 in VM a = listener, rank 1 in VM b = connector; handshake over eth2):
#   pl_driver NAME PORT ARGS...          one pair, to completion: the driver gets --plugin, --json
#                                        $VM_OUT/NAME.json, ARGS, then --rank/--listen-port or --peer;
#                                        its stderr goes to $VM_OUT/NAME.log. Sets PL_RC (this rank's
#                                        exit status) and PL_MS (wall ms). Never fails itself.
#   pl_driver_start NAME PORT ARGS...    the same, in the background (PL_PID); then
#   pl_driver_wait                       waits for it, sets PL_RC and PL_MS
#   pl_driver_wait_report PHASE SEC      the same, but at most SEC s after the phase file says
#                                        exit-RC (a process stuck in the kernel's QP cleanup)
#   PL_ENV=(VAR=VALUE ...)               extra environment for the next driver started here
#
# Failover streams (test/integration/failover-*.guest.sh, bench/failover-bench.guest.sh):
#   pl_failover_env                      NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=NET, NCCL_SOCKET_IFNAME=eth2,
#                                        no device restriction (the plugin sees rxe0 and rxe1)
#   PL_STREAM_ARGS                       the failover tests' stream: --one-way b -> a on --dev 0 (rxe0,
#                                        standby rxe1), sizes 0 B .. 4 MiB, groups of 4, 8 in flight
#   pl_stream NAME PORT ARGS...          a driver pair with --phase-file and, per side,
#                                        HA_NCCL_STATS_FILE=$VM_OUT/NAME.stats.jsonl; runs the faults
#                                        of PL_FAULTS against the integrity phase; records
#                                        NAME.rc, NAME.ms, NAME.fault_ms; vm_barrier NAME-done at
#                                        the end. Sets PL_RC.
#   PL_FAULTS=("ROLE MS FAULT.SH-ARGS" ...)   (or "ROLE MS proc-stop" / "ROLE MS proc-cont": SIGSTOP /
#                                        SIGCONT to this side's driver process; or, not recorded as
#                                        faults: "ROLE MS pause MS2" (sleep MS2 ms) and "ROLE MS
#                                        stats-wait REGEX COUNT" (wait until NAME.stats.jsonl has
#                                        COUNT lines matching the grep -E REGEX, which has no
#                                        spaces; at most 180 s, never past the driver's end), so
#                                        that a fault can wait for the plugin to be ready for it;
#                                        "ROLE MS log-wait REGEX COUNT" (the same on this side's
#                                        driver log, NAME.log: a WARN the plugin prints); "ROLE MS
#                                        barrier TAG" (vm_barrier NAME-TAG: both sides list one, so
#                                        that a fault on one side can follow what the other side's
#                                        log-wait saw); "ROLE MS stop" (the sender's side, b:
#                                        end the stream: pl_stream gives this side's driver
#                                        --stop-file NAME.stop when its list has a stop, so the
#                                        stream outlives --min-seconds until the faults played
#                                        out, bounded by --timeout);
#                                        or "ROLE MS active-down" / "ROLE MS standby-down": fault.sh
#                                        rail-down of the rail this side's stream comm is active on /
#                                        has its standby on now, from NAME.stats.jsonl, recorded as
#                                        "rail-down R"; "ROLE MS both-paths-down": both rails at
#                                        once, recorded as "rail-down A+S")
#                                        faults for the next pl_stream, in order: ROLE (a|b) runs
#                                        `fault.sh FAULT.SH-ARGS` MS milliseconds after the integrity phase
#                                        started (its own clock, from the phase file). Each one
#                                        appends "<start_ms> <end_ms> <args>" (wall clock, ms) to
#                                        $VM_OUT/NAME.fault_ms. Cleared by pl_stream.
#   pl_shared_stream NAME PORT ARGS...   pl_stream without faults (an unfaulted baseline) that the tests
#                                        of one boot share: the first test of the boot that asks for
#                                        NAME with these ARGS, PL_ENV, plugin and NCCL_* / HA_NCCL_*
#                                        environment runs it; a later one gets a copy of its files
#                                        (NAME.*, and NAME.shared naming where it ran). Both guests
#                                        decide alike: the copy is kept whatever the run's outcome.
#   pl_now_ms                            wall clock in ms, without a process ($EPOCHREALTIME)
#   pl_capture_start NAME / pl_capture_stop   tcpdump of the RoCE packets (UDP 4791, headers only,
#                                        every interface) into $VM_OUT/NAME.pcap
[[ -n ${PLUGIN_LIB_LOADED:-} ]] && return 0
PLUGIN_LIB_LOADED=1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$REPO/test/vm/lib.sh"
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
DRIVER=$BUILD/tools/ha-net-driver/ha-net-driver
PLUGIN=${PL_PLUGIN:-$BUILD/src/plugin/libnccl-net-ha.so}
HA_PING=$BUILD/tools/ha-ping/ha-ping
PL_ENV=()
PL_FAULTS=()
PL_STREAM_ARGS=(--one-way --dev 0 --sizes 0,8,4K,64K,1M,4M --group 4 --inflight 8 --messages 200 --timeout 120)

pl_now_ms_to() { local t=${EPOCHREALTIME/[.,]/}; printf -v "$1" '%d' $((t / 1000)); }  # VAR: no subshell
pl_now_ms() { local ms; pl_now_ms_to ms; echo "$ms"; }

# RoCE packets on the wire (plugin-qos, plugin-qps): tcpdump of every interface (-i any: it survives
# a link going down), UDP 4791, headers only, into $VM_OUT/NAME.pcap; pl_capture_stop ends it.
# -Z root: write the file as root (no privilege drop); -s 128: headers only; -U: flush per packet.
pl_capture_start() { # NAME
  tcpdump -i any -n -U -s 128 -Z root -w "$VM_OUT/$1.pcap" udp port 4791 2>"$VM_OUT/$1.tcpdump.log" &
  PL_CAP_PID=$!
  sleep 1  # tcpdump is listening
}

pl_capture_stop() {
  sleep 0.5  # the last acknowledgements
  kill -INT "$PL_CAP_PID" 2>/dev/null || true
  wait "$PL_CAP_PID" 2>/dev/null || true
}

pl_driver_start() { # NAME PORT ARGS...   (its stderr: $PL_LOG_DIR/NAME.log, default $VM_OUT)
  local name=$1 port=$2 log=${PL_LOG_DIR:-$VM_OUT}/$1.log
  shift 2
  local args=(--plugin "$PLUGIN" --json "$VM_OUT/$name.json" "$@")
  PL_T0=${EPOCHREALTIME/[.,]/}
  if [[ $VM_ROLE == a ]]; then
    (
      ((${#PL_ENV[@]} == 0)) || export "${PL_ENV[@]}"
      exec "$DRIVER" "${args[@]}" --rank 0 --listen-port "$port" 2>"$log"
    ) &
    PL_PID=$!
    vm_wait_listen "$port"
    vm_barrier "$name"
  else
    vm_barrier "$name"
    (
      ((${#PL_ENV[@]} == 0)) || export "${PL_ENV[@]}"
      exec "$DRIVER" "${args[@]}" --rank 1 --peer "$VM_PEER_MGMT:$port" 2>"$log"
    ) &
    PL_PID=$!
  fi
}

pl_driver_wait() {
  PL_RC=0
  wait "$PL_PID" || PL_RC=$?
  local t1=${EPOCHREALTIME/[.,]/}
  PL_MS=$(((t1 - PL_T0) / 1000))
}

# As pl_driver_wait, for a driver whose process may take minutes to exit after its report: with
# QPs on a dead Soft-RoCE port left, the kernel destroys them at the process exit, under load up
# to ~52 s each (docs/operator-guide.md, "finalize or process exit after a port died"), and the exit waits for it. Once the phase file PHASE says
# "exit-RC" (the report is written) the process gets SEC more seconds; if it is still exiting
# then, PL_RC is the RC it reported, PL_MS ends there, and the process is left to the kernel
# ("$VM_OUT/NAME.exit_ms" then says "still exiting after SEC s").
pl_driver_wait_report() { # PHASE SEC
  local phase=$1 bound=$2 line t_exit=0 t1
  while kill -0 "$PL_PID" 2>/dev/null; do
    line=$(cat "$phase" 2>/dev/null || true)
    if [[ $line == exit-* ]]; then
      ((t_exit)) || t_exit=$SECONDS
      if ((SECONDS - t_exit >= bound)); then
        t1=${EPOCHREALTIME/[.,]/}
        PL_MS=$(((t1 - PL_T0) / 1000))
        PL_RC=${line%% *}
        PL_RC=${PL_RC#exit-}
        PL_EXITING=1
        vm_log "driver pid $PL_PID reported exit $PL_RC and is still exiting after ${bound} s (left to the kernel)"
        return 0
      fi
    fi
    sleep 0.2
  done
  PL_EXITING=0
  pl_driver_wait
}

pl_driver() { # NAME PORT ARGS...
  pl_driver_start "$@"
  pl_driver_wait
}

# The failover tests pin a comm to where its faults put it (failback, on by default, would take it
# home once a rail is back): the failback tests (failover-failback, -failback-flap, -flush,
# failover-recovered's home-down) turn it on again themselves.
pl_failover_env() {
  export NCCL_SOCKET_IFNAME=eth2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET HA_NCCL_ENABLE_FAILBACK=0
  unset HA_NCCL_IB_HCA NCCL_IB_HCA HA_NCCL_STATS_FILE
}

# Every 500 ms while PID runs: "<unix_ms> <sent_pkts> <rcvd_pkts>" of each rail's rxe port appended
# as one line to FILE (bash builtins only: cheap on the TCG guests).
pl_sample_counters() { # FILE PID
  local file=$1 pid=$2 r c line
  while kill -0 "$pid" 2>/dev/null; do
    line=$(pl_now_ms)
    for ((r = 0; r < ${VM_RAILS:-2}; r++)); do
      c=/sys/class/infiniband/$(vm_rdma_dev $r)/ports/1/hw_counters
      line+=" $(<"$c/sent_pkts") $(<"$c/rcvd_pkts")"
    done
    echo "$line" >>"$file"
    sleep 0.5
  done
}

# Waits until the phase file F names PHASE (or the driver PID ended); prints its "<unix_ms>".
pl_wait_phase() { # FILE PHASE PID [SEC]
  local f=$1 phase=$2 pid=$3 deadline=$((SECONDS + ${4:-300})) line
  while ((SECONDS < deadline)); do
    if [[ -s $f ]]; then
      line=$(<"$f")
      if [[ $line == "$phase "* ]]; then
        echo "${line#* }"
        return 0
      fi
      [[ $line == exit-* ]] && return 1
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    vm_nap 0.05
  done
  return 1
}

# stats-wait / log-wait (pl_stream): until FILE has COUNT lines matching REGEX (180 s at most, or
# PL_PID ended).
# No process per poll (vm_nap, bash's own regex match): a busy guest pays ~0.1 s per exec.
pl_lines_wait() { # FILE REGEX COUNT
  local f=$1 regex=$2 count=$3 deadline=$((SECONDS + 180)) line n
  while ((SECONDS < deadline)); do
    n=0
    if [[ -s $f ]]; then
      while IFS= read -r line; do [[ $line =~ $regex ]] && ((++n)); done <"$f"
    fi
    ((n >= count)) && { vm_log "wait: $count x $regex in $f"; return 0; }
    kill -0 "$PL_PID" 2>/dev/null || return 1
    vm_nap 0.1
  done
  return 1
}

# The rail (0..VM_RAILS-1) of this side's stream comm's active or standby port (FIELD: active |
# standby_port), from its last record in NAME.stats.jsonl (b's send comm, a's receive comm).
pl_stream_rail() { # NAME FIELD
  local kind=recv line port r v
  [[ $VM_ROLE == b ]] && kind=send
  line=$(grep -F "\"kind\":\"$kind\"" "$VM_OUT/$1.stats.jsonl" | tail -n 1)
  [[ $line == *"\"$2\":\"rxe"* ]] || return 1
  port=${line#*\"$2\":\"}
  port=${port%%:*}
  for ((r = 0; r < ${VM_RAILS:-2}; r++)); do
    v=VM_RAIL_DEV_$r
    [[ ${!v:-rxe$r} == "$port" ]] && { echo "$r"; return 0; }
  done
  return 1
}

pl_stream() { # NAME PORT ARGS...
  local name=$1 port=$2 start_ms f role at args wait_ms t0 t1 regex count now
  shift 2
  local faults=(${PL_FAULTS[@]+"${PL_FAULTS[@]}"})
  PL_FAULTS=()
  rm -f "$VM_OUT/$name.phase" "$VM_OUT/$name.stats.jsonl" "$VM_OUT/$name.fault_ms" "$VM_OUT/$name.stop"
  local mine=() stop=()
  for f in ${faults[@]+"${faults[@]}"}; do [[ ${f%% *} == "$VM_ROLE" ]] && mine+=("$f"); done
  for f in ${mine[@]+"${mine[@]}"}; do [[ $f == *\ stop ]] && stop=(--stop-file "$VM_OUT/$name.stop"); done
  PL_ENV+=("HA_NCCL_STATS_FILE=$VM_OUT/$name.stats.jsonl")
  pl_driver_start "$name" "$port" --phase-file "$VM_OUT/$name.phase" ${stop[@]+"${stop[@]}"} "$@"
  PL_ENV=()
  local sampler=
  if [[ ${PL_COUNTERS:-} ]]; then  # the rails' packet counters over the stream (NAME.counters)
    rm -f "$VM_OUT/$name.counters"
    pl_sample_counters "$VM_OUT/$name.counters" "$PL_PID" &
    sampler=$!
  fi
  if ((${#mine[@]})); then
    if start_ms=$(pl_wait_phase "$VM_OUT/$name.phase" integrity "$PL_PID"); then
      vm_log "$name: integrity phase started at $start_ms"
      # The faults and their waits ahead of the stream's traffic (vm_fault, vm_nap: lib.sh); the
      # driver, started above, stays at nice 0.
      renice -n -10 -p "$BASHPID" >/dev/null
      for f in "${mine[@]}"; do
        read -r role at args <<<"$f"
        pl_now_ms_to now
        wait_ms=$((start_ms + at - now))
        ((wait_ms <= 0)) || vm_nap_ms "$wait_ms"
        pl_now_ms_to t0
        case $args in
          pause\ *)
            vm_nap_ms "${args#pause }"
            continue ;;
          stats-wait\ * | log-wait\ *)
            local file=$VM_OUT/$name.stats.jsonl
            [[ $args == log-wait* ]] && file=$VM_OUT/$name.log
            read -r _ regex count <<<"$args"
            pl_lines_wait "$file" "$regex" "$count" || vm_log "$name: gave up waiting for $args"
            continue ;;
          stop)
            : >"$VM_OUT/$name.stop"
            vm_log "$name: stop: the stream ends at its next limit"
            continue ;;
          barrier\ *)
            vm_barrier "$name-${args#barrier }" || vm_log "$name: $args: the peer did not come"
            continue ;;
          active-down | standby-down)
            local field=active r
            [[ $args == standby-down ]] && field=standby_port
            if r=$(pl_stream_rail "$name" "$field"); then
              args="rail-down $r"
              vm_fault $args || vm_log "$name: fault.sh $args failed"
            else
              vm_log "$name: $args: no $field rail in $name.stats.jsonl"
            fi ;;
          both-paths-down)
            local ra rs
            if ra=$(pl_stream_rail "$name" active) && rs=$(pl_stream_rail "$name" standby_port); then
              args="rail-down $ra+$rs"
              vm_fault $args || vm_log "$name: fault.sh $args failed"
            else
              vm_log "$name: $args: no active or standby rail in $name.stats.jsonl"
            fi ;;
          proc-stop) kill -STOP "$PL_PID" || vm_log "$name: SIGSTOP failed" ;;  # the whole driver process
          proc-cont) kill -CONT "$PL_PID" || vm_log "$name: SIGCONT failed" ;;
          *) vm_fault $args || vm_log "$name: fault.sh $args failed" ;;
        esac
        pl_now_ms_to t1
        echo "$t0 $t1 $args" >>"$VM_OUT/$name.fault_ms"
        vm_log "$name: fault '$args' at +$((t0 - start_ms)) ms (fault.sh took $((t1 - t0)) ms)"
      done
      renice -n 0 -p "$BASHPID" >/dev/null
    else
      vm_log "$name: the integrity phase never started here; faults not injected"
    fi
  fi
  pl_driver_wait
  [[ -z $sampler ]] || wait "$sampler" || true
  echo "$PL_RC" >"$VM_OUT/$name.rc"
  echo "$PL_MS" >"$VM_OUT/$name.ms"
  vm_log "$name: exit $PL_RC after $PL_MS ms"
  tail -n 25 "$VM_OUT/$name.log" >&2
  vm_barrier "$name-done"
}

pl_shared_stream() { # NAME PORT ARGS...
  local name=$1 port=$2 key dir
  shift 2
  key=$({ printf '%s\n' "$name" "$PLUGIN" "$@" ${PL_ENV[@]+"${PL_ENV[@]}"}; env | grep -E '^(HA_)?NCCL_' | sort; } |
    md5sum | cut -c1-16)
  dir=/tmp/pl-shared/$key
  if [[ -f $dir/ran-in ]]; then
    PL_ENV=()
    cp "$dir/$name".* "$VM_OUT/"
    cp "$dir/ran-in" "$VM_OUT/$name.shared"
    PL_RC=$(<"$VM_OUT/$name.rc")
    vm_log "$name: shared: the stream of $(<"$dir/ran-in") in this boot (exit $PL_RC)"
    return 0
  fi
  pl_stream "$name" "$port" "$@"
  mkdir -p "$dir"
  cp "$VM_OUT/$name".* "$dir/"
  echo "${VM_OUT##*/}" >"$dir/ran-in"
}
