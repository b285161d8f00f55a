#!/usr/bin/env bash
# GPU smoke test: NCCL's all_reduce_perf (nccl-tests) between two ranks through libnccl-net-ha.so,
# on a machine with an NVIDIA GPU, NCCL and nccl-tests. Runs, each with NCCL_DEBUG=INFO captured
# to OUT/<run>.log:
#   ha-host          the plugin, NCCL's network buffers in host memory (NCCL_NET_GDR_LEVEL=LOC)
#   ha-gpu-dmabuf    the plugin, GPU buffers (NCCL_NET_GDR_LEVEL=SYS), dma-buf allowed
#                    (NCCL_DMABUF_ENABLE=1 HA_NCCL_DMABUF_ENABLE=1)
#   ha-gpu-nodmabuf  the same with dma-buf off (both 0): peer memory, or staging through the host
#   ha-failover      the plugin, rail 0's netdev taken down mid-run and up again: the run must
#                    complete and the log must show the plugin's "failover of" WARN
#   ib-host, ib-gpu  NCCL's internal IB transport (NCCL_NET=IB, no plugin), the reference
# and prints a table (also OUT/table.txt): busbw, ratio to the IB run of the same buffer kind,
# failovers seen, which memory path NCCL used, verdict. A ha-gpu run fails when the plugin offered
# NCCL GPU memory (ptrSupport CUDA, or DMABUF with dma-buf on the GPU) and NCCL still staged its
# network buffers through host memory (no GDRDMA in its NET/HA channel lines); ha-gpu-dmabuf is
# skipped when the plugin offered none (no peer-memory client, no dma-buf on its devices).
# Two ranks as two "hosts" on this machine: nccl-tests built with MPI=1 runs `mpirun -np 2`, each
# rank with its own NCCL_HOSTID (--gpus 1, the default with one GPU: both ranks on GPU 0); built
# without MPI it runs one process with --gpus GPUs (2 or more) and NCCL_P2P_DISABLE=1
# NCCL_SHM_DISABLE=1 so that its ranks meet through the network.
# No RDMA NIC: two Soft-RoCE rails on dummy netdevs (rdma_rxe; both ranks use each rxe device in
# loopback), removed on exit. Missing pieces (rdma-core, the rxe provider, rdma_rxe, ...), or a
# Soft-RoCE setup the kernel refuses: "gpu-smoke: skipped: <reason>", exit 0 (--require: exit 1).
# Exit 0 when every run that could run passed, 1 otherwise, 2 on a usage error.
#   scripts/gpu-smoke.sh [--dry-run] [--plugin PATH] [--out DIR] ...      (--help: every option)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}

PLUGIN_ARG="" SIZES="1M:256M" ITERS=20 GPUS="" REQUIRE=0 OUT="" DRY=0 LAUNCH=auto SOFTROCE=0
FAIL_NETDEV="" FAULT_AFTER=5 FAULT_DOWN=5 RUN_TIMEOUT=900
SR_IF=(gsmoke0 gsmoke1) SR_DEV=(gsmoke_rxe0 gsmoke_rxe1) SR_ADDR=(10.231.0.1/24 10.232.0.1/24)
# Where /sys, /etc/libibverbs.d and the libraries are looked for: "" (this machine), or the tree
# of GPU_SMOKE_SYSROOT (tests; ldconfig is not asked then).
SYS=${GPU_SMOKE_SYSROOT:-}
RDMA_CORE_PKGS="Debian: apt-get install libibverbs1 ibverbs-providers rdma-core; RHEL: dnf install rdma-core libibverbs"

usage() {
  cat <<EOF
usage: scripts/gpu-smoke.sh [options]
  --plugin PATH     libnccl-net-ha.so to test (default: build/src/plugin/, else an install prefix:
                    \$NCCL_HA_PREFIX/lib, /opt/nccl-ha/lib, /usr/local/lib, /usr/lib, /usr/lib64)
  --sizes MIN:MAX   message sizes, all_reduce_perf -b MIN -e MAX -f 2 (default $SIZES)
  --iters N         iterations per size, -n N (default $ITERS)
  --gpus N          GPUs in all: MPI build: N/2 per rank (1: both ranks share GPU 0);
                    without MPI: one process with -g N, N >= 2 (default: 2 if present, else 1)
  --launcher KIND   auto (ldd all_reduce_perf | grep -i mpi), mpi or single (default auto)
  --softroce        use Soft-RoCE rails even when RDMA NICs are present
  --fail-netdev IF  with RDMA NICs: the netdev of rail 0 that the failover run may take down
                    (without it, and without Soft-RoCE, the failover run is skipped)
  --fault-after S   seconds after the traffic started before rail 0 goes down (default $FAULT_AFTER)
  --fault-down S    seconds rail 0 stays down (default $FAULT_DOWN)
  --timeout S       per run (default $RUN_TIMEOUT)
  --require         a missing piece exits 1 instead of "skipped" and 0 (GPU runners)
  --out DIR         logs and the table (default build/gpu-smoke/)
  --dry-run         look for the pieces, print every command it would run, run none
  --help
Environment: NCCL_HOME, NCCL_TESTS_DIR, MPIRUN, NCCL_HA_BUILD_DIR, NCCL_HA_PREFIX; NCCL_IB_HCA /
HA_NCCL_IB_HCA / NCCL_SOCKET_IFNAME / CUDA_VISIBLE_DEVICES are kept when set (Soft-RoCE sets the
HCAs itself; --gpus 1 with MPI puts both ranks on the first visible GPU).
GPU_SMOKE_SYSROOT=DIR (tests): look for libibverbs.so.1, the rxe provider, /etc/libibverbs.d,
/sys/module and /sys/class/{infiniband,net} under DIR instead of /, and not in ldconfig -p.
EOF
}

say() { printf 'gpu-smoke: %s\n' "$*"; }
join() { local sep=$1 out=${2:-} x; shift 2 || true; for x in "$@"; do out+=$sep$x; done; printf '%s' "$out"; }
usage_error() { printf 'gpu-smoke: %s\n' "$*" >&2; usage >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || usage_error "$1 needs a value"; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

parse_args() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      --help | -h) usage; exit 0 ;;
      --plugin) need_value "$@"; PLUGIN_ARG=$2; shift ;;
      --sizes) need_value "$@"; SIZES=$2; shift ;;
      --iters) need_value "$@"; ITERS=$2; shift ;;
      --gpus) need_value "$@"; GPUS=$2; shift ;;
      --launcher) need_value "$@"; LAUNCH=$2; shift ;;
      --fail-netdev) need_value "$@"; FAIL_NETDEV=$2; shift ;;
      --fault-after) need_value "$@"; FAULT_AFTER=$2; shift ;;
      --fault-down) need_value "$@"; FAULT_DOWN=$2; shift ;;
      --timeout) need_value "$@"; RUN_TIMEOUT=$2; shift ;;
      --out) need_value "$@"; OUT=$2; shift ;;
      --softroce) SOFTROCE=1 ;;
      --require) REQUIRE=1 ;;
      --dry-run) DRY=1 ;;
      *) usage_error "unknown option '$1'" ;;
    esac
    shift
  done
  [[ $SIZES =~ ^[0-9]+[KMG]?:[0-9]+[KMG]?$ ]] || usage_error "--sizes wants MIN:MAX, e.g. 1M:256M"
  SIZE_MIN=${SIZES%%:*} SIZE_MAX=${SIZES##*:}
  { is_uint "$ITERS" && ((ITERS > 0)); } || usage_error "--iters wants a positive integer"
  [[ -z $GPUS ]] || { is_uint "$GPUS" && ((GPUS > 0)); } || usage_error "--gpus wants a positive integer"
  [[ $LAUNCH == auto || $LAUNCH == mpi || $LAUNCH == single ]] || usage_error "--launcher: auto, mpi or single"
  local v
  for v in "$FAULT_AFTER" "$FAULT_DOWN" "$RUN_TIMEOUT"; do is_uint "$v" || usage_error "'$v' is not a number of seconds"; done
  OUT=${OUT:-$BUILD/gpu-smoke}
}

# ---- finding the pieces (read-only) ----
MISSING=() NOTES=()
missing() { MISSING+=("$*"); }

find_gpu() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    missing "no NVIDIA GPU: nvidia-smi is not in PATH (no NVIDIA driver installed)"; GPU_COUNT=0; return
  fi
  local list
  list=$(nvidia-smi -L 2>&1) || true
  GPU_COUNT=$(grep -c '^GPU [0-9]' <<<"$list" || true)
  if ((GPU_COUNT == 0)); then
    missing "no NVIDIA GPU: nvidia-smi -L lists none ($(head -n 1 <<<"$list"))"; return
  fi
  say "found $GPU_COUNT GPU(s): $(sed -n 's/^GPU 0: \([^(]*\).*/\1/p' <<<"$list" | sed 's/ *$//')$( ((GPU_COUNT > 1)) && echo ", ...")"
}

find_nccl() {
  local d cands=()
  [[ -n ${NCCL_HOME:-} ]] && cands+=("$NCCL_HOME/lib" "$NCCL_HOME/lib64")
  local IFS=:
  for d in ${LD_LIBRARY_PATH:-}; do [[ -n $d ]] && cands+=("$d"); done
  unset IFS
  NCCL_LIB=""
  for d in "${cands[@]}"; do
    if [[ -e $d/libnccl.so.2 ]]; then NCCL_LIB=$d/libnccl.so.2; break; fi
  done
  if [[ -z $NCCL_LIB ]] && command -v ldconfig >/dev/null 2>&1; then
    NCCL_LIB=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" && !f {print $NF; f = 1}')
  fi
  if [[ -z $NCCL_LIB && -x /sbin/ldconfig ]]; then
    NCCL_LIB=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" && !f {print $NF; f = 1}')
  fi
  if [[ -z $NCCL_LIB ]]; then
    missing "NCCL not found: no libnccl.so.2 in NCCL_HOME/lib (NCCL_HOME=${NCCL_HOME:-unset}), LD_LIBRARY_PATH or ldconfig -p"
    return
  fi
  NCCL_LIB_DIR=$(dirname "$NCCL_LIB")
  say "found NCCL: $NCCL_LIB ($(basename "$(readlink -f "$NCCL_LIB")"))"
}

find_tests() {
  local c cands=()
  if [[ -n ${NCCL_TESTS_DIR:-} ]]; then
    for c in all_reduce_perf all_reduce_perf_mpi; do cands+=("$NCCL_TESTS_DIR/$c" "$NCCL_TESTS_DIR/build/$c"); done
  fi
  for c in all_reduce_perf all_reduce_perf_mpi; do
    command -v "$c" >/dev/null 2>&1 && cands+=("$(command -v "$c")")
  done
  TESTS_BIN=""
  for c in "${cands[@]}"; do
    if [[ -x $c ]]; then TESTS_BIN=$c; break; fi
  done
  if [[ -z $TESTS_BIN ]]; then
    missing "nccl-tests not found: no all_reduce_perf in NCCL_TESTS_DIR (${NCCL_TESTS_DIR:-unset}, also its build/) or PATH"
    return
  fi
  say "found nccl-tests: $TESTS_BIN"
}

# MPI=1 builds link libmpi; those run one rank per process under mpirun.
find_launcher() {
  if [[ $LAUNCH == auto ]]; then
    if [[ -z $TESTS_BIN ]]; then
      LAUNCH=single
      command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1 && LAUNCH=mpi
      NOTES+=("no all_reduce_perf to inspect: assuming the '$LAUNCH' launcher (--launcher)")
    elif grep -qi mpi <<<"$(ldd "$TESTS_BIN" 2>/dev/null || true)"; then
      LAUNCH=mpi
    else
      LAUNCH=single
    fi
  fi
  if [[ $LAUNCH == mpi ]]; then
    MPIRUN_BIN=$(command -v "${MPIRUN:-mpirun}" 2>/dev/null || true)
    if [[ -z $MPIRUN_BIN ]]; then
      missing "no MPI launcher: nccl-tests built with MPI=1 (ldd shows libmpi, or --launcher mpi) runs under ${MPIRUN:-mpirun}, which is not in PATH (set MPIRUN)"
      MPIRUN_BIN=mpirun
    else
      say "found MPI launcher: $MPIRUN_BIN (two ranks, NCCL_HOSTID per rank)"
    fi
    MPI_FLAVOR=other
    if grep -q 'Open MPI\|OpenRTE' <<<"$("$MPIRUN_BIN" --version 2>&1 || true)"; then MPI_FLAVOR=openmpi; fi
  fi
  local have=${GPU_COUNT:-0}
  if [[ -z $GPUS ]]; then GPUS=$((have >= 2 ? 2 : 1)); fi
  if [[ $LAUNCH == single ]]; then
    say "launcher: one process, -g $GPUS (nccl-tests without MPI; NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)"
    ((GPUS >= 2 || have == 0)) || [[ -z $TESTS_BIN ]] || missing "nccl-tests without MPI runs one process, and two ranks on one GPU need two processes (have $have GPU(s)): build nccl-tests with MPI=1 (and an MPI: Debian openmpi-bin libopenmpi-dev, RHEL openmpi-devel) or use --gpus 2 on a machine with two GPUs"
  else
    ((GPUS == 1 || GPUS % 2 == 0)) || usage_error "--gpus with MPI: 1 (both ranks on GPU 0) or an even number"
  fi
  if ((have > 0 && GPUS > have)); then missing "--gpus $GPUS but only $have GPU(s) present"; fi
}

find_plugin() {
  PLUGIN=""
  if [[ -n $PLUGIN_ARG ]]; then
    if [[ -f $PLUGIN_ARG ]]; then PLUGIN=$(readlink -f "$PLUGIN_ARG"); else missing "--plugin $PLUGIN_ARG: no such file"; return; fi
  else
    local d
    for d in "$BUILD/src/plugin" ${NCCL_HA_PREFIX:+"$NCCL_HA_PREFIX/lib"} ${NCCL_HA_PREFIX:+"$NCCL_HA_PREFIX/lib64"} \
      /opt/nccl-ha/lib /usr/local/lib /usr/lib /usr/lib64 /usr/lib/x86_64-linux-gnu; do
      if [[ -f $d/libnccl-net-ha.so ]]; then PLUGIN=$(readlink -f "$d/libnccl-net-ha.so"); break; fi
    done
    if [[ -z $PLUGIN ]]; then
      missing "plugin not found: no libnccl-net-ha.so in $BUILD/src/plugin (build it) or an install prefix; or pass --plugin PATH"
      return
    fi
  fi
  say "found plugin: $PLUGIN"
}

# rdma-core's libibverbs.so.1, which the plugin (and NCCL's IB transport) loads: ldconfig's
# cache, LD_LIBRARY_PATH and the usual library directories (only the latter under a SYSROOT).
have_libibverbs() {
  local d dirs=()
  if [[ -z $SYS ]]; then
    local ldc
    for ldc in "$(command -v ldconfig 2>/dev/null || true)" /sbin/ldconfig; do
      [[ -n $ldc && -x $ldc ]] || continue
      if grep -q 'libibverbs\.so\.1 ' <<<"$("$ldc" -p 2>/dev/null)"; then return 0; fi
    done
    local IFS=:
    for d in ${LD_LIBRARY_PATH:-}; do [[ -n $d ]] && dirs+=("$d"); done
    unset IFS
  fi
  dirs+=("$SYS"/usr/lib/*-linux-gnu* "$SYS"/usr/lib64 "$SYS"/usr/lib "$SYS"/lib/*-linux-gnu* "$SYS"/lib64 "$SYS"/lib)
  for d in "${dirs[@]}"; do [[ -e $d/libibverbs.so.1 ]] && return 0; done
  return 1
}

# Soft-RoCE's userspace: libibverbs' rxe provider (librxe-rdmav<N>.so in its provider directory),
# enabled by /etc/libibverbs.d/rxe.driver. Without it the rxe devices exist but no verbs program
# sees them. Empty when present, else what is missing.
rxe_provider_missing() {
  local d f dirs=("$SYS"/usr/lib/*/libibverbs "$SYS"/usr/lib64/libibverbs "$SYS"/usr/lib/libibverbs "$SYS"/lib64/libibverbs)
  local found=""
  for d in "${dirs[@]}"; do
    for f in "$d"/librxe-rdmav*.so; do [[ -e $f ]] && found=$f; done
  done
  if [[ -z $found ]]; then
    printf 'no librxe-rdmav*.so in %s/usr/lib/*/libibverbs, %s/usr/lib64/libibverbs' "$SYS" "$SYS"
  elif [[ ! -e $SYS/etc/libibverbs.d/rxe.driver ]]; then
    printf '%s is there, but %s/etc/libibverbs.d/rxe.driver is not (the provider is not enabled)' "$found" "$SYS"
  fi
}

# RDMA: ports ACTIVE now (NIC mode), else Soft-RoCE if this user may set it up; either needs
# rdma-core's libibverbs, Soft-RoCE also the rxe provider, the rdma_rxe module, ip and rdma.
find_rdma() {
  local d p
  NIC_DEVS=()
  for d in "$SYS"/sys/class/infiniband/*; do
    [[ -e $d ]] || continue
    case $(basename "$d") in gsmoke_rxe*) continue ;; esac
    for p in "$d"/ports/*/state; do
      if grep -q ACTIVE "$p" 2>/dev/null; then NIC_DEVS+=("$(basename "$d")"); break; fi
    done
  done
  AS_ROOT=()
  if [[ $(id -u) != 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then AS_ROOT=(sudo -n); else AS_ROOT=(none); fi
  fi
  local verbs=1
  if ! have_libibverbs; then
    verbs=0
    missing "no rdma-core: libibverbs.so.1 not found (ldconfig -p, /usr/lib*, /lib*), which the plugin and NCCL's IB transport load ($RDMA_CORE_PKGS)"
  fi
  if ((${#NIC_DEVS[@]} > 0 && SOFTROCE == 0)); then
    RDMA_MODE=nic
    say "found RDMA device(s) with an active port: ${NIC_DEVS[*]} (ibv_devices / /sys/class/infiniband)"
    if [[ -n $FAIL_NETDEV ]]; then
      [[ ${AS_ROOT[*]:-} != none ]] || missing "--fail-netdev needs root (or sudo -n) for ip link set"
      RAIL0_IF=$FAIL_NETDEV
    fi
    return
  fi
  RDMA_MODE=softroce
  local why=""
  if ((${#NIC_DEVS[@]} == 0)); then why="no RDMA device with an active port"; else why="--softroce"; fi
  local rxe
  if [[ ${AS_ROOT[*]:-} == none ]]; then
    missing "$why, and Soft-RoCE needs root (or passwordless sudo) for modprobe / ip / rdma"
  elif ! command -v rdma >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    missing "$why, and Soft-RoCE needs the 'rdma' and 'ip' tools (Debian: iproute2; RHEL: iproute)"
  elif ((verbs == 0)); then
    :   # said above: no rdma-core
  elif rxe=$(rxe_provider_missing) && [[ -n $rxe ]]; then
    missing "$why, and no rxe provider for Soft-RoCE: $rxe (Debian: ibverbs-providers; RHEL: libibverbs)"
  elif [[ ! -d $SYS/sys/module/rdma_rxe ]] && ! modinfo rdma_rxe >/dev/null 2>&1; then
    missing "$why, and no Soft-RoCE: kernel module rdma_rxe is not available (modinfo rdma_rxe; Ubuntu: linux-modules-extra-\$(uname -r), RHEL/Fedora: kernel-modules-extra where the kernel has it)"
  else
    say "RDMA: $why: Soft-RoCE rails ${SR_DEV[0]} on ${SR_IF[0]} (${SR_ADDR[0]}), ${SR_DEV[1]} on ${SR_IF[1]} (${SR_ADDR[1]})"
  fi
  RAIL0_IF=${SR_IF[0]}
}

# ---- running things ----
# run CMD...: print it, and run it unless --dry-run.
run() {
  printf '+ %s\n' "$(quote "$@")"
  ((DRY)) || "$@"
}
quote() {
  local a s="" q="'"
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then s+="$a "; else s+="$q${a//$q/$q\\$q$q}$q "; fi
  done
  printf '%s' "${s% }"
}
# root CMD...: as root (sudo -n when not root; "none": only reachable in a dry run).
root() { if [[ ${#AS_ROOT[@]} -gt 0 && ${AS_ROOT[0]} != none ]]; then run "${AS_ROOT[@]}" "$@"; else run "$@"; fi; }

SR_UP=0 RAIL0_DOWN=0 BG_PID="" FAULT_WHY=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $BG_PID ]]; then kill "$BG_PID" 2>/dev/null || true; wait "$BG_PID" 2>/dev/null || true; fi
  if ((RAIL0_DOWN)); then root ip link set "$RAIL0_IF" up || true; fi
  if ((SR_UP)); then teardown_softroce; fi
  exit "$rc"
}

teardown_softroce() {
  local i
  for i in 0 1; do
    if ((DRY)) || [[ -e $SYS/sys/class/infiniband/${SR_DEV[i]} ]]; then root rdma link delete "${SR_DEV[i]}" || true; fi
    if ((DRY)) || [[ -e $SYS/sys/class/net/${SR_IF[i]} ]]; then root ip link delete "${SR_IF[i]}" || true; fi
  done
  SR_UP=0
}

# root_step CMD...: root CMD... (the Soft-RoCE setup, taking rail 0 down), its stderr kept: on
# failure STEP_WHY says which command failed and what it printed.
STEP_WHY=""
root_step() {
  local err rc=0
  { err=$(root "$@" 2>&1 1>&3 3>&-); } 3>&1 || rc=$?
  ((rc == 0)) && return 0
  err=$(tr '\n' ' ' <<<"$err" | sed 's/ *$//')
  STEP_WHY="'$(quote "$@")' failed (exit $rc)${err:+: $err}"
  return 1
}

# Two Soft-RoCE rails, ACTIVE. Returns 1 with STEP_WHY when the kernel refuses a step (main skips).
setup_softroce() {
  say "setting up Soft-RoCE (removed on exit)"
  SR_UP=1
  ((DRY)) || teardown_softroce >/dev/null 2>&1   # leftovers of an interrupted run
  SR_UP=1
  if ((DRY)) || [[ ! -d $SYS/sys/module/rdma_rxe ]]; then root_step modprobe rdma_rxe || return 1; fi
  local i j
  for i in 0 1; do
    root_step ip link add "${SR_IF[i]}" type dummy || return 1
    root_step ip addr add "${SR_ADDR[i]}" dev "${SR_IF[i]}" || return 1
    root_step ip link set "${SR_IF[i]}" up || return 1
    root_step rdma link add "${SR_DEV[i]}" type rxe netdev "${SR_IF[i]}" || return 1
  done
  ((DRY)) && return 0
  local state
  for i in 0 1; do
    state=$SYS/sys/class/infiniband/${SR_DEV[i]}/ports/1/state
    for j in $(seq 100); do
      grep -q ACTIVE "$state" 2>/dev/null && break
      ((j < 100)) || { STEP_WHY="${SR_DEV[i]} never became ACTIVE ($state: $(cat "$state" 2>&1))"; return 1; }
      sleep 0.1
    done
  done
}

# The environment of every run; NET is HA or IB, MEM host or gpu, DMABUF 0, 1 or "" (NCCL's default).
run_env() {
  local net=$1 mem=$2 dmabuf=$3
  ENV=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,ENV,NET" "LD_LIBRARY_PATH=$OUT/plugin:${NCCL_LIB_DIR:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  if [[ $net == HA ]]; then ENV+=(NCCL_NET_PLUGIN=ha NCCL_NET=HA); else ENV+=(NCCL_NET_PLUGIN=none NCCL_NET=IB); fi
  if [[ $mem == host ]]; then ENV+=(NCCL_NET_GDR_LEVEL=LOC); else ENV+=(NCCL_NET_GDR_LEVEL=SYS); fi
  [[ -z $dmabuf ]] || ENV+=("NCCL_DMABUF_ENABLE=$dmabuf" "HA_NCCL_DMABUF_ENABLE=$dmabuf")
  if [[ $RDMA_MODE == softroce ]]; then
    ENV+=("NCCL_IB_HCA=${SR_DEV[0]},${SR_DEV[1]}")
    [[ $net != HA ]] || ENV+=("HA_NCCL_IB_HCA=${SR_DEV[0]},${SR_DEV[1]}")
  fi
  [[ -n ${NCCL_SOCKET_IFNAME:-} ]] || ENV+=(NCCL_SOCKET_IFNAME==lo)   # both ranks on this host
  if [[ $LAUNCH == single ]]; then ENV+=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1); fi
  if [[ $LAUNCH == mpi && $GPUS == 1 ]]; then   # both ranks on one GPU: the first visible one
    local first=${CUDA_VISIBLE_DEVICES:-0}
    ENV+=(NCCL_TESTS_DEVICE=0 "CUDA_VISIBLE_DEVICES=${first%%,*}")
  fi
}

# The command of one run: TESTS_ARGS... (after the launcher).
run_cmd() {
  local per_rank=$GPUS
  if [[ $LAUNCH == mpi ]]; then
    per_rank=$((GPUS == 1 ? 1 : GPUS / 2))
    CMD=("$MPIRUN_BIN" -np 2)
    if [[ $MPI_FLAVOR == openmpi ]]; then
      CMD+=(--oversubscribe --bind-to none)
      [[ $(id -u) != 0 ]] || CMD+=(--allow-run-as-root)
    fi
    CMD+=(bash "$OUT/rank.sh")
  else
    CMD=()
  fi
  CMD+=("${TESTS_BIN:-all_reduce_perf}" -g "$per_rank" -c 1 -w 5 "$@")
}

write_rank_wrapper() {
  mkdir -p "$OUT/plugin"
  ln -sfn "${PLUGIN:-/nonexistent/libnccl-net-ha.so}" "$OUT/plugin/libnccl-net-ha.so"
  cat >"$OUT/rank.sh" <<'EOF'
#!/usr/bin/env bash
# gpu-smoke: one MPI rank; its own NCCL_HOSTID makes NCCL treat the ranks as two hosts (which also
# lets two ranks share a GPU: NCCL refuses two ranks of one host on one GPU).
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${MV2_COMM_WORLD_RANK:-${SLURM_PROCID:-}}}}}
if [[ -z $r ]]; then
  echo "gpu-smoke rank.sh: no rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, MV2_COMM_WORLD_RANK, SLURM_PROCID): the ranks would share one NCCL_HOSTID" >&2
  exit 1
fi
export NCCL_HOSTID=gpu-smoke-host$r
echo "gpu-smoke rank.sh: rank $r: NCCL_HOSTID=$NCCL_HOSTID CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-<all>}" >&2
exec "$@"
EOF
}

# ---- reading a log ----
busbw_of() { sed -n 's/^# *Avg bus bandwidth *: *\([0-9.eE+-]*\).*/\1/p' "$1" | tail -n 1; }
failovers_of() { grep -c 'NET/HA:.*failover of' "$1" || true; }
# Microseconds of one out-of-place all_reduce at the largest size (nccl-tests' results table).
time_us_of() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 && $6 ~ /^[0-9.]+$/ {t = $6} END {if (t != "") print t}' "$1"; }
# What the plugin offered NCCL for GPU buffers, from its INFO lines: CUDA pointers (a GPU
# peer-memory client is loaded: "GPU peer memory (...)", ptrSupport HOST|CUDA in its init line),
# dma-buf (its init line's "; dmabuf <dev> yes ...": ptrSupport DMABUF on that device).
plugin_offers_cuda() { grep -Eq 'NET/HA: GPU peer memory \(|NET/HA: nccl-ha .*ptrSupport HOST[|]CUDA' "$1"; }
plugin_offers_dmabuf() { grep -Eq 'NET/HA: nccl-ha .*; dmabuf [^;]* yes' "$1"; }
# NCCL found dma-buf support on its GPU (logged only when NCCL_DMABUF_ENABLE is not 0).
gpu_dmabuf() { grep -q 'DMA-BUF is available on GPU' "$1"; }
# A GPU peer-memory client on this machine (the plugin's marks, gdr.hpp): the name, or nothing.
peermem_module() {
  local m
  for m in module/nvidia_peermem module/nv_peer_mem kernel/mm/memory_peers/nv_mem; do
    if [[ -e $SYS/sys/$m ]]; then echo "${m##*/}"; return; fi
  done
}

# Which memory NCCL's network used: GDRDMA in its channel lines ("via NET/HA/0/GDRDMA"); without
# it NCCL staged the network buffers through host memory. dma-buf when NCCL saw it on the GPU, was
# allowed to use it and the network offers it (the plugin: its init line; IB: assumed).
mempath_of() {
  local log=$1 net=$2 dmabuf=$3
  if ! grep -q "via NET/$net" "$log"; then echo "-"; return; fi
  if ! grep -q "via NET/$net/[^ ]*GDRDMA" "$log"; then echo host; return; fi
  local offers=1
  if [[ $net == HA ]]; then plugin_offers_dmabuf "$log" || offers=0; fi
  if [[ $dmabuf != 0 ]] && ((offers)) && gpu_dmabuf "$log"; then echo "GDR dma-buf"
  else echo "GDR peermem"; fi
}

# gdr_expected LOG DMABUF: whether NCCL could register its GPU buffers with the plugin (and so
# should have used GPUDirect RDMA at NCCL_NET_GDR_LEVEL=SYS): the plugin offered CUDA pointers,
# or dma-buf that the GPU has too (NCCL's rule, topo.cc: "GPU Direct RDMA Enabled for HCA").
# GDR_WHY says why, or why not.
gdr_expected() {
  local log=$1 dmabuf=$2
  if plugin_offers_cuda "$log"; then GDR_WHY="the plugin offered CUDA pointers (GPU peer memory)"; return 0; fi
  if plugin_offers_dmabuf "$log" && gpu_dmabuf "$log"; then
    GDR_WHY="the plugin offered dma-buf and NCCL found dma-buf on the GPU"; return 0
  fi
  if grep -Eq 'NET/HA ?: GPU Direct RDMA Enabled for HCA' "$log"; then
    GDR_WHY="NCCL: GPU Direct RDMA Enabled for the plugin's HCAs"; return 0
  fi
  if plugin_offers_dmabuf "$log"; then
    GDR_WHY="the plugin offered dma-buf, but NCCL found no dma-buf support on the GPU (no 'DMA-BUF is available on GPU' line: CUDA >= 11.7 and a driver and kernel with dma-buf) and no GPU peer-memory client is loaded"
  elif [[ $dmabuf == 0 ]]; then
    GDR_WHY="no GPU peer-memory client (nvidia-peermem / nv_peer_mem) and dma-buf off in this run"
  else
    GDR_WHY="the plugin offered no GPU memory: no GPU peer-memory client (nvidia-peermem / nv_peer_mem) and no dma-buf on its devices (ptrSupport HOST)"
  fi
  return 1
}

# ---- the runs ----
declare -A R_BW R_FO R_PATH R_VERDICT R_REF
RUNS=()

# do_run NAME NET MEM DMABUF REF [fault]
do_run() {
  local name=$1 net=$2 mem=$3 dmabuf=$4 ref=$5 fault=${6:-}
  local log=$OUT/$name.log args=(-b "$SIZE_MIN" -e "$SIZE_MAX" -f 2 -n "$ITERS")
  RUNS+=("$name") R_REF[$name]=$ref R_BW[$name]="-" R_FO[$name]="-" R_PATH[$name]="-"
  if [[ -n $fault ]]; then
    if [[ $RDMA_MODE == nic && ${#NIC_DEVS[@]} -lt 2 ]]; then
      R_VERDICT[$name]="skipped: one RDMA port, nothing to fail over to"; return
    fi
    if [[ -z ${RAIL0_IF:-} ]]; then
      R_VERDICT[$name]="skipped: RDMA NICs; --fail-netdev IF allows taking rail 0 down"; return
    fi
    local n=$FAILOVER_ITERS
    ((DRY)) && n="<enough for $((FAULT_AFTER + FAULT_DOWN + 10)) s, from ha-host's time at $SIZE_MAX>"
    args=(-b "$SIZE_MAX" -e "$SIZE_MAX" -n "$n")
  fi
  run_env "$net" "$mem" "$dmabuf"
  run_cmd "${args[@]}"
  say "run $name -> $log"
  local rc=0
  if [[ -z $fault ]]; then
    printf '+ %s > %s 2>&1\n' "$(quote env "${ENV[@]}" timeout "$RUN_TIMEOUT" "${CMD[@]}")" "$log"
    if ((DRY)); then R_VERDICT[$name]="dry-run"; return; fi
    env "${ENV[@]}" timeout "$RUN_TIMEOUT" "${CMD[@]}" >"$log" 2>&1 || rc=$?
  else
    printf '+ %s > %s 2>&1 &\n' "$(quote env "${ENV[@]}" timeout "$RUN_TIMEOUT" "${CMD[@]}")" "$log"
    if ((DRY)); then
      say "(once the results table has begun in $log) sleep $FAULT_AFTER"
      root ip link set "$RAIL0_IF" down
      say "sleep $FAULT_DOWN"
      root ip link set "$RAIL0_IF" up
      R_VERDICT[$name]="dry-run"; return
    fi
    env "${ENV[@]}" timeout "$RUN_TIMEOUT" "${CMD[@]}" >"$log" 2>&1 &
    BG_PID=$!
    local i started=0
    for i in $(seq 1200); do   # up to 120 s for NCCL's init
      if grep -q '^# *size' "$log" 2>/dev/null; then started=1; break; fi
      kill -0 "$BG_PID" 2>/dev/null || break
      sleep 0.1
    done
    local injected=0
    FAULT_WHY=""
    if ((started)); then
      sleep "$FAULT_AFTER"
      if kill -0 "$BG_PID" 2>/dev/null; then
        RAIL0_DOWN=1
        if root_step ip link set "$RAIL0_IF" down; then
          injected=1
          sleep "$FAULT_DOWN"
        else
          FAULT_WHY=$STEP_WHY
        fi
        if root_step ip link set "$RAIL0_IF" up; then RAIL0_DOWN=0; fi   # else cleanup tries again
      fi
    fi
    wait "$BG_PID" || rc=$?
    BG_PID=""
  fi
  verdict "$name" "$net" "$mem" "$dmabuf" "$rc" "$log" "$fault" "${injected:-0}"
}

verdict() {
  local name=$1 net=$2 mem=$3 dmabuf=$4 rc=$5 log=$6 fault=$7 injected=$8 bw fo why=()
  bw=$(busbw_of "$log") fo=$(failovers_of "$log")
  R_BW[$name]=${bw:--} R_FO[$name]=$fo R_PATH[$name]=$(mempath_of "$log" "$net" "$dmabuf")
  # (the substitution must not fail: under set -e a failed one would end the script here, silently)
  ((rc == 0)) || why+=("exit $rc$( ((rc != 124)) || echo ": timeout ${RUN_TIMEOUT}s")")
  [[ -n $bw ]] || why+=("no 'Avg bus bandwidth' line")
  grep -q 'Out of bounds values *: *0 OK' "$log" || why+=("data check not '0 OK'")
  grep -q "via NET/$net" "$log" || why+=("NCCL did not use NET/$net")
  if [[ $net == HA ]]; then grep -q 'NET/HA: nccl-ha' "$log" || why+=("no NET/HA init line: plugin not loaded")
  fi
  [[ $mem != host || ${R_PATH[$name]} != GDR* ]] || why+=("GDR used although NCCL_NET_GDR_LEVEL=LOC")
  if [[ -n $fault ]]; then
    if [[ -n ${FAULT_WHY:-} ]]; then why+=("rail 0 could not be taken down: $FAULT_WHY")
    elif ((injected == 0)); then why+=("the run ended before rail 0 went down"); fi
    ((fo > 0)) || why+=("no 'failover of' WARN")
  else
    ((fo == 0)) || why+=("$fo unexpected failover(s)")
  fi
  if grep -q 'no usable path left' "$log"; then why+=("'no usable path left'"); fi
  if [[ $LAUNCH == mpi ]] && (($(grep -o 'rank\.sh: rank [0-9]*: NCCL_HOSTID=[^ ]*' "$log" | sort -u | wc -l) < 2)); then
    why+=("not two ranks with their own NCCL_HOSTID (rank.sh lines)")
  fi
  # GPU buffers through the plugin: GPUDirect RDMA when the plugin offered GPU memory.
  local note="" mod
  if [[ $net == HA && $mem == gpu && -z $fault && ${R_PATH[$name]} != - ]] && grep -q 'NET/HA: nccl-ha' "$log"; then
    mod=$(peermem_module)
    if [[ -n $mod ]] && ! plugin_offers_cuda "$log"; then
      why+=("$mod is loaded, but the plugin offered no CUDA pointers (ptrSupport HOST)")
    elif gdr_expected "$log" "$dmabuf"; then
      [[ ${R_PATH[$name]} != host ]] || why+=("host staging (no GDRDMA in NCCL's NET/HA channel lines) although GPU memory registration was expected: $GDR_WHY")
    elif [[ ${R_PATH[$name]} == host && $dmabuf == 0 ]]; then
      note=" (host staging, as expected: $GDR_WHY)"
    elif [[ ${R_PATH[$name]} == host && ${#why[@]} == 0 ]]; then
      R_VERDICT[$name]="skipped: no GPU memory registration possible: $GDR_WHY"; return
    fi
  fi
  if ((${#why[@]} == 0)); then R_VERDICT[$name]=PASS$note; else R_VERDICT[$name]="FAIL: $(join "; " "${why[@]}")"; fi
}

# Iterations that keep the failover run going for FAULT_AFTER + FAULT_DOWN + 10 s, from the time
# of one all_reduce at SIZE_MAX in ha-host (each iteration runs out-of-place and in-place).
plan_failover_iters() {
  local t
  t=$( ((DRY)) || time_us_of "$OUT/ha-host.log")
  FAILOVER_ITERS=$(awk -v t="${t:-0}" -v s=$((FAULT_AFTER + FAULT_DOWN + 10)) -v min="$ITERS" \
    'BEGIN { n = (t > 0) ? int(s * 1e6 / (2 * t)) + 1 : 1000; if (n < min) n = min; if (n > 1000000) n = 1000000; print n }')
}

print_table() {
  local name ratio ref bw rbw
  {
    printf '%-16s %12s %8s %9s %-12s %s\n' run "busbw GB/s" "vs IB" failovers memory verdict
    for name in "${RUNS[@]}"; do
      bw=${R_BW[$name]} ref=${R_REF[$name]} ratio="-"
      rbw=${R_BW[$ref]:--}
      if [[ $bw != - && $rbw != - && $name != "$ref" ]]; then
        ratio=$(awk -v a="$bw" -v b="$rbw" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
      fi
      printf '%-16s %12s %8s %9s %-12s %s\n' "$name" "$bw" "$ratio" "${R_FO[$name]}" "${R_PATH[$name]}" "${R_VERDICT[$name]}"
    done
  } | if ((DRY)); then cat; else tee "$OUT/table.txt"; fi
}

main() {
  parse_args "$@"
  say "nccl-ha GPU smoke test$( ((DRY)) && echo " (dry run: nothing is run)")"
  find_gpu
  find_nccl
  find_tests
  find_launcher
  find_plugin
  find_rdma
  local n
  for n in "${NOTES[@]}"; do say "note: $n"; done
  if ((${#MISSING[@]})); then
    if ((DRY)); then
      for n in "${MISSING[@]}"; do say "missing (a real run would skip): $n"; done
    elif ((REQUIRE)); then
      say "FAIL (--require): missing: $(join "; " "${MISSING[@]}")" >&2; exit 1
    else
      say "skipped: $(join "; " "${MISSING[@]}")"; exit 0
    fi
  fi
  trap cleanup EXIT INT TERM
  run mkdir -p "$OUT"
  ((DRY)) || write_rank_wrapper
  printf '+ %s\n' "ln -sfn ${PLUGIN:-<plugin>} $OUT/plugin/libnccl-net-ha.so; write $OUT/rank.sh (NCCL_HOSTID=gpu-smoke-host<rank>)"
  if [[ $RDMA_MODE == softroce ]] && ! setup_softroce; then
    teardown_softroce >/dev/null 2>&1 || true   # whatever the steps before made
    local reason="Soft-RoCE could not be set up: $STEP_WHY"
    if ((REQUIRE)); then say "FAIL (--require): $reason" >&2; exit 1; fi
    say "skipped: $reason"; exit 0
  fi
  do_run ha-host HA host "" ib-host
  do_run ha-gpu-dmabuf HA gpu 1 ib-gpu
  do_run ha-gpu-nodmabuf HA gpu 0 ib-gpu
  plan_failover_iters
  do_run ha-failover HA gpu "" ib-gpu fault
  do_run ib-host IB host "" ib-host
  do_run ib-gpu IB gpu "" ib-gpu
  echo
  print_table
  ((DRY)) && return 0
  for n in "${RUNS[@]}"; do [[ ${R_VERDICT[$n]} == PASS* || ${R_VERDICT[$n]} == skipped* ]] || return 1; done
  say "every run that could run passed (logs: $OUT)"
}

# Sourced (test/unit/gpu_smoke_test.sh reads logs with the functions above): define only.
[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
