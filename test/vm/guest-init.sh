#!/bin/busybox sh
# /init of the nccl-ha Soft-RoCE test-bed initramfs. Runs inside the guest, busybox only.
# Built into the initramfs by prepare.sh (edits here trigger a rebuild).
#
# Kernel command line (set by run-pair.sh):  nccl_ha.role=a|b
# 9p shares:  hostroot  -> host "/" read-only, becomes the guest's root (chroot)
#             vmout     -> per-VM host log dir, writable, mounted at /run/vmout in the chroot
# The command to run is /run/vmout/job.sh (written by run-pair.sh); its exit code goes to
# /run/vmout/exit_code, its stdout/stderr to /run/vmout/{stdout,stderr}.log. Then power off.

/bin/busybox mkdir -p /proc /sys /dev /sbin /usr/bin /usr/sbin /newroot
/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

R=/newroot
OUT=$R/run/vmout
up() { cut -d' ' -f1 /proc/uptime; }
log() { echo "vm-init[$(up)s]: $*"; }
die() {
  log "FATAL: $*"
  [ -w "$OUT" ] && echo "vm-init: $*" >"$OUT/init-error"
  sync
  poweroff -f
  sleep 10
}

ROLE=
for w in $(cat /proc/cmdline); do
  case "$w" in nccl_ha.role=*) ROLE=${w#*=} ;; esac
done
case "$ROLE" in
  a) N=1 ;;
  b) N=2 ;;
  *) die "kernel command line lacks nccl_ha.role=a|b" ;;
esac
hostname "$ROLE"

KVER=$(uname -r)
while read -r ko; do
  insmod "/lib/modules/$KVER/$ko" || die "insmod $ko failed"
done </etc/modules.list
log "modules loaded"

# Root: the host's file system, read-only. Then the writable pieces on top of it.
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostroot $R ||
  die "cannot mount 9p share hostroot"
mount -t proc proc $R/proc || die "mount proc"
mount -t sysfs sysfs $R/sys || die "mount sysfs"
mount -t devtmpfs devtmpfs $R/dev || die "mount devtmpfs"
mkdir -p $R/dev/shm $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm || die "mount /dev/shm"
mount -t devpts devpts $R/dev/pts || die "mount /dev/pts"
ln -sf /proc/self/fd $R/dev/fd # bash's process substitution <(...) needs /dev/fd
mount -t tmpfs -o mode=1777 tmpfs $R/tmp || die "mount /tmp"
mount -t tmpfs -o mode=1777 tmpfs $R/var/tmp || die "mount /var/tmp"
mount -t tmpfs -o mode=755 tmpfs $R/run || die "mount /run"
mkdir -p $OUT
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 vmout $OUT ||
  die "cannot mount 9p share vmout"
rm -f "$OUT/exit_code" "$OUT/init-error"
log "file systems mounted"

# Networking: eth0 = rail 0, eth1 = rail 1, eth2 = management. MACs are set by run-pair.sh
# as 52:54:00:4e:0<N>:0<nic>; check them so a changed NIC order can't go unnoticed.
ip link set lo up
for i in 0 1 2; do
  want="52:54:00:4e:0$N:0$i"
  have=$(cat /sys/class/net/eth$i/address 2>/dev/null) || die "eth$i missing"
  [ "$have" = "$want" ] || die "eth$i has MAC $have, expected $want"
done
ip addr add 10.20.0.$N/24 dev eth0 && ip link set eth0 mtu 9000 up || die "eth0 setup"
ip addr add 10.21.0.$N/24 dev eth1 && ip link set eth1 mtu 9000 up || die "eth1 setup"
ip addr add 10.30.0.$N/24 dev eth2 && ip link set eth2 up || die "eth2 setup"
for i in 0 1; do
  chroot $R rdma link add rxe$i type rxe netdev eth$i || die "rdma link add rxe$i failed"
done
# Wait (max ~10 s) for both ports ACTIVE, the IPv4 GID at index 1, and the uverbs nodes.
i=0
while :; do
  ok=1
  for d in 0 1; do
    grep -q ACTIVE /sys/class/infiniband/rxe$d/ports/1/state 2>/dev/null || ok=0
    gid=$(printf '0000:0000:0000:0000:0000:ffff:0a%02x:%04x' $((20 + d)) $N)
    grep -q "$gid" /sys/class/infiniband/rxe$d/ports/1/gids/1 2>/dev/null || ok=0
  done
  [ -c /dev/infiniband/uverbs0 ] && [ -c /dev/infiniband/uverbs1 ] || ok=0
  [ $ok = 1 ] && break
  i=$((i + 1))
  [ $i -lt 100 ] || die "rxe devices not ready: $(cat /sys/class/infiniband/rxe*/ports/1/state 2>&1)"
  usleep 100000
done
log "network and rxe0/rxe1 ready"

[ -r "$OUT/job.sh" ] || die "no job.sh in the vmout share"
ulimit -l unlimited
log "running job"
chroot $R /bin/bash /run/vmout/job.sh </dev/null >"$OUT/stdout.log" 2>"$OUT/stderr.log"
rc=$?
echo $rc >"$OUT/exit_code"
log "job exited with $rc; powering off"
sync
poweroff -f
sleep 10
