#!/usr/bin/env bash
# ctest unit.gpu_smoke: scripts/gpu-smoke.sh without a GPU. A --plugin that does not exist makes
# a piece missing on any machine, so the skip paths are deterministic: skip mode exits 0 with the
# "skipped:" line, --require exits 1, --help exits 0, a bad option or value exits 2, --dry-run
# prints the plan and runs (creates) nothing; the log reading (busbw, failovers, memory path,
# verdict, and whether a GPU run used GPUDirect RDMA when the plugin offered GPU memory) on
# synthetic nccl-tests logs. Then whole runs on a fake GPU machine: fake nvidia-smi,
# all_reduce_perf, mpirun, ldd, modprobe, modinfo, ip, rdma and sudo first in PATH (they touch
# nothing outside WORKDIR) and GPU_SMOKE_SYSROOT, a tree with or without libibverbs and the rxe
# provider: the skips without rdma-core, the rxe provider or rdma_rxe, with a refused modprobe or
# `rdma link add`, with one GPU and no MPI; GDR verdicts from the fake NCCL's log; the two MPI
# ranks with their own NCCL_HOSTID on GPU 0.
# usage: gpu_smoke_test.sh SCRIPT WORKDIR
set -u
SCRIPT=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
failures=0
NOPLUGIN=$WORK/none/libnccl-net-ha.so
EXPECT_ENV=()   # VAR=VALUE... for the script's environment (the fake machine below)

# expect NAME WANT_RC PATTERN ARGS...: runs the script (with EXPECT_ENV), checks its exit code and
# (if PATTERN is not empty) that its output (stdout + stderr) has a line matching PATTERN (grep -E).
expect() {
  local name=$1 want=$2 pat=$3 rc
  shift 3
  env "${EXPECT_ENV[@]}" "$SCRIPT" "$@" >"$WORK/$name.out" 2>&1
  rc=$?
  if [[ $rc != "$want" ]]; then
    echo "FAIL $name: exit $rc, expected $want"; sed 's/^/    /' "$WORK/$name.out"; failures=$((failures + 1)); return
  fi
  if [[ -n $pat ]] && ! grep -Eq -- "$pat" "$WORK/$name.out"; then
    echo "FAIL $name: no line matching '$pat'"; sed 's/^/    /' "$WORK/$name.out"; failures=$((failures + 1)); return
  fi
  echo "ok   $name (exit $rc)"
}

expect skip 0 "^gpu-smoke: skipped: .*--plugin $NOPLUGIN: no such file" --plugin "$NOPLUGIN" --out "$WORK/out-skip"
expect require 1 "^gpu-smoke: FAIL \(--require\): missing: .*--plugin $NOPLUGIN" --require --plugin "$NOPLUGIN" --out "$WORK/out-req"
expect help 0 "^usage: scripts/gpu-smoke.sh" --help
expect bad-option 2 "unknown option '--bogus'" --bogus
expect bad-sizes 2 "--sizes wants MIN:MAX" --sizes 1M
expect bad-iters 2 "--iters wants a positive integer" --iters 0
expect missing-value 2 "--out needs a value" --out
expect dry-run 0 "NCCL_NET=IB .*all_reduce_perf" --dry-run --plugin "$NOPLUGIN" --launcher mpi --gpus 2 --out "$WORK/out-dry"
for pat in "^gpu-smoke: missing \(a real run would skip\): --plugin" "NCCL_NET_PLUGIN=ha NCCL_NET=HA .*NCCL_NET_GDR_LEVEL=LOC" \
  "NCCL_DMABUF_ENABLE=0 HA_NCCL_DMABUF_ENABLE=0" "mpirun -np 2 bash .*/rank.sh" "ip link set [^ ]+ down|ha-failover +- .*skipped" \
  "^ha-failover "; do
  grep -Eq -- "$pat" "$WORK/dry-run.out" || { echo "FAIL dry-run: no line matching '$pat'"; failures=$((failures + 1)); }
done
if [[ -e $WORK/out-dry || -e $WORK/out-skip ]]; then echo "FAIL: a dry run or a skipped run created its --out directory"; failures=$((failures + 1)); fi

# The log reading, on synthetic logs (the functions of the sourced script).
cat >"$WORK/ha.log" <<'EOF'
NCCL INFO NET/HA: nccl-ha 0.1.0 (net API v6-v12): HA on; 2 device(s): ...; ptrSupport HOST|CUDA; progress thread ncclHaProgress
NCCL INFO DMA-BUF is available on GPU device 0
NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/HA/0/GDRDMA
NCCL WARN NET/HA: failover of send comm 0x1 gsmoke_rxe0:1 -> gsmoke_rxe1:1: cause port error on gsmoke_rxe0:1, replayed 5 message(s), stall 7.1 ms
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
   268435456      67108864     float     sum      -1   5000.0   53.69   53.69      0   4990.0   53.79   53.79      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 53.74
EOF
# shellcheck disable=SC1090
got=$(
  source "$SCRIPT" || exit 1
  verdict f HA gpu "" 0 "$WORK/ha.log" fault 1
  verdict n HA gpu 1 0 "$WORK/ha.log" "" 0
  verdict h HA host "" 0 "$WORK/ha.log" "" 0
  echo "bw=$(busbw_of "$WORK/ha.log") t=$(time_us_of "$WORK/ha.log") fo=${R_FO[f]} path=${R_PATH[f]}|${R_PATH[n]}"
  echo "f=${R_VERDICT[f]}"
  echo "n=${R_VERDICT[n]}"
  echo "h=${R_VERDICT[h]}"
)
want="bw=53.74 t=5000.0 fo=1 path=GDR peermem|GDR peermem
f=PASS
n=FAIL: 1 unexpected failover(s)
h=FAIL: GDR used although NCCL_NET_GDR_LEVEL=LOC; 1 unexpected failover(s)"
if [[ $got == "$want" ]]; then echo "ok   log reading"; else
  echo "FAIL log reading:"; diff <(echo "$want") <(echo "$got") | sed 's/^/    /'; failures=$((failures + 1)); fi

# The GPU-memory verdict on synthetic logs: the plugin's INFO lines (what it offered) and NCCL's
# channel lines (GDRDMA or not). Under a SYSROOT without a peer-memory module.
mkdir -p "$WORK/noroot"
gdr_log() {   # gdr_log FILE PTRSUPPORT DMABUF(yes|no) GPU_DMABUF(0|1) GDRDMA(0|1)
  local f=$1 ptr=$2 dm=$3 gpu=$4 gdr=$5 suffix=""
  ((gdr)) && suffix=/GDRDMA
  {
    echo "NCCL INFO NET/HA: nccl-ha 0.1.0 (net API v6-v12): HA on; 2 device(s): ...; ptrSupport $ptr; progress thread ncclHaProgress; relaxed ordering off; dmabuf gsmoke_rxe0:1 $dm gsmoke_rxe1:1 $dm"
    ((gpu)) && echo "NCCL INFO DMA-BUF is available on GPU device 0"
    echo "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/HA/0$suffix"
    echo "NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/HA/0$suffix"
    echo "# Out of bounds values : 0 OK"
    echo "# Avg bus bandwidth    : 1.5"
  } >"$f"
}
gdr_log "$WORK/staged.log" HOST yes 1 0     # dma-buf offered, on the GPU too, yet no GDRDMA
gdr_log "$WORK/gdr.log" HOST yes 1 1
gdr_log "$WORK/peer-staged.log" "HOST|CUDA" no 0 0
gdr_log "$WORK/none.log" HOST no 0 0        # nothing offered: host staging is all there is
gdr_log "$WORK/nogpubuf.log" HOST yes 0 0   # offered, but the GPU has no dma-buf
# shellcheck disable=SC1090
got=$(
  source "$SCRIPT" || exit 1
  # shellcheck disable=SC2034  # SYS: the sourced script's GPU_SMOKE_SYSROOT, read by verdict
  SYS=$WORK/noroot
  verdict staged HA gpu 1 0 "$WORK/staged.log" "" 0
  verdict gdr HA gpu 1 0 "$WORK/gdr.log" "" 0
  verdict peer HA gpu 0 0 "$WORK/peer-staged.log" "" 0
  verdict none HA gpu 1 0 "$WORK/none.log" "" 0
  verdict none0 HA gpu 0 0 "$WORK/none.log" "" 0
  verdict nogpu HA gpu 1 0 "$WORK/nogpubuf.log" "" 0
  for n in staged gdr peer none none0 nogpu; do echo "$n=${R_PATH[$n]}|${R_VERDICT[$n]}"; done
)
want="staged=host|FAIL: host staging (no GDRDMA in NCCL's NET/HA channel lines) although GPU memory registration was expected: the plugin offered dma-buf and NCCL found dma-buf on the GPU
gdr=GDR dma-buf|PASS
peer=host|FAIL: host staging (no GDRDMA in NCCL's NET/HA channel lines) although GPU memory registration was expected: the plugin offered CUDA pointers (GPU peer memory)
none=host|skipped: no GPU memory registration possible: the plugin offered no GPU memory: no GPU peer-memory client (nvidia-peermem / nv_peer_mem) and no dma-buf on its devices (ptrSupport HOST)
none0=host|PASS (host staging, as expected: no GPU peer-memory client (nvidia-peermem / nv_peer_mem) and dma-buf off in this run)
nogpu=host|skipped: no GPU memory registration possible: the plugin offered dma-buf, but NCCL found no dma-buf support on the GPU (no 'DMA-BUF is available on GPU' line: CUDA >= 11.7 and a driver and kernel with dma-buf) and no GPU peer-memory client is loaded"
if [[ $got == "$want" ]]; then echo "ok   GPU-memory verdict"; else
  echo "FAIL GPU-memory verdict:"; diff <(echo "$want") <(echo "$got") | sed 's/^/    /'; failures=$((failures + 1)); fi
# nvidia_peermem loaded (a SYSROOT with /sys/module/nvidia_peermem): the plugin must offer CUDA
# pointers, and host staging with them fails the dma-buf-off run too.
mkdir -p "$WORK/peerroot/sys/module/nvidia_peermem"
# shellcheck disable=SC1090
got=$(
  source "$SCRIPT" || exit 1
  # shellcheck disable=SC2034  # SYS: the sourced script's GPU_SMOKE_SYSROOT, read by verdict
  SYS=$WORK/peerroot
  verdict blind HA gpu 0 0 "$WORK/none.log" "" 0
  verdict peer HA gpu 0 0 "$WORK/peer-staged.log" "" 0
  for n in blind peer; do echo "$n=${R_VERDICT[$n]}"; done
)
want="blind=FAIL: nvidia_peermem is loaded, but the plugin offered no CUDA pointers (ptrSupport HOST)
peer=FAIL: host staging (no GDRDMA in NCCL's NET/HA channel lines) although GPU memory registration was expected: the plugin offered CUDA pointers (GPU peer memory)"
if [[ $got == "$want" ]]; then echo "ok   GPU-memory verdict with nvidia_peermem"; else
  echo "FAIL GPU-memory verdict with nvidia_peermem:"; diff <(echo "$want") <(echo "$got") | sed 's/^/    /'; failures=$((failures + 1)); fi

# ---- the fake GPU machine ----
FAKE=$WORK/fake
mkdir -p "$FAKE/bin" "$FAKE/nccl/lib" "$FAKE/tests" || exit 1
: >"$FAKE/nccl/lib/libnccl.so.2"
: >"$FAKE/libnccl-net-ha.so"
# fake_tool NAME <<'EOF' BODY EOF: an executable bash script in the fake PATH.
fake_tool() { { echo '#!/usr/bin/env bash'; cat; } >"$FAKE/bin/$1" && chmod +x "$FAKE/bin/$1"; }
fake_tool nvidia-smi <<'EOF'
for ((i = 0; i < ${FAKE_GPUS:-1}; i++)); do echo "GPU $i: NVIDIA Fake (UUID: GPU-$i)"; done
EOF
fake_tool ldd <<'EOF'
if [[ ${FAKE_MPI:-1} == 1 && $1 == */all_reduce_perf ]]; then echo "	libmpi.so.40 => /usr/lib/libmpi.so.40"
else echo "	not a dynamic executable"; exit 1; fi
EOF
fake_tool sudo <<'EOF'
[[ ${1:-} == -n ]] && shift
exec "$@"
EOF
fake_tool modinfo <<'EOF'
[[ ${FAKE_RXE_MODULE:-1} == 1 ]] || { echo "modinfo: ERROR: Module $1 not found." >&2; exit 1; }
EOF
fake_tool modprobe <<'EOF'
echo "modprobe $*" >>"$FAKE_CALLS"
if [[ ${FAKE_MODPROBE_FAIL:-0} == 1 ]]; then echo "modprobe: ERROR: could not insert '$1': Operation not permitted" >&2; exit 1; fi
mkdir -p "$GPU_SMOKE_SYSROOT/sys/module/$1"
EOF
fake_tool ip <<'EOF'
echo "ip $*" >>"$FAKE_CALLS"
case "$1 $2" in
  "link add") mkdir -p "$GPU_SMOKE_SYSROOT/sys/class/net/$3" ;;
  "link delete") rm -rf "$GPU_SMOKE_SYSROOT/sys/class/net/$3" ;;
esac
EOF
fake_tool rdma <<'EOF'
echo "rdma $*" >>"$FAKE_CALLS"
case "$1 $2" in
  "link add")
    if [[ ${FAKE_RDMA_FAIL:-0} == 1 ]]; then echo "error: Operation not supported" >&2; exit 1; fi
    mkdir -p "$GPU_SMOKE_SYSROOT/sys/class/infiniband/$3/ports/1"
    echo "4: ACTIVE" >"$GPU_SMOKE_SYSROOT/sys/class/infiniband/$3/ports/1/state" ;;
  "link delete") rm -rf "$GPU_SMOKE_SYSROOT/sys/class/infiniband/$3" ;;
esac
EOF
# mpirun: Open MPI by --version; runs -np N copies of the command, each with its rank.
fake_tool mpirun <<'EOF'
if [[ ${1:-} == --version ]]; then echo "mpirun (Open MPI) 4.1.4"; exit 0; fi
echo "mpirun $*" >>"$FAKE_CALLS"
n=1
while [[ $# -gt 0 ]]; do
  case $1 in -np) n=$2; shift 2 ;; --bind-to) shift 2 ;; -*) shift ;; *) break ;; esac
done
pids=()
for ((r = 0; r < n; r++)); do OMPI_COMM_WORLD_RANK=$r PMIX_RANK=$r "$@" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
EOF
# all_reduce_perf: NCCL with the plugin as it would log, from the environment: no peer-memory
# client (ptrSupport HOST), dma-buf offered with FAKE_DEV_DMABUF=1 unless disabled; NCCL finds
# dma-buf on the GPU with FAKE_GPU_DMABUF=1, and uses GDRDMA at NCCL_NET_GDR_LEVEL=SYS when it can
# (FAKE_GDR=0: never, the bug to catch).
# The failover run (-b = -e) lasts a second and logs a failover.
fake_tool all_reduce_perf <<'EOF'
rank=${OMPI_COMM_WORLD_RANK:-0}
echo "rank=${OMPI_COMM_WORLD_RANK:-none} hostid=${NCCL_HOSTID:-none} cvd=${CUDA_VISIBLE_DEVICES:-none} dev=${NCCL_TESTS_DEVICE:-none}" >>"$FAKE_RANKS"
b="" e=""
while [[ $# -gt 0 ]]; do case $1 in -b) b=$2; shift 2 ;; -e) e=$2; shift 2 ;; *) shift ;; esac; done
p="fakehost:$$:$$ [0] NCCL INFO"
net=${NCCL_NET:-IB} nccl_dm=${NCCL_DMABUF_ENABLE:-1}
ha_dm=${HA_NCCL_DMABUF_ENABLE:-$nccl_dm}
offer=0 gpubuf=0 gdr=0
[[ ${FAKE_DEV_DMABUF:-0} == 1 && $ha_dm != 0 ]] && offer=1
[[ ${FAKE_GPU_DMABUF:-0} == 1 && $nccl_dm != 0 ]] && gpubuf=1
if [[ $net == HA ]]; then
  dm=no
  ((offer)) && dm=yes
  [[ ${FAKE_DEV_DMABUF:-0} == 1 && $ha_dm == 0 ]] && dm="no (disabled)"
  echo "$p NET/HA: no GPU peer-memory client loaded (nvidia-peermem / nv_peer_mem): ptrSupport HOST"
  echo "$p NET/HA: nccl-ha 0.1.0 (net API v6-v12): HA on; 2 device(s): [0] gsmoke_rxe0:1 RoCE 10000 Mbps ...; ptrSupport HOST; progress thread ncclHaProgress; relaxed ordering off; dmabuf gsmoke_rxe0:1 $dm gsmoke_rxe1:1 $dm"
else
  offer=1
fi
((gpubuf)) && echo "$p DMA-BUF is available on GPU device 0"
can=0
if ((offer && gpubuf)); then can=1; fi
if ((can)); then echo "$p NET/$net : GPU Direct RDMA Enabled for HCA 0 'gsmoke_rxe0'"
else echo "$p NET/$net : GPU Direct RDMA Disabled for HCA 0 'gsmoke_rxe0'"; fi
[[ ${NCCL_NET_GDR_LEVEL:-} == SYS && ${FAKE_GDR:-auto} != 0 ]] && ((can)) && gdr=1
s=""
((gdr)) && s=/GDRDMA
echo "$p Channel 00/0 : 0[0] -> 1[0] [send] via NET/$net/0$s"
echo "$p Channel 00/0 : 1[0] -> 0[0] [receive] via NET/$net/0$s"
((rank == 0)) || exit 0
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
if [[ -n $b && $b == "$e" ]]; then
  sleep 1
  echo "fakehost:$$:$$ [0] NCCL WARN NET/HA: failover of send comm 0x1 gsmoke_rxe0:1 -> gsmoke_rxe1:1: cause port error on gsmoke_rxe0:1, replayed 5 message(s), stall 7.1 ms"
fi
echo "     1048576        262144     float     sum      -1    100.0   10.49   10.49      0    100.0   10.49   10.49      0"
echo "# Out of bounds values : 0 OK"
echo "# Avg bus bandwidth    : 10.49"
exit "${FAKE_NCCL_EXIT:-0}"
EOF
cp "$FAKE/bin/all_reduce_perf" "$FAKE/tests/all_reduce_perf" && rm "$FAKE/bin/all_reduce_perf"

# world NAME [VAR=VALUE...]: the fake machine for case NAME: a fresh SYSROOT with libibverbs, its
# rxe provider and rxe.driver (VERBS=0: no rdma-core at all; RXE=0: libibverbs without the rxe
# provider), and EXPECT_ENV for the script; other VAR=VALUE (FAKE_*) go to the fake tools.
world() {
  local name=$1 verbs=1 rxe=1 kv extra=()
  shift
  for kv in "$@"; do
    case $kv in VERBS=*) verbs=${kv#*=} ;; RXE=*) rxe=${kv#*=} ;; *) extra+=("$kv") ;; esac
  done
  ROOT=$WORK/$name.root
  rm -rf "$ROOT" && mkdir -p "$ROOT/sys/class" "$ROOT/usr/lib/x86_64-linux-gnu/libibverbs" "$ROOT/etc/libibverbs.d"
  if ((verbs)); then
    : >"$ROOT/usr/lib/x86_64-linux-gnu/libibverbs.so.1"
    if ((rxe)); then
      : >"$ROOT/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
      echo "driver rxe" >"$ROOT/etc/libibverbs.d/rxe.driver"
    fi
  fi
  : >"$WORK/$name.calls"
  : >"$WORK/$name.ranks"
  EXPECT_ENV=(-u NCCL_SOCKET_IFNAME -u CUDA_VISIBLE_DEVICES -u NCCL_IB_HCA -u HA_NCCL_IB_HCA -u MPIRUN
    "PATH=$FAKE/bin:$PATH" "GPU_SMOKE_SYSROOT=$ROOT" "NCCL_HOME=$FAKE/nccl" "NCCL_TESTS_DIR=$FAKE/tests"
    "FAKE_CALLS=$WORK/$name.calls" "FAKE_RANKS=$WORK/$name.ranks" "${extra[@]}")
}
RUN=(--plugin "$FAKE/libnccl-net-ha.so" --sizes 1M:2M --iters 1 --fault-after 0 --fault-down 0 --timeout 30)
# check NAME WHAT COMMAND...: one more check of case NAME (a failure shows the case's output).
check() {
  local name=$1 what=$2
  shift 2
  if "$@"; then echo "ok   $name: $what"; else
    echo "FAIL $name: $what"; sed 's/^/    /' "$WORK/$name.out"; failures=$((failures + 1)); fi
}

world no-rdma-core VERBS=0
expect no-rdma-core 0 "^gpu-smoke: skipped: .*no rdma-core: libibverbs\.so\.1 not found.*libibverbs1 ibverbs-providers rdma-core.*rdma-core libibverbs" "${RUN[@]}" --out "$WORK/no-rdma-core.o"
expect no-rdma-core-require 1 "^gpu-smoke: FAIL \(--require\): missing: .*no rdma-core" "${RUN[@]}" --require --out "$WORK/no-rdma-core.o"
world no-rxe RXE=0
expect no-rxe 0 "^gpu-smoke: skipped: .*no rxe provider for Soft-RoCE: no librxe-rdmav\*\.so in .*ibverbs-providers" "${RUN[@]}" --out "$WORK/no-rxe.o"
expect no-rxe-require 1 "^gpu-smoke: FAIL \(--require\): missing: .*no rxe provider" "${RUN[@]}" --require --out "$WORK/no-rxe.o"
world no-rxe-driver
rm "$ROOT/etc/libibverbs.d/rxe.driver"
expect no-rxe-driver 0 "^gpu-smoke: skipped: .*no rxe provider for Soft-RoCE: .*rxe\.driver is not" "${RUN[@]}" --out "$WORK/no-rxe-driver.o"
world no-rxe-module FAKE_RXE_MODULE=0
expect no-rxe-module 0 "^gpu-smoke: skipped: .*kernel module rdma_rxe is not available" "${RUN[@]}" --out "$WORK/no-rxe-module.o"
world rdma-refused FAKE_RDMA_FAIL=1
expect rdma-refused 0 "^gpu-smoke: skipped: Soft-RoCE could not be set up: 'rdma link add gsmoke_rxe0 type rxe netdev gsmoke0' failed \(exit 1\): error: Operation not supported" "${RUN[@]}" --out "$WORK/rdma-refused.o"
check rdma-refused "the netdev it made is removed" test ! -e "$ROOT/sys/class/net/gsmoke0"
expect rdma-refused-require 1 "^gpu-smoke: FAIL \(--require\): Soft-RoCE could not be set up: 'rdma link add" "${RUN[@]}" --require --out "$WORK/rdma-refused.o"
world modprobe-refused FAKE_MODPROBE_FAIL=1
expect modprobe-refused 0 "^gpu-smoke: skipped: Soft-RoCE could not be set up: 'modprobe rdma_rxe' failed \(exit 1\): modprobe: ERROR: could not insert 'rdma_rxe': Operation not permitted" "${RUN[@]}" --out "$WORK/modprobe-refused.o"
world one-gpu-no-mpi FAKE_MPI=0
expect one-gpu-no-mpi 0 "^gpu-smoke: skipped: .*two ranks on one GPU need two processes.*MPI=1" "${RUN[@]}" --out "$WORK/one-gpu-no-mpi.o"

# One GPU, an MPI build, Soft-RoCE; the plugin offers dma-buf and the GPU has it: GDR expected.
world gdr FAKE_DEV_DMABUF=1 FAKE_GPU_DMABUF=1
expect gdr 0 "^gpu-smoke: every run that could run passed" "${RUN[@]}" --out "$WORK/gdr.o"
check gdr "ha-gpu-dmabuf PASS with GDR dma-buf" grep -Eq "^ha-gpu-dmabuf .* GDR dma-buf +PASS$" "$WORK/gdr.out"
check gdr "ha-gpu-nodmabuf PASS, host staging expected" grep -Eq "^ha-gpu-nodmabuf .* host +PASS \(host staging, as expected" "$WORK/gdr.out"
check gdr "ha-failover PASS" grep -Eq "^ha-failover .* 1 GDR dma-buf +PASS$" "$WORK/gdr.out"
check gdr "mpirun -np 2 through rank.sh" grep -Eq "^mpirun -np 2 .*bash $WORK/gdr.o/rank.sh .*all_reduce_perf" "$WORK/gdr.calls"
check gdr "every run: ranks 0 and 1 with their own NCCL_HOSTID, on GPU 0" \
  test "$(sort -u "$WORK/gdr.ranks")" == "rank=0 hostid=gpu-smoke-host0 cvd=0 dev=0
rank=1 hostid=gpu-smoke-host1 cvd=0 dev=0"
check gdr "the rails set up and removed" grep -q "^rdma link delete gsmoke_rxe1" "$WORK/gdr.calls"
# The same, but NCCL staged through host memory: the dma-buf run fails, and the script with it.
world gdr-staged FAKE_DEV_DMABUF=1 FAKE_GPU_DMABUF=1 FAKE_GDR=0
expect gdr-staged 1 "^ha-gpu-dmabuf .* host +FAIL: host staging .*although GPU memory registration was expected: the plugin offered dma-buf" "${RUN[@]}" --out "$WORK/gdr-staged.o"
# A run that fails (NCCL's exit status 3): its verdict says so, the table is printed, exit 1 (the
# script once died silently there: a failed command substitution under set -e).
world crash FAKE_NCCL_EXIT=3
expect crash 1 "^ha-host .*FAIL: exit 3" "${RUN[@]}" --out "$WORK/crash.o"
# Nothing offered (no peer memory, no dma-buf on the devices): ha-gpu-dmabuf is skipped.
world no-gpu-memory
expect no-gpu-memory 0 "^ha-gpu-dmabuf .* host +skipped: no GPU memory registration possible: the plugin offered no GPU memory" "${RUN[@]}" --out "$WORK/no-gpu-memory.o"

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all gpu-smoke checks passed"
