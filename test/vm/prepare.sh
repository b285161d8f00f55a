#!/usr/bin/env bash
# Prepares (and caches) the guest kernel and the busybox initramfs of the Soft-RoCE test bed.
#
#   test/vm/prepare.sh [--print-env]
#
# Cache: ${NCCL_HA_VM_CACHE:-$HOME/.cache/nccl-ha-vm}
#   kernel-<kver>/vmlinuz, vmlinux (uncompressed, for PVH direct boot), lib/modules/<kver>/...
#   initrd-<kver>-<hash>.cpio   (hash over guest-init.sh and this script: edits rebuild it;
#                                images unused for 7 days are removed)
# Re-running is a no-op when everything is cached.
# Kernel version: $NCCL_HA_VM_KVER (e.g. 6.1.0-56-amd64) if set, else what the Debian package
# linux-image-amd64 depends on, else (no apt lists) the newest cached kernel.
# --print-env prints VM_KVER, VM_VMLINUZ, VM_VMLINUX (empty if unavailable), VM_INITRD as
# shell assignments on stdout; all other messages go to stderr.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${NCCL_HA_VM_CACHE:-$HOME/.cache/nccl-ha-vm}
PRINT_ENV=0
[[ ${1:-} == --print-env ]] && PRINT_ENV=1

# Modules the init insmods, in this order (order verified by hand; checked against modinfo below).
MODULES=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci 9pnet
  9pnet_virtio netfs fscache 9p failover net_failover virtio_net crc32_generic ib_core ib_uverbs
  udp_tunnel ip6_udp_tunnel rdma_rxe
  configfs ib_cm iw_cm rdma_cm rdma_ucm # rdma_cm, e.g. for perftest -R
  sch_netem)                            # tc netem, for fault.sh

# vmlinuz -> vmlinux: find the xz stream after the bzImage's setup code and decompress it.
extract_vmlinux() {
  local off
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" | head -n1 | cut -d: -f1 || true)
  [[ -n $off ]] || return 1
  # xz stops after one stream; tail then dies of SIGPIPE, which is fine: check xz only.
  # (Called as an 'if' condition, so errexit does not fire on the failed pipeline.)
  tail -c +$((off + 1)) "$1" | xz -dcq --single-stream >"$2" 2>/dev/null
  [[ ${PIPESTATUS[1]} == 0 ]] && [[ $(head -c4 "$2" | od -An -c | tr -d ' ') == 177ELF ]]
}

msg() { echo "prepare: $*" >&2; }
die() { echo "prepare: ERROR: $*" >&2; exit 1; }

for tool in apt-get dpkg busybox cpio depmod modinfo xz sha256sum flock; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run scripts/setup.sh first"
done
BUSYBOX=$(command -v busybox)
# The initramfs needs a static busybox (busybox-static package).
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  die "$BUSYBOX is dynamically linked; install busybox-static (scripts/setup.sh)"
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9 # serialize concurrent prepare runs

# --- kernel version -------------------------------------------------------------------------
KVER=${NCCL_HA_VM_KVER:-}
if [[ -z $KVER ]]; then
  KVER=$(apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -n1) || true
fi
if [[ -z $KVER ]]; then
  KVER=$(find "$CACHE" -maxdepth 1 -name 'kernel-*' -printf '%f\n' 2>/dev/null |
    sed 's/^kernel-//' | sort -V | tail -n1)
  [[ -n $KVER ]] || die "cannot determine the kernel version: apt-cache depends linux-image-amd64 gave nothing (run apt-get update?) and nothing is cached; or set NCCL_HA_VM_KVER"
  msg "apt-cache gave no kernel version; using cached $KVER"
fi

# --- kernel + modules -----------------------------------------------------------------------
KDIR=$CACHE/kernel-$KVER
# .complete records the module list: changing MODULES re-extracts the kernel package.
if [[ $(cat "$KDIR/.complete" 2>/dev/null) != "${MODULES[*]}" ]]; then
  msg "fetching linux-image-$KVER (apt-get download) ..."
  rm -rf "$KDIR"
  tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download -q "linux-image-$KVER" >&2 2>&1) ||
    die "apt-get download linux-image-$KVER failed"
  msg "unpacking ..."
  dpkg -x "$tmp"/linux-image-"$KVER"_*.deb "$tmp/x"
  mkdir -p "$tmp/k/lib/modules/$KVER"
  cp "$tmp/x/boot/vmlinuz-$KVER" "$tmp/k/vmlinuz"
  cp "$tmp/x/boot/config-$KVER" "$tmp/k/config"
  src=$tmp/x/lib/modules/$KVER
  cp "$src"/modules.order "$src"/modules.builtin* "$tmp/k/lib/modules/$KVER/"
  for m in "${MODULES[@]}"; do
    ko=$(cd "$src" && find kernel -name "$m.ko" -o -name "$m.ko.xz" | head -n1)
    [[ -n $ko ]] || die "module $m not found in linux-image-$KVER"
    mkdir -p "$tmp/k/lib/modules/$KVER/$(dirname "$ko")"
    cp "$src/$ko" "$tmp/k/lib/modules/$KVER/$ko"
    if [[ $ko == *.xz ]]; then xz -d "$tmp/k/lib/modules/$KVER/$ko"; fi
  done
  # Uncompressed kernel for qemu's PVH direct boot (skips BIOS + decompressor). Optional.
  if extract_vmlinux "$tmp/k/vmlinuz" "$tmp/k/vmlinux"; then
    msg "extracted uncompressed vmlinux for PVH boot"
  else
    rm -f "$tmp/k/vmlinux"
    msg "could not extract vmlinux (not xz?); will boot the bzImage"
  fi
  echo "${MODULES[*]}" >"$tmp/k/.complete"
  mv "$tmp/k" "$KDIR"
  rm -rf "$tmp"
  trap - EXIT
fi

# --- initramfs ------------------------------------------------------------------------------
HASH=$(cat "$HERE/guest-init.sh" "$HERE/prepare.sh" | sha256sum | cut -c1-12)
INITRD=$CACHE/initrd-$KVER-$HASH.cpio
if [[ ! -f $INITRD ]]; then
  msg "building initramfs $(basename "$INITRD") ..."
  tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/bin" "$tmp/etc" "$tmp/lib/modules"
  cp "$BUSYBOX" "$tmp/bin/busybox"
  cp "$HERE/guest-init.sh" "$tmp/init"
  chmod 755 "$tmp/init"
  cp -r "$KDIR/lib/modules/$KVER" "$tmp/lib/modules/"
  depmod -b "$tmp" "$KVER" # lets the kernel's request_module() find the bundled modules
  # Module list in insmod order; check every dependency is loaded before its user.
  loaded=" "
  for m in "${MODULES[@]}"; do
    ko=$(cd "$tmp/lib/modules/$KVER" && find kernel -name "$m.ko")
    for dep in $(modinfo -F depends "$tmp/lib/modules/$KVER/$ko" | tr , ' '); do
      [[ $loaded == *" ${dep//-/_} "* ]] || die "module order: $m needs $dep first"
    done
    loaded+="$m "
    echo "$ko" >>"$tmp/etc/modules.list"
  done
  (cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$tmp.cpio"
  mv "$tmp.cpio" "$INITRD"
  rm -rf "$tmp"
  trap - EXIT
  # Drop initramfs images of other init/prepare versions for this kernel once unused for a week.
  # Not at once: several work trees (with different guest-init.sh versions) share this cache,
  # and a run of another tree may be about to boot its image.
  find "$CACHE" -maxdepth 1 -name "initrd-$KVER-*.cpio" ! -name "$(basename "$INITRD")" \
    -mtime +7 -delete
fi
touch "$INITRD" # last use, for the clean-up above

VMLINUX=
[[ -f $KDIR/vmlinux ]] && VMLINUX=$KDIR/vmlinux
if ((PRINT_ENV)); then
  printf 'VM_KVER=%q\nVM_VMLINUZ=%q\nVM_VMLINUX=%q\nVM_INITRD=%q\n' \
    "$KVER" "$KDIR/vmlinuz" "$VMLINUX" "$INITRD"
else
  msg "ready: kernel $KVER, initramfs $INITRD"
fi
