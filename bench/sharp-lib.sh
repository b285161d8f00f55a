# Sourced by bench/plugin-bench.sh --sharp SRC on the host:
#   bench_build_sharp SRC BUILD
#       NVIDIA's nccl-rdma-sharp-plugins (a checkout at SRC: its IB transport, the one that fuses
#       ports with makeVDevice as NCCL's net_ib does) built in BUILD/sharp-plugin (under the build
#       dir: the guests see it), without SHARP and UCX. Its configure demands the CUDA runtime,
#       which Debian's registry does not have, though its IB transport calls none of it: a
#       stand-in header declares the types NCCL's nccl.h names and a static stand-in library
#       defines the function configure probes (cudaMalloc, failing). The plugin's own sources are
#       built as they are. Needs autoconf, automake and libtool (installed if missing).
#       SRC: a git clone (bare or not: its HEAD) or a plain source tree. Sets SHARP_SO (the
#       plugin) and SHARP_DESC (the clone's commit, or "unknown").
bench_build_sharp() { # SRC BUILD
  local src=$1 build=$2 dir tool missing=()
  local git=0
  git -C "$src" rev-parse --git-dir >/dev/null 2>&1 && git -C "$src" cat-file -e HEAD:src/ib_plugin.c 2>/dev/null && git=1
  ((git)) || [[ -f $src/configure.ac && -f $src/src/ib_plugin.c ]] ||
    { echo "sharp-lib: $src is not a checkout of nccl-rdma-sharp-plugins (no configure.ac, src/ib_plugin.c)" >&2; return 1; }
  [[ $build == /tmp/* ]] && { echo "sharp-lib: $build is under /tmp, which the guests cannot see" >&2; return 1; }
  dir=$build/sharp-plugin
  SHARP_SO=$dir/inst/lib/libnccl-net.so
  SHARP_DESC=$(git -C "$src" describe --always --tags 2>/dev/null || git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ ${NCCL_HA_BENCH_NO_BUILD:-0} == 1 && -f $SHARP_SO ]]; then
    return 0
  fi
  for tool in autoconf automake libtoolize; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  if ((${#missing[@]})); then
    apt-get install -y autoconf automake libtool >/dev/null ||
      { echo "sharp-lib: cannot install autoconf automake libtool" >&2; return 1; }
  fi
  rm -rf "$dir"
  mkdir -p "$dir/cuda/include" "$dir/cuda/lib" "$dir/src"
  if ((git)); then  # a clone, bare or not: its HEAD
    git -C "$src" archive --format=tar HEAD | tar -x -C "$dir/src"
  else
    cp -a "$src/." "$dir/src"
  fi
  cat >"$dir/cuda/include/cuda_runtime.h" <<'EOF'
/* Stand-in for the CUDA runtime's header (bench/sharp-lib.sh): the types NCCL's nccl.h names. */
#pragma once
#include <stddef.h>
typedef struct CUstream_st* cudaStream_t;
typedef enum { cudaSuccess = 0, cudaErrorUnknown = 999 } cudaError_t;
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaGetLastError(void);
EOF
  cat >"$dir/cuda/stub.c" <<'EOF'
/* Stand-in for the CUDA runtime (bench/sharp-lib.sh): what configure probes; no GPU here. */
#include "cuda_runtime.h"
cudaError_t cudaMalloc(void** p, size_t n) { (void)p; (void)n; return cudaErrorUnknown; }
const char* cudaGetErrorString(cudaError_t e) { (void)e; return "no CUDA runtime (bench stand-in)"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
EOF
  (
    set -e
    cd "$dir"
    gcc -fPIC -O2 -Icuda/include -c cuda/stub.c -o cuda/stub.o
    ar rcs cuda/lib/libcudart_static.a cuda/stub.o
    gcc -shared cuda/stub.o -o cuda/lib/libcudart.so  # configure's link probe
    cd src
    ./autogen.sh
    ./configure --with-cuda="$dir/cuda" --with-sharp=no --with-ucx=no --prefix="$dir/inst"
    nice -n 10 make -j2
    make install
  ) >"$dir/build.log" 2>&1 || { echo "sharp-lib: building $src failed, see $dir/build.log" >&2; tail -20 "$dir/build.log" >&2; return 1; }
  [[ -f $SHARP_SO ]] || { echo "sharp-lib: $SHARP_SO missing after the build" >&2; return 1; }
  ! ldd "$SHARP_SO" | grep -q cudart || { echo "sharp-lib: $SHARP_SO links a CUDA runtime" >&2; return 1; }
}
