#!/usr/bin/env bash
# Runs every nccl-ha test: unit tests natively, the fuzzers (1,000,000 inputs per target, see
# scripts/fuzz.sh), then the integration tests in two Soft-RoCE VMs.
#   scripts/test.sh            everything (installs what it needs first)
#   scripts/test.sh --unit     unit tests only
#   scripts/test.sh --fuzz     the fuzzers only
#   scripts/test.sh --vm       VM integration tests only
# Build dir: $NCCL_HA_BUILD_DIR (default build/; the fuzzers: build-fuzz/). Extra ctest args: $CTEST_ARGS.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
what=all
case ${1:-} in
  --unit) what=unit ;;
  --fuzz) what=fuzz ;;
  --vm) what=vm ;;
  "") ;;
  *) echo "usage: $0 [--unit|--fuzz|--vm]" >&2; exit 2 ;;
esac

bash "$REPO/scripts/setup.sh"
if [[ $what == fuzz ]]; then
  exec bash "$REPO/scripts/fuzz.sh"
fi
cmake -S "$REPO" -B "$BUILD" -G Ninja -DNCCL_HA_WERROR=ON
cmake --build "$BUILD"

# shellcheck disable=SC2086
run_ctest() { ctest --test-dir "$BUILD" --output-on-failure "$@" ${CTEST_ARGS:-}; }
case $what in
  unit) run_ctest -L unit ;;
  vm) run_ctest -L vm ;;
  all)
    run_ctest -LE vm  # every test but the VM ones: the unit tests
    bash "$REPO/scripts/fuzz.sh"
    run_ctest -L vm
    ;;
esac
