#!/usr/bin/env bash
# Builds the nccl-ha packages from a configured build directory and proves that what is in them
# works, from a clean extracted tree (no install into the system):
#   - .deb: nccl-ha (runtime), nccl-ha-dev, nccl-ha-doc with the expected names, version,
#     dependencies and files, no file in two packages; .rpm too when rpmbuild is installed (the
#     same files as the .debs)
#   - every .deb extracted with dpkg-deb -x into BUILD/pkgroot
#   - ha-ping --version and ha-net-driver --version run from there and print the version
#   - the extracted libnccl-net-ha.so passes test/unit/plugin/check_elf.py: no libstdc++/libgcc_s,
#     only ncclNetPlugin_v* exported, GLIBC bound, dlopen + ncclNetPlugin_v12 + dlclose + reload
#   - the packaged plugin has no test hooks (test/unit/plugin/check_test_hooks.py: no HA_NCCL_TEST_*
#     name). A build with them (-DNCCL_HA_TEST_HOOKS=ON, e.g. scripts/test.sh's) gets the plugin
#     alone built without them in BUILD/release-plugin (the libraries and the plugin, nothing
#     else; the build's compiler and flags), and packages that one (NCCL_HA_PACKAGE_PLUGIN, set
#     for cpack and cleared again afterwards)
#   - examples/consumer configures and builds against the extracted dev package with
#     find_package(nccl-ha) (it must find that one) and with pkg-config; both programs run
# usage: scripts/package-check.sh [BUILD_DIR]      (default: $NCCL_HA_BUILD_DIR, else build/)
# Fails loudly (exit 1) on the first problem.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-${NCCL_HA_BUILD_DIR:-$REPO/build}}" && pwd)
say() { printf -- '---- %s\n' "$*"; }
die() { printf 'package-check: FAIL: %s\n' "$*" >&2; exit 1; }

[[ -f $BUILD/CPackConfig.cmake ]] || die "$BUILD is not a configured nccl-ha build directory (run cmake first)"
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
VERSION=$(cache CMAKE_PROJECT_VERSION)
LIBDIR=$(cache CMAKE_INSTALL_LIBDIR)
[[ -n $VERSION && -n $LIBDIR ]] || die "no CMAKE_PROJECT_VERSION / CMAKE_INSTALL_LIBDIR in $BUILD/CMakeCache.txt"
[[ $(cache NCCL_HA_SANITIZE) != ON ]] || die "$BUILD is a sanitizer build: package a normal build"
PKGS=$BUILD/packages ROOT=$BUILD/pkgroot

say "build and package nccl-ha $VERSION ($BUILD)"
cmake --build "$BUILD"
if [[ $(cache NCCL_HA_TEST_HOOKS) == ON ]]; then
  REL=$BUILD/release-plugin
  say "$BUILD has test hooks: the packages get a plugin built without them ($REL)"
  rel_args=(-DNCCL_HA_TEST_HOOKS=OFF -DNCCL_HA_BUILD_TESTS=OFF -DNCCL_HA_BUILD_TOOLS=OFF)
  for v in CMAKE_BUILD_TYPE CMAKE_CXX_COMPILER CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CXX_FLAGS \
    CMAKE_CXX_FLAGS_RELWITHDEBINFO CMAKE_CXX_FLAGS_RELEASE CMAKE_INSTALL_LIBDIR NCCL_HA_UNITY_BUILD NCCL_HA_WERROR; do
    rel_args+=("-D$v=$(cache "$v")")
  done
  cmake -S "$REPO" -B "$REL" -G Ninja "${rel_args[@]}" >/dev/null || die "cannot configure $REL"
  cmake --build "$REL" --target nccl-net-ha || die "cannot build the plugin in $REL"
  # The package rule points at it for this cpack only (a later install of $BUILD is its own again).
  trap 'cmake -DNCCL_HA_PACKAGE_PLUGIN= "$BUILD" >/dev/null' EXIT
  cmake -DNCCL_HA_PACKAGE_PLUGIN="$REL/src/plugin/libnccl-net-ha.so" "$BUILD" >/dev/null
fi
rm -rf "$PKGS"
(cd "$BUILD" && cpack) || die "cpack failed"

# ---- the .debs ----
ARCH=$(dpkg --print-architecture)
DEB_RT=$PKGS/nccl-ha_${VERSION}_$ARCH.deb
DEB_DEV=$PKGS/nccl-ha-dev_${VERSION}_$ARCH.deb
DEB_DOC=$PKGS/nccl-ha-doc_${VERSION}_all.deb
for d in "$DEB_RT" "$DEB_DEV" "$DEB_DOC"; do [[ -f $d ]] || die "missing $d (have: $(ls "$PKGS"))"; done
(($(find "$PKGS" -maxdepth 1 -name '*.deb' | wc -l) == 3)) || die "expected 3 .deb files, have: $(ls "$PKGS")"

# deb_has DEB PATH...: each path (relative to /) is a regular file or symlink in the package.
deb_has() {
  local deb=$1 f list
  shift
  list=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./||')
  for f in "$@"; do grep -qxF "$f" <<<"$list" || die "$(basename "$deb") lacks $f"; done
}
deb_has "$DEB_RT" "usr/$LIBDIR/libnccl-net-ha.so" usr/bin/ha-ping usr/bin/ha-net-driver \
  usr/share/doc/nccl-ha/copyright
deb_has "$DEB_DEV" "usr/$LIBDIR/librdma_reactor.a" "usr/$LIBDIR/libha_net.a" \
  usr/include/nccl_ha/version.hpp usr/include/nccl_ha/reactor/reactor.hpp usr/include/nccl_ha/net/discovery.hpp \
  usr/include/nccl_ha/nccl_ha_profiler.h \
  "usr/$LIBDIR/cmake/nccl-ha/nccl-haConfig.cmake" "usr/$LIBDIR/cmake/nccl-ha/nccl-haConfigVersion.cmake" \
  "usr/$LIBDIR/cmake/nccl-ha/nccl-ha-targets.cmake" "usr/$LIBDIR/pkgconfig/nccl-ha.pc" \
  usr/share/doc/nccl-ha-dev/copyright
deb_has "$DEB_DOC" usr/share/doc/nccl-ha/README.md usr/share/doc/nccl-ha/LICENSE usr/share/doc/nccl-ha/docs/settings.md usr/share/doc/nccl-ha/docs/architecture.md
for d in "$DEB_RT" "$DEB_DEV" "$DEB_DOC"; do
  [[ $(dpkg-deb -f "$d" Version) == "$VERSION" ]] || die "$(basename "$d"): Version $(dpkg-deb -f "$d" Version), expected $VERSION"
  echo "$(dpkg-deb -f "$d" Package) $(dpkg-deb -f "$d" Version) $(dpkg-deb -f "$d" Architecture): Depends: $(dpkg-deb -f "$d" Depends)"
done
dpkg-deb -f "$DEB_RT" Depends | grep -qw libibverbs1 || die "nccl-ha does not depend on libibverbs1"
dpkg-deb -f "$DEB_DEV" Depends | grep -qw libibverbs-dev || die "nccl-ha-dev does not depend on libibverbs-dev"
dups=$(for d in "$DEB_RT" "$DEB_DEV" "$DEB_DOC"; do dpkg-deb -c "$d" | grep -v '^d' | awk '{print $6}'; done | sort | uniq -d)
[[ -z $dups ]] || die "files in more than one package (dpkg would refuse them): $dups"

say "extract into $ROOT"
rm -rf "$ROOT"
mkdir -p "$ROOT"
for d in "$DEB_RT" "$DEB_DEV" "$DEB_DOC"; do dpkg-deb -x "$d" "$ROOT"; done
PREFIX=$ROOT/usr

# ---- .rpm: the same files as the .debs ----
if compgen -G "$PKGS/*.rpm" >/dev/null; then
  say "rpm packages"
  RPM_ROOT=$BUILD/pkgroot-rpm
  rm -rf "$RPM_ROOT"
  mkdir -p "$RPM_ROOT"
  n=0
  for r in "$PKGS"/*.rpm; do
    rpm -qp --qf '%{NAME} %{VERSION} %{ARCH} License: %{LICENSE}\n' "$r"
    [[ $(rpm -qp --qf '%{VERSION}' "$r") == "$VERSION" ]] || die "$(basename "$r"): version is not $VERSION"
    [[ $(rpm -qp --qf '%{LICENSE}' "$r") == Apache-2.0 ]] || die "$(basename "$r"): license is not Apache-2.0"
    (cd "$RPM_ROOT" && rpm2cpio "$r" | cpio -idm --quiet) || die "cannot unpack $r"
    n=$((n + 1))
  done
  ((n == 3)) || die "expected 3 .rpm files, have: $(ls "$PKGS"/*.rpm)"
  rpm -qpR "$PKGS"/nccl-ha-"$VERSION"-*.rpm | grep -q '^libibverbs' || die "the nccl-ha rpm does not require libibverbs"
  diff <(cd "$ROOT" && find . -type f | sort) <(cd "$RPM_ROOT" && find . -type f | sort) \
    || die "the .rpm files hold other files than the .debs (diff above)"
  echo "rpm: $n packages, the same $(cd "$RPM_ROOT" && find . -type f | wc -l) files as the .debs"
else
  say "no .rpm packages (rpmbuild not installed)"
fi

# Test-only libraries (the VM tests' dma-buf and ECE shims: test/integration/shim) are never packaged.
shims=$(cd "$ROOT" && find . -name '*test-*-shim*')
[[ -z $shims ]] || die "a test-only library is in the packages: $shims"

# ---- the runtime package ----
say "tools from the extracted tree"
out=$("$PREFIX/bin/ha-net-driver" --version) || die "ha-net-driver --version failed"
[[ $out == "ha-net-driver $VERSION" ]] || die "ha-net-driver --version printed '$out', expected 'ha-net-driver $VERSION'"
echo "$out"
out=$("$PREFIX/bin/ha-ping" --version) || die "ha-ping --version failed"
[[ $out == "ha-ping $VERSION" ]] || die "ha-ping --version printed '$out', expected 'ha-ping $VERSION'"
echo "$out"

say "plugin from the extracted tree"
python3 "$REPO/test/unit/plugin/check_elf.py" "$PREFIX/$LIBDIR/libnccl-net-ha.so" "$REPO/src/plugin/api/exports.map" \
  --max-glibc "$(cache NCCL_HA_MAX_GLIBC | grep . || echo 2.34)" || die "the extracted plugin failed its ELF/load check"
python3 "$REPO/test/unit/plugin/check_test_hooks.py" "$PREFIX/$LIBDIR/libnccl-net-ha.so" --expect absent \
  || die "the packaged plugin has test hooks (HA_NCCL_TEST_*): build it with -DNCCL_HA_TEST_HOOKS=OFF"
python3 - "$PREFIX/$LIBDIR/libnccl-net-ha.so" <<'PY' || die "the extracted plugin does not dlopen"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
ctypes.c_void_p.in_dll(lib, "ncclNetPlugin_v12")
print("dlopen", sys.argv[1], "ok; ncclNetPlugin_v12 exported")
PY

# ---- the dev package: find_package and pkg-config ----
say "consumer with find_package(nccl-ha) from the extracted tree"
rm -rf "$BUILD/pkg-consumer"
cmake -S "$REPO/examples/consumer" -B "$BUILD/pkg-consumer" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_COMPILE_WARNING_AS_ERROR=ON
found=$(sed -n 's/^nccl-ha_DIR:PATH=//p' "$BUILD/pkg-consumer/CMakeCache.txt")
[[ $found == "$PREFIX/$LIBDIR/cmake/nccl-ha" ]] || die "find_package(nccl-ha) found '$found', not the extracted package"
cmake --build "$BUILD/pkg-consumer"
"$BUILD/pkg-consumer/list-ports"

say "consumer with pkg-config from the extracted tree"
export PKG_CONFIG_PATH=$PREFIX/$LIBDIR/pkgconfig
[[ $(pkg-config --modversion nccl-ha) == "$VERSION" ]] || die "pkg-config --modversion nccl-ha is not $VERSION"
incdir=$(pkg-config --variable=includedir nccl-ha)
[[ $(cd "$incdir" && pwd) == "$PREFIX/include" ]] || die "nccl-ha.pc includedir $incdir is not $PREFIX/include"
echo "pkg-config --cflags --libs nccl-ha: $(pkg-config --cflags --libs nccl-ha)"
# shellcheck disable=SC2046
c++ -std=c++20 -Wall -Wextra -Werror -o "$BUILD/pkg-consumer/list-ports-pc" "$REPO/examples/consumer/main.cpp" \
  $(pkg-config --cflags --libs nccl-ha) || die "examples/consumer/main.cpp does not build with pkg-config"
"$BUILD/pkg-consumer/list-ports-pc"

say "package check passed: $(find "$PKGS" -maxdepth 1 \( -name '*.deb' -o -name '*.rpm' \) -printf '%f ')"
