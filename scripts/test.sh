#!/usr/bin/env bash
# Runs every nccl-ha test: the unit tests natively (gcc), the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer and the fuzzers (one clang build for both, see
# scripts/fuzz.sh), then the integration tests in two Soft-RoCE VMs, one at a time.
#   scripts/test.sh            everything (installs what it needs first)
#   scripts/test.sh --unit     unit tests only
#   scripts/test.sh --sanitize unit tests under ASan + UBSan only (clang, in the fuzzers' build)
#   scripts/test.sh --fuzz     the fuzzers only
#   scripts/test.sh --vm       VM integration tests only
# In "everything" the unit tests of both builds (they mostly wait: timers, timeouts) run at once,
# while the fuzzers fuzz for their fixed time (FUZZ_BUDGET, see scripts/fuzz.sh) at a lower CPU
# priority: the unit tests cost no wall time of their own; the fuzzers' output is shown when they
# are done.
# Build dir: $NCCL_HA_BUILD_DIR (default build/; the sanitizer build: $NCCL_HA_FUZZ_DIR, default
# build-fuzz/). Extra ctest args: $CTEST_ARGS. Each step's wall time is printed at the end, and
# appended ("STEP SECONDS" per line) to the file $NCCL_HA_STEP_TIMES when that is set (.ci/run).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_BUILD_DIR:-$REPO/build}
what=all
case ${1:-} in
  --unit) what=unit ;;
  --sanitize) what=sanitize ;;
  --fuzz) what=fuzz ;;
  --vm) what=vm ;;
  "") ;;
  *) echo "usage: $0 [--unit|--sanitize|--fuzz|--vm]" >&2; exit 2 ;;
esac

steps=()
step_name=
step_start=0
# step NAME: ends the running step (records its time) and starts NAME; "step" alone ends it.
step() {
  local now
  now=$(date +%s)
  if [[ -n $step_name ]]; then
    steps+=("$(printf '%-56s %6d' "$step_name" $((now - step_start)))")
    [[ -z ${NCCL_HA_STEP_TIMES:-} ]] || echo "$step_name $((now - step_start))" >>"$NCCL_HA_STEP_TIMES"
  fi
  step_name=${1:-}
  step_start=$now
}
on_exit() {
  local rc=$?
  [[ -z ${fuzz_pid:-} ]] || kill "$fuzz_pid" 2>/dev/null || true  # fuzzers still running: this failed
  [[ -z ${san_pid:-} ]] || kill "$san_pid" 2>/dev/null || true
  ((rc == 0)) || echo "test.sh: FAILED (exit $rc) in step '$step_name' after $(($(date +%s) - step_start)) s" >&2
  step
  ((${#steps[@]} == 0)) || { echo "test.sh: step times (s):"; printf '  %s\n' "${steps[@]}"; }
}
trap on_exit EXIT

step setup
bash "$REPO/scripts/setup.sh"
case $what in
  fuzz) step fuzzers; bash "$REPO/scripts/fuzz.sh"; exit ;;
  sanitize) step "sanitizer unit tests"; bash "$REPO/scripts/fuzz.sh" --unit-tests; exit ;;
esac
step build
# The build type's flags with line tables only (-g1) instead of full debug info: the same code,
# backtraces still name file:line, a third less compile time (NCCL_HA_TEST_CXX_FLAGS to change).
TEST_FLAGS=${NCCL_HA_TEST_CXX_FLAGS:--O2 -g1 -DNDEBUG}
# NCCL_HA_UNITY_BUILD: the libraries and tools a few sources per compiler run (a minute less on
# two cores; the tests are still compiled one source at a time). NCCL_HA_TEST_HOOKS: the plugin's
# HA_NCCL_TEST_* fault injections, which the VM tests use (never in the packages:
# scripts/package-check.sh packages a plugin built without them).
cmake -S "$REPO" -B "$BUILD" -G Ninja -DNCCL_HA_WERROR=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$TEST_FLAGS" \
  -DNCCL_HA_UNITY_BUILD=ON -DNCCL_HA_TEST_HOOKS=ON
cmake --build "$BUILD"

# vm_verdicts: each failed VM test's failed checks again, last: ctest prints a failed test's whole
# output (hundreds of check lines) where it ran, and a reader of a cut of this output (CI shows the
# head and the tail) gets the verdicts here, next to ctest's summary.
vm_verdicts() {
  local line name log
  while IFS= read -r line; do
    name=${line#*:}
    name=${name#vm.}
    log=$BUILD/vm-logs/$name/check.log
    echo "test.sh: $line failed:"
    if grep -q '^check: FAIL' "$log" 2>/dev/null; then
      grep -m 20 '^check: FAIL' "$log" | cut -c1-600
    elif [[ -s $log ]]; then
      echo "  (no failed check printed: check.py itself failed; see $log)"
      tail -n 5 "$log"
    else
      echo "  (no check.log: the guests or the bed failed; see $BUILD/vm-logs/$name/summary.txt)"
      tail -n 5 "$BUILD/vm-logs/$name/summary.txt" 2>/dev/null || true
    fi
  done < <(grep '^[0-9]*:vm\.' "$BUILD/Testing/Temporary/LastTestsFailed.log" 2>/dev/null || true)
}
# shellcheck disable=SC2086
run_ctest() { ctest --test-dir "$BUILD" --output-on-failure "$@" ${CTEST_ARGS:-}; }
case $what in
  unit) step "unit tests"; run_ctest -L unit ;;
  vm) step "VM tests"; run_ctest -L vm || { rc=$?; vm_verdicts; exit "$rc"; } ;;
  all)
    step "sanitizer build (clang: fuzzers, unit tests)"
    bash "$REPO/scripts/fuzz.sh" --build-only
    step "fuzzers; alongside: unit tests, native and ASan + UBSan"
    fuzz_log=${NCCL_HA_FUZZ_DIR:-$REPO/build-fuzz}/fuzz-logs/fuzz.sh.log
    mkdir -p "$(dirname "$fuzz_log")"
    nice -n 10 bash "$REPO/scripts/fuzz.sh" --no-build >"$fuzz_log" 2>&1 &
    fuzz_pid=$!
    failed=()
    t0=$(date +%s)
    echo "test.sh: the fuzzers run in the background (their output: $fuzz_log, shown when done)"
    # every test but the VM ones: the unit tests, two at a time (most wait on timers and peers; the
    # longest, unit.driver_fake, ~55 s alone), and beside them the same under ASan + UBSan (their
    # output shown after the native ones'); the fuzzers run at a lower CPU priority meanwhile
    san_log=${NCCL_HA_FUZZ_DIR:-$REPO/build-fuzz}/fuzz-logs/unit-tests.log
    bash "$REPO/scripts/fuzz.sh" --no-build --unit-tests >"$san_log" 2>&1 &
    san_pid=$!
    run_ctest -LE vm -j2 || failed+=("unit tests")
    t1=$(date +%s)
    wait "$san_pid" || failed+=("unit tests under ASan + UBSan")
    san_pid=
    t2=$(date +%s)
    cat "$san_log"
    echo "test.sh: unit tests $((t1 - t0)) s, under ASan + UBSan (beside them) $((t2 - t0)) s; waiting for the fuzzers"
    wait "$fuzz_pid" || failed+=(fuzzers)
    fuzz_pid=
    cat "$fuzz_log"
    ((${#failed[@]} == 0)) || { echo "test.sh: FAILED: ${failed[*]}" >&2; exit 1; }
    step "VM tests"
    run_ctest -L vm || { rc=$?; vm_verdicts; exit "$rc"; }
    ;;
esac
