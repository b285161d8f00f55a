#!/usr/bin/env bash
# Installs everything nccl-ha needs to build, test and run its Soft-RoCE test bed.
# Idempotent: packages already present are skipped; apt-get update runs only when needed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-test1.81-dev
  libssl-dev  # libcrypto: HMAC-SHA256 of the handshakes
  libibverbs-dev rdma-core ibverbs-providers ibverbs-utils perftest
  qemu-system-x86 busybox-static cpio kmod iproute2 python3
  tcpdump  # plugin-qos, ha-ping-rails: the TOS byte of RoCE packets on the wire; plugin-qps: QPs and writes
  rpm   # rpmbuild: CPack's .rpm packages (scripts/package-check.sh)
  clang-14 libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer, ASan and UBSan runtimes
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
