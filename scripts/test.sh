#!/usr/bin/env bash
# Runs every nccl-ha test: unit tests natively, then the integration tests in two Soft-RoCE VMs.
#   scripts/test.sh            everything (installs what it needs first)
#   scripts/test.sh --unit     unit tests only
#   scripts/test.sh --vm       VM integration tests only
# Build dir: $NCCL_HA_BUILD_DIR (default build/). Extra ctest args: $CTEST_ARGS.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
what=all
case ${1:-} in
  --unit) what=unit ;;
  --vm) what=vm ;;
  "") ;;
  *) echo "usage: $0 [--unit|--vm]" >&2; exit 2 ;;
esac

bash "$REPO/scripts/setup.sh"
cmake -S "$REPO" -B "$BUILD" -G Ninja -DNCCL_HA_WERROR=ON
cmake --build "$BUILD"

labels=()
case $what in
  unit) labels=(-L unit) ;;
  vm) labels=(-L vm) ;;
esac
# shellcheck disable=SC2086
ctest --test-dir "$BUILD" --output-on-failure "${labels[@]}" ${CTEST_ARGS:-}
