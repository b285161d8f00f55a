#!/usr/bin/env bash
# Guest side of bench/scale-bench.sh: what idle comm pairs cost, and how failover and
# re-protection scale with their number. a = rank 0, b = rank 1; the plugin of the build dir, HA on
# and off, --dev 0 = rxe0 (standbys on the other rails), handshakes over the management NIC.
# For each N of NCCL_HA_BENCH_SIZES (comm pairs per rank: N send + N recv comms) and each variant
# of NCCL_HA_BENCH_VARIANTS (on: HA_NCCL_ENABLE_STANDBY=1, off: =0), one driver pair:
#   --comms N --messages 0 --comms-hold HOLD: N pairs, one verified message each way, then held
#   open with no plugin call at all (the driver's thread sleeps). Per rank, from the hold's start:
#     +SETTLE s      resources: RSS, fds, threads (/proc), QPs, CQs, MRs of the process (rdma res)
#     +SETTLE..+SETTLE+SAMPLE s   CPU time of every thread of the process (/proc/PID/task/*/stat)
#                    and of the whole guest (/proc/stat): idle cost
#   HA on, on a only, after the sample: rail 0 down (ip link, timed here) for DOWN s, then up: every
#   comm fails over (a's by the port event, b's by the peer's notice or their own detection) and
#   re-protects (two rails: once rail 0 is ACTIVE again; four: on another rail at once); the stats
#   files (HA_NCCL_STATS_FILE) time each comm's failover and its standby back "up". The hold lasts
#   until every comm of this rank has a standby again (or REPROTECT_MAX s after rail 0 came back).
#   Failback stays off (pl_failover_env): the comms stay where the failover put them.
# Files per run NAME (n<N>-<variant>) in $VM_OUT: NAME.{json,log,rc,ms,phase,stats.jsonl} (the
# driver's), NAME.res (key value lines), NAME.cpu0/.cpu1 (the two /proc samples: "<tid> <name>
# <utime+stime ticks>" lines, "guest <busy> <total>"), on a NAME.faults ("<what> <unix ms>"); with
# NCCL_HA_BENCH_PERF=1 NAME.perf.txt / .perf-tree.txt (perf report: where the fault's first seconds go),
# NAME.perf-seconds.txt ("<second> <thread name> <samples>": when each thread was busy) and
# NAME.perf-script.gz (the plugin threads' samples with call chains: bench/perf_attribute.py).
set -euo pipefail
export NCCL_HA_VM_BARRIER_TIMEOUT=${NCCL_HA_VM_BARRIER_TIMEOUT:-1800}  # thousands of comms open and close slowly
source "$(dirname "$0")/../test/integration/plugin-lib.sh"  # REPO BUILD DRIVER PLUGIN, pl_driver_*
pl_failover_env
export NCCL_DEBUG=WARN NCCL_DEBUG_SUBSYS=INIT,NET HA_NET_DRIVER_QUIET=1
SIZES=${NCCL_HA_BENCH_SIZES:-16 64 256 1024}
VARIANTS=${NCCL_HA_BENCH_VARIANTS:-on off}
SETTLE=${NCCL_HA_BENCH_SETTLE:-5}   # s after the hold began before anything is measured
SAMPLE=${NCCL_HA_BENCH_SAMPLE:-10}  # s of CPU sampling
DOWN=${NCCL_HA_BENCH_DOWN:-5}       # s rail 0 stays down
REPROTECT_MAX=${NCCL_HA_BENCH_REPROTECT_MAX:-240}
PERF=${NCCL_HA_BENCH_PERF:-0}       # 1: a system-wide profile of the fault's first PERF_S s (perf)
PERF_S=${NCCL_HA_BENCH_PERF_S:-20}
HA_THREADS=ncclHaProgress,ncclHaWorker,ncclHaReaper,ha-net-driver
[[ -x $DRIVER ]] || { vm_log "missing driver $DRIVER"; exit 1; }
# The driver listens once per pair while it connects, and every handshake holds a socket for a
# moment: 1024 pairs need more than the default 1024 descriptors (a large job raises it too).
ulimit -n 65536
port=18790
# The driver's log and the stats file live in the guest's tmpfs while the driver runs, and are
# copied to $VM_OUT (a 9p share) afterwards: under TCG every write to the share is a slow round trip
# to the host, and the plugin's log lines come from its progress thread (a thousand failover lines
# at once would time the share, not the plugin).
LOCAL=/tmp/scale-bench
mkdir -p "$LOCAL"
export PL_LOG_DIR=$LOCAL
TICK=$(getconf CLK_TCK)
echo "$TICK" >"$VM_OUT/clk_tck"

now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo "${t:0:-3}"; }

cpu_sample() { # PID OUT: per-thread CPU ticks of PID and the guest's busy/total ticks
  local pid=$1 out=$2 t s rest name u n sy id io irq sirq st
  local -a f
  : >"$out"
  for t in /proc/"$pid"/task/*; do
    read -r s <"$t/stat" 2>/dev/null || continue  # (no such thread, or no process: the glob as is)
    name=${s#*(}
    name=${name%)*}
    rest=${s##*) }
    read -r -a f <<<"$rest"  # f[0] = state (field 3): utime = field 14 = f[11], stime = f[12]
    echo "${t##*/} ${name// /_} $((f[11] + f[12]))" >>"$out"
  done
  read -r _ u n sy id io irq sirq st _ </proc/stat
  echo "guest $((u + n + sy + irq + sirq + st)) $((u + n + sy + id + io + irq + sirq + st))" >>"$out"
}

count_res() { # KIND PID: objects of KIND (qp, cq, mr) that rdma res lists for any thread of PID
  local json t n=0 c   # (an object's "pid" is the thread that created it: a worker's for most QPs)
  json=$(rdma -j res show "$1" 2>/dev/null) || { echo -1; return; }
  for t in /proc/"$2"/task/*; do
    c=$(grep -o "\"pid\":${t##*/}[,}]" <<<"$json" | wc -l || true)
    n=$((n + c))
  done
  echo "$n"
}

resources() { # PID OUT
  local pid=$1 out=$2
  {
    echo "unix_ms $(now_ms)"
    awk '/^VmRSS:/ { print "rss_kib", $2 } /^Threads:/ { print "threads", $2 }' /proc/"$pid"/status
    echo "fds $(ls /proc/"$pid"/fd | wc -l)"
    echo "qps $(count_res qp "$pid")"
    echo "cqs $(count_res cq "$pid")"
    echo "mrs $(count_res mr "$pid")"
    awk '/^MemAvailable:/ { print "guest_mem_available_kib", $2 }' /proc/meminfo
  } >"$out"
}

# Until every comm of this rank (2N) has a standby record "up" after T_MS (rail 0 went down: on two
# rails re-protection waits for its return, on four it finds another rail at once), or the bound.
wait_reprotected() { # NAME N T_MS
  local f=$LOCAL/$1.stats.jsonl want=$((2 * $2)) deadline=$((SECONDS + REPROTECT_MAX)) got=0
  while ((SECONDS < deadline)); do
    got=$(awk -v t="$3" 'index($0, "\"event\":\"standby\"") && index($0, "\"state\":\"up\"") {
            if (match($0, /"time_unix_ms":[0-9]+/) && substr($0, RSTART + 15, RLENGTH - 15) + 0 >= t &&
                match($0, /"comm":"[^"]*"/)) up[substr($0, RSTART, RLENGTH)] = 1 }
          END { print length(up) }' "$f" 2>/dev/null || echo 0)
    ((got >= want)) && { vm_log "$1: all $want comms protected again"; return 0; }
    kill -0 "$PL_PID" 2>/dev/null || return 1
    sleep 3  # the figures come from the records' times; the look itself costs the storm CPU
  done
  vm_log "$1: $got of $want comms protected again after ${REPROTECT_MAX} s"
  return 1
}

run() { # N VARIANT
  local n=$1 v=$2 name="n$1-$2" hold standby=1 t0 t_down
  [[ $v == off ]] && standby=0
  port=$((port + 1))
  # The hold must outlast the measurement (reading the resources takes seconds here); this script
  # ends it (--wait-file) once both ranks are done. With HA on: + the fault and the re-protection.
  hold=$((SETTLE + SAMPLE + 120))
  [[ $v == on ]] && hold=$((hold + DOWN + REPROTECT_MAX))
  rm -f "$VM_OUT/$name".*
  rm -f "$LOCAL/$name".*
  PL_ENV=("HA_NCCL_ENABLE_STANDBY=$standby" "HA_NCCL_STATS_FILE=$LOCAL/$name.stats.jsonl")
  pl_driver_start "$name" "$port" --dev 0 --messages 0 --comms "$n" --comms-hold "$hold" \
    --timeout $((hold + 1800)) --phase-file "$VM_OUT/$name.phase" --wait-file "$VM_OUT/$name.end"
  PL_ENV=()
  if t0=$(pl_wait_phase "$VM_OUT/$name.phase" "comms hold" "$PL_PID" 3600); then
    echo "hold_start_ms $t0" >"$VM_OUT/$name.hold"
    sleep "$SETTLE"
    resources "$PL_PID" "$VM_OUT/$name.res"
    cpu_sample "$PL_PID" "$VM_OUT/$name.cpu0"
    sleep "$SAMPLE"
    cpu_sample "$PL_PID" "$VM_OUT/$name.cpu1"
    if [[ $v == on ]]; then
      local perf_pid=''
      if [[ $PERF == 1 ]]; then  # every thread and the kernel (rxe), sampled by the clock (no PMU under TCG)
        perf record -q -a -g -e cpu-clock -F 250 -o "$LOCAL/$name.perf.data" -- sleep "$PERF_S" \
          >"$VM_OUT/$name.perf.log" 2>&1 &
        perf_pid=$!
      fi
      # In step, so that b waits out the fault asleep: the exchange below polls the peer, and its
      # processes (expensive under TCG) would compete with the failovers being measured.
      vm_barrier "$name-fault"
      if [[ $VM_ROLE == b ]]; then
        sleep "$DOWN"
      else
        echo "rail0-down $(now_ms)" >>"$VM_OUT/$name.faults"
        ip link set "$(vm_rail_if 0)" down
        sleep "$DOWN"
        echo "rail0-up $(now_ms)" >>"$VM_OUT/$name.faults"
        vm_fault rail-up 0 || vm_log "$name: rail 0 did not come back"
        echo "rail0-active $(now_ms)" >>"$VM_OUT/$name.faults"
      fi
      t_down=$(vm_exchange "$name-down" "$(grep -s '^rail0-down ' "$VM_OUT/$name.faults" | cut -d' ' -f2)")
      [[ $VM_ROLE == a ]] && t_down=$(grep '^rail0-down ' "$VM_OUT/$name.faults" | cut -d' ' -f2)
      wait_reprotected "$name" "$n" "$t_down" || true
      if [[ -n $perf_pid ]]; then
        wait "$perf_pid" || true
        # Per thread and object, then the plugin's threads by function: self time (perf.txt), and
        # inclusive time (perf-tree.txt: which of our functions the kernel's and rxe's time is spent under).
        { perf report -q -i "$LOCAL/$name.perf.data" --stdio --no-children --sort comm,dso -g none --percent-limit 0.3
          perf report -q -i "$LOCAL/$name.perf.data" --stdio --no-children --comms "$HA_THREADS" --sort comm,sym \
            -g none --percent-limit 0.2; } >"$VM_OUT/$name.perf.txt" 2>>"$VM_OUT/$name.perf.log" || true
        perf report -q -i "$LOCAL/$name.perf.data" --stdio --children --comms "$HA_THREADS" --sort comm,sym -g none \
          --percent-limit 0.5 >"$VM_OUT/$name.perf-tree.txt" 2>>"$VM_OUT/$name.perf.log" || true
        # Samples per thread name and second of the profile: when each thread was busy.
        perf script -i "$LOCAL/$name.perf.data" -F comm,time 2>>"$VM_OUT/$name.perf.log" |
          awk '{ t = $NF + 0; if (t0 == "") t0 = t; $NF = ""; sub(/ +$/, ""); gsub(/ /, "_");
                 n[int(t - t0) " " $0]++ } END { for (k in n) print k, n[k] }' |
          sort -n -k1,1 -k3,3nr >"$VM_OUT/$name.perf-seconds.txt" || true
        # The plugin threads' samples with their call chains (bench/perf_attribute.py reads them).
        perf script -i "$LOCAL/$name.perf.data" --comms "$HA_THREADS" -F comm,tid,time,ip,sym,dso 2>>"$VM_OUT/$name.perf.log" |
          gzip -1 >"$VM_OUT/$name.perf-script.gz" || true
        rm -f "$LOCAL/$name.perf.data"
      fi
    fi
    vm_barrier "$name-measured"
    touch "$VM_OUT/$name.end"  # the driver's --abort-file: end the hold now
  else
    vm_log "$name: the hold never began here"
  fi
  pl_driver_wait
  cp "$LOCAL/$name".* "$VM_OUT/" 2>/dev/null || true
  rm -f "$LOCAL/$name".*
  echo "$PL_RC" >"$VM_OUT/$name.rc"
  echo "$PL_MS" >"$VM_OUT/$name.ms"
  vm_log "$name: exit $PL_RC after $PL_MS ms"
  vm_barrier "$name-done"
}

for n in $SIZES; do
  for v in $VARIANTS; do
    run "$n" "$v"
  done
done
vm_log "scale bench: done"
