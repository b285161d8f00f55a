#!/bin/busybox sh
# /init of the nccl-ha Soft-RoCE test-bed initramfs. Runs inside the guest, busybox only.
# Built into the initramfs by prepare.sh (edits here trigger a rebuild).
#
# Kernel command line (set by run-pair.sh):  nccl_ha.role=a|b
# 9p shares:  hostroot  -> host "/" read-only, becomes the guest's root (chroot)
#             vmout     -> per-VM host log dir, writable, mounted at /run/vmout in the chroot
# The network is described by /run/vmout/net.conf (written by run-pair.sh; format below).
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
  a | b) ;;
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

# Networking, as run-pair.sh describes it in net.conf (one item a line, applied in order):
#   nic IF MAC ADDR/LEN MTU RXE|-   check IF's MAC (so a changed NIC order can't go unnoticed),
#                                   address, MTU, up; then a rxe device RXE on it
#   sysctl KEY VALUE                e.g. net.ipv4.conf.eth0.arp_ignore 1
#   route NET/LEN IF METRIC         on-link route (islands: other rails' subnets)
[ -r "$OUT/net.conf" ] || die "no net.conf in the vmout share"
gid() { # a.b.c.d/len -> its RoCE v2 GID as sysfs shows it (::ffff:a.b.c.d)
  local IFS=./
  set -- $1
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}
ip link set lo up
RXES= # "rxeK=IF=GID ..."
while read -r what f1 f2 f3 f4 f5; do
  case "$what" in
    '' | '#'*) ;;
    nic)
      have=$(cat /sys/class/net/$f1/address 2>/dev/null) || die "$f1 missing"
      [ "$have" = "$f2" ] || die "$f1 has MAC $have, expected $f2"
      ip addr add "$f3" dev "$f1" && ip link set "$f1" mtu "$f4" up || die "$f1 setup"
      [ "$f5" = - ] || RXES="$RXES $f5=$f1=$(gid "$f3")" ;;
    sysctl) sysctl -w "$f1=$f2" >/dev/null || die "sysctl $f1=$f2 failed" ;;
    route) ip route add "$f1" dev "$f2" metric "$f3" || die "ip route add $f1 dev $f2 metric $f3 failed" ;;
    *) die "net.conf: unknown line '$what $f1 ...'" ;;
  esac
done <"$OUT/net.conf"
n=0
for x in $RXES; do
  dev=${x%%=*} if=${x#*=}
  chroot $R rdma link add "$dev" type rxe netdev "${if%%=*}" || die "rdma link add $dev failed"
  n=$((n + 1))
done
# Wait (max ~20 s) for every port ACTIVE with its IPv4 GID at index 1, and n uverbs nodes.
i=0
while :; do
  ok=1
  for x in $RXES; do
    grep -q ACTIVE /sys/class/infiniband/${x%%=*}/ports/1/state 2>/dev/null || ok=0
    grep -q "${x##*=}" /sys/class/infiniband/${x%%=*}/ports/1/gids/1 2>/dev/null || ok=0
  done
  k=0
  while [ $k -lt $n ]; do
    [ -c /dev/infiniband/uverbs$k ] || ok=0
    k=$((k + 1))
  done
  [ $ok = 1 ] && break
  i=$((i + 1))
  [ $i -lt 200 ] || die "rxe devices not ready: $(cat /sys/class/infiniband/rxe*/ports/1/state 2>&1)"
  usleep 100000
done
log "network and $n rxe devices ready"

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
