#!/usr/bin/env bash
# Guest side of plugin-qps: several QPs per path as net_ib has them (NCCL_IB_QPS_PER_CONNECTION,
# NCCL_IB_SPLIT_DATA_ON_QPS; HA_NCCL_IB_* wins). Every path of a comm - the primary on rxe0, the
# standby on rxe1, the path re-protection builds - has k QPs, k the smaller of the two sides'
# settings; split only when both sides ask for it. Real verbs on Soft-RoCE: nothing is emulated.
# Each case is a --one-way stream b -> a on rxe0 (standby rxe1), sizes 8 B .. 1 MiB, every byte
# verified. Per case, in $VM_OUT:
#   CASE.pcap       tcpdump of both rails (as plugin-qos: -i any, UDP 4791, headers only): each
#                   RDMA write's destination QP (BTH), opcode, and address and length (RETH)
#   CASE.qps.jsonl  this guest's QPs while the stream runs (qp_sampler below): one line per sample,
#                   {"unix_ms":T0,"end_ms":T1,"since_ms":T0-integrity start,"pid":DRIVER,
#                    "tids":[its threads],"qps":<`rdma -j resource show qp`>}
# Cases (checks/plugin_qps.py judges them):
#   one    nothing set (the control): one QP per path, every data write to one QP
#   rr     NCCL_IB_QPS_PER_CONNECTION=4: the messages of receive number seq on QP seq % 4 (round
#          robin); a pulls rail 0 at 3 s (the stream fails over to the standby's 4 QPs on rail 1)
#          and restores it at 6 s (re-protection builds 4 new QPs on rail 0)
#   split  NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_SPLIT_DATA_ON_QPS=1: every message in 4 parts of
#          ceil(ceil(size/4)/128)*128 bytes, part j at offset j*chunk on QP j (1 MiB: 4 x 256 KiB;
#          8 B: 8 B on QP 0 and zero-length writes with immediate data on QPs 1..3); faults as rr
#   calm   as split, without a fault: every byte verified with 4 QPs per connection, unfaulted
#   min    a: NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_SPLIT_DATA_ON_QPS=1; b: NCCL_IB_QPS_PER_CONNECTION=8
#          HA_NCCL_IB_QPS_PER_CONNECTION=2 (the HA_ variable wins): both use 2 QPs, round robin (b
#          does not split); no fault
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"
pl_failover_env
ARGS=(--one-way --dev 0 --sizes 8,4K,64K,1M --group 4 --inflight 8 --timeout 120)

# qp_sampler CASE: this guest's QPs while CASE's driver runs, sampled from the driver's integrity
# phase on (its phase file) every 500 ms for 3 s (before the faults' rail-down at 3 s), then every
# second, until the driver ended (the phase file says exit-RC, or the process is gone) or
# CASE.qps.stop exists. One `rdma` exec per sample (~0.1 s of the guest's one vCPU); the rest is
# bash builtins. The driver is the process whose command line names CASE.phase; its threads are
# recorded with each sample (the kernel names the thread that created a QP, e.g. the plugin's
# progress thread: checks/plugin_qps.py counts a QP as the driver's as ha-net-driver's
# --check-resources does, tools/ha-net-driver/sysinfo.cpp count_owned).
qp_sampler() { # CASE
  local name=$1 phase=$VM_OUT/$1.phase out=$VM_OUT/$1.qps.jsonl halt=$VM_OUT/$1.qps.stop
  local line='' start='' pid=0 d arg prev now end qps tids t
  local args=()
  shopt -s nullglob
  while [[ ! -e $halt ]]; do
    line=''
    [[ -s $phase ]] && { { read -r line <"$phase"; } 2>/dev/null || true; }
    [[ $line == exit-* ]] && return 0
    if [[ $line == "integrity "* ]]; then
      start=${line#integrity }
      break
    fi
    vm_nap 0.05
  done
  [[ $start =~ ^[0-9]+$ ]] || return 0
  for d in /proc/[0-9]*; do
    { mapfile -d '' -t args <"$d/cmdline"; } 2>/dev/null || continue
    prev=''
    for arg in ${args[@]+"${args[@]}"}; do
      [[ $prev == --phase-file && $arg == "$phase" ]] && { pid=${d#/proc/}; break 2; }
      prev=$arg
    done
  done
  ((pid)) || vm_log "$name: qp_sampler: no process names $phase; sampling without the driver's threads"
  while [[ ! -e $halt ]]; do
    { read -r line <"$phase"; } 2>/dev/null || true
    [[ $line == exit-* ]] && break
    ((pid == 0)) || kill -0 "$pid" 2>/dev/null || break
    pl_now_ms_to now
    tids=("/proc/$pid/task/"*)
    tids=(${tids[@]+"${tids[@]##*/}"})
    qps=$(rdma -j resource show qp 2>/dev/null) || qps=''
    qps=${qps//$'\n'/}
    [[ $qps == \[* ]] || qps=null
    pl_now_ms_to end
    t=''
    ((${#tids[@]} == 0)) || printf -v t '%s,' "${tids[@]}"
    printf '{"unix_ms":%d,"end_ms":%d,"since_ms":%d,"pid":%d,"tids":[%s],"qps":%s}\n' \
      "$now" "$end" $((now - start)) "$pid" "${t%,}" "$qps" >>"$out"
    if ((now - start < 3000)); then vm_nap 0.5; else vm_nap 1; fi
  done
  return 0
}

qps_case() { # CASE PORT "ENV-A" "ENV-B" -- DRIVER-ARGS...   (ENV: VAR=VALUE ..., this side's)
  local name=$1 port=$2 env sampler
  [[ $VM_ROLE == a ]] && env=$3 || env=$4
  shift 4
  [[ ${1:-} == -- ]] && shift
  pl_capture_start "$name"
  vm_barrier "$name-capturing"
  rm -f "$VM_OUT/$name.phase" "$VM_OUT/$name.qps.jsonl" "$VM_OUT/$name.qps.stop"
  qp_sampler "$name" &
  sampler=$!
  read -ra PL_ENV <<<"$env"
  pl_stream "$name" "$port" "${ARGS[@]}" "$@"
  : >"$VM_OUT/$name.qps.stop"
  wait "$sampler" || true
  pl_capture_stop
}

qps_case one 18796 "" "" -- --messages 300 --min-seconds 4
PL_FAULTS=("a 3000 rail-down 0" "a 6000 rail-up 0")
qps_case rr 18797 NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_QPS_PER_CONNECTION=4 -- --messages 300 --min-seconds 12
vm_fault clear 0 >/dev/null 2>&1 || true
PL_FAULTS=("a 3000 rail-down 0" "a 6000 rail-up 0")
qps_case split 18798 "NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_SPLIT_DATA_ON_QPS=1" \
  "NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_SPLIT_DATA_ON_QPS=1" -- --messages 300 --min-seconds 12
vm_fault clear 0 >/dev/null 2>&1 || true
qps_case calm 18789 "NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_SPLIT_DATA_ON_QPS=1" \
  "NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_SPLIT_DATA_ON_QPS=1" -- --messages 300 --min-seconds 4
qps_case min 18799 "NCCL_IB_QPS_PER_CONNECTION=4 NCCL_IB_SPLIT_DATA_ON_QPS=1" \
  "NCCL_IB_QPS_PER_CONNECTION=8 HA_NCCL_IB_QPS_PER_CONNECTION=2" -- --messages 300 --min-seconds 4
