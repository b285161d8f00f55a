#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz) with clang, AddressSanitizer and UndefinedBehaviorSanitizer,
# and runs every target from its checked-in seed corpus (test/fuzz/corpus/<target>/) and, when
# there is one, its dictionary (test/fuzz/dict/<target>.dict), for a time (FUZZ_SECONDS) or for a
# number of inputs (FUZZ_RUNS).
#   scripts/fuzz.sh                    every target
#   scripts/fuzz.sh conn_msg handle    only these
#   scripts/fuzz.sh --unit-tests       no fuzzing: build the unit tests in this same clang
#                                      ASan + UBSan build and run them (ctest -L unit)
#   scripts/fuzz.sh --build-only       build the fuzzers and the unit tests, run nothing
#   scripts/fuzz.sh --no-build ...     (first) run what is already built: no configure, no build
#                                      (scripts/test.sh runs fuzzers and unit tests side by side)
# How long (each target runs for one of these; the first that is set wins):
#   FUZZ_RUNS=N        exactly N inputs per target (no time bound); e.g. FUZZ_RUNS=10000000
#   FUZZ_SECONDS=S     S seconds per target
#   FUZZ_BUDGET=S      S seconds of wall time for all the targets together (default 80), shared
#                      out: S x FUZZ_JOBS / number of targets per target, at least 8 s each
#                      (21 targets, two CPUs: 8 s each, ~85 s of wall time; 40k to 1.3M inputs per
#                      target in 10 s at CI's rates).
#                      A fixed budget keeps CI's time fixed as targets are added.
# A timed target that ran fewer inputs than its minimum rate x (its seconds - 5) fails (MIN_RATE below;
# $FUZZ_MIN_RATE for targets not listed there, default 100 per second): a target that became
# that slow, or a machine that cannot fuzz, is an error, not a quiet pass.
# Build dir: $NCCL_HA_FUZZ_DIR (default build-fuzz/); compiler: $NCCL_HA_FUZZ_CXX (clang++-14);
# targets run $FUZZ_JOBS at a time (default: the number of CPUs).
# New inputs go to <build dir>/fuzz-corpus/<target> (the checked-in seeds are only read), a
# failing input to <build dir>/fuzz-artifacts/<target>/ (reproduce: fuzz_<target> FILE), the
# log to <build dir>/fuzz-logs/<target>.log.
# Fails loudly: any crash, sanitizer report, leak, timeout, or a target that did not run all its
# inputs (FUZZ_RUNS) or too few (the minimum rate) makes the script print that target's log and
# exit non-zero.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_FUZZ_DIR:-$REPO/build-fuzz}
JOBS=${FUZZ_JOBS:-$(nproc)}
MIN_RATE_DEFAULT=${FUZZ_MIN_RATE:-100}
STARTUP=5  # seconds of a timed run not held to the minimum rate (start, corpus replay)
CXX_FUZZ=${NCCL_HA_FUZZ_CXX:-clang++-14}
# Longest input per target (libFuzzer's -max_len); a handshake stream needs no more than 1 KiB.
declare -A MAX_LEN=([handshake_read]=1024)
# Least inputs per second of a timed run, per target: a quarter of what each ran in 10 s on a
# two-core machine under heavy load (2026-11-25, load 6-8 with a build beside: ~15 % of a core
# per target); in a 32 s run at load ~5 (about half a core each) they ran 9-64 x their minimum.
# The slow ones open a real socket per input (handshake_read: 522/s there) or parse many settings
# per input. New targets: $FUZZ_MIN_RATE (default 100).
# control_record, reprotect_request (2026-11-27): 13.9k and 3.1k/s in 30 s, two at a time at load ~6.7
# (about a third of a core each), 8.0k and 1.6k/s at load ~8.5: about a fifth of the latter.
declare -A MIN_RATE=([standby_map]=400 [byte_reader]=8000 [config]=120 [conn_msg]=300 [control_record]=1500
  [device_filter]=1000 [env_int]=1000 [file_pattern]=1500 [ha_ping_options]=500 [handle]=2500 [handshake_read]=20
  [host_port]=2000 [qos]=150 [reprotect_request]=300 [socket_if]=100 [wire_endpoint]=1500 [wire_frame]=1500)
for v in FUZZ_RUNS FUZZ_SECONDS FUZZ_BUDGET FUZZ_MIN_RATE FUZZ_JOBS; do
  [[ -z ${!v:-} || ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: $v must be a positive whole number (got '${!v}')" >&2; exit 2; }
done

# One clang ASan + UBSan build for the fuzzers and the unit tests (the same libraries, built
# once; the unit tests only for --unit-tests and --build-only). NCCL_HA_SANITIZE=ON as well: the
# unit tests are built as in any sanitizer build (no static libstdc++ in the plugin, no ELF
# checks of it). clang links its sanitizer runtimes into executables only; a sanitized shared
# library (libnccl-net-ha.so, loaded by unit.plugin) takes them from the executable at load
# time, so its link must allow those undefined symbols: -z undefs last on the shared-library
# link line, after the plugin's own --no-undefined (which the normal build keeps enforcing).
shared_link='<CMAKE_CXX_COMPILER> <CMAKE_SHARED_LIBRARY_CXX_FLAGS> <LANGUAGE_COMPILE_FLAGS> <LINK_FLAGS>'
shared_link+=' <CMAKE_SHARED_LIBRARY_CREATE_CXX_FLAGS> <SONAME_FLAG><TARGET_SONAME> -o <TARGET> <OBJECTS>'
shared_link+=' <LINK_LIBRARIES> -Wl,-z,undefs'
mode=fuzz build=1
[[ ${1:-} != --no-build ]] || { build=0; shift; }
case ${1:-} in
  --unit-tests | --build-only)
    mode=${1#--}
    (($# == 1)) || { echo "usage: $0 [--no-build] $1   (no targets with it)" >&2; exit 2; }
    shift
    ;;
esac
if ((build)); then
  cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DNCCL_HA_FUZZ=ON -DNCCL_HA_SANITIZE=ON \
    -DNCCL_HA_BUILD_TESTS=ON -DNCCL_HA_BUILD_TOOLS=OFF -DNCCL_HA_WERROR=ON -DNCCL_HA_UNITY_BUILD=ON -DNCCL_HA_TEST_HOOKS=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="${NCCL_HA_TEST_CXX_FLAGS:--O2 -g1 -DNDEBUG}" \
    -DCMAKE_CXX_CREATE_SHARED_LIBRARY="$shared_link" >/dev/null
  if [[ $mode == fuzz ]]; then cmake --build "$BUILD" --target fuzzers; else cmake --build "$BUILD"; fi
else
  [[ -f $BUILD/build.ninja ]] || { echo "fuzz: --no-build, but $BUILD is not built" >&2; exit 1; }
fi
case $mode in
  build-only) exit ;;
  unit-tests)
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$BUILD" -L unit --output-on-failure
    exit
    ;;
esac

if (($#)); then
  targets=("$@")
else
  mapfile -t targets < <(find "$REPO/test/fuzz/corpus" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
fi
for t in "${targets[@]}"; do
  [[ -x $BUILD/test/fuzz/fuzz_$t && -d $REPO/test/fuzz/corpus/$t ]] ||
    { echo "fuzz: no target '$t' (no fuzz_$t or no corpus/$t)" >&2; exit 1; }
done

RUNS=${FUZZ_RUNS:-}
if [[ -n $RUNS ]]; then
  limit=(-runs="$RUNS")
  what="$RUNS inputs"
else
  SECONDS_EACH=${FUZZ_SECONDS:-}
  if [[ -z $SECONDS_EACH ]]; then
    SECONDS_EACH=$((${FUZZ_BUDGET:-80} * JOBS / ${#targets[@]}))
    ((SECONDS_EACH >= 8)) || SECONDS_EACH=8
  fi
  limit=(-max_total_time="$SECONDS_EACH")
  what="$SECONDS_EACH s"
fi

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
mkdir -p "$BUILD/fuzz-logs"

# One target: its log, then a result line "<target> <rc> <ms>" in fuzz-logs/<target>.result.
run_one() {
  local t=$1 work=$BUILD/fuzz-corpus/$1 artifacts=$BUILD/fuzz-artifacts/$1 log=$BUILD/fuzz-logs/$1.log
  mkdir -p "$work" "$artifacts"
  rm -f "$artifacts"/*
  local start rc=0 dict=() done_runs
  [[ -f $REPO/test/fuzz/dict/$t.dict ]] && dict=(-dict="$REPO/test/fuzz/dict/$t.dict")
  start=$(date +%s%N)
  "$BUILD/test/fuzz/fuzz_$t" "${limit[@]}" -max_len="${MAX_LEN[$t]:-4096}" -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" ${dict[@]+"${dict[@]}"} "$work" "$REPO/test/fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  if ((rc == 0)); then
    done_runs=$(sed -n 's/^Done \([0-9]*\) runs in .*/\1/p' "$log")
    if [[ -z $done_runs ]]; then
      rc=99  # ended early without saying why
    elif [[ -n $RUNS ]]; then
      ((done_runs == RUNS)) || rc=99
    else
      # The first seconds go to starting up and replaying the corpus: not counted.
      local min=$((${MIN_RATE[$t]:-$MIN_RATE_DEFAULT} * (SECONDS_EACH > STARTUP ? SECONDS_EACH - STARTUP : 0)))
      if ((done_runs < min)); then
        echo "fuzz: $t ran only $done_runs inputs in $SECONDS_EACH s, fewer than its minimum $min" \
          "(${MIN_RATE[$t]:-$MIN_RATE_DEFAULT}/s after the first $STARTUP s; too slow, or the machine too busy?)" >>"$log"
        rc=97
      fi
    fi
  fi
  echo "$t $rc $((($(date +%s%N) - start) / 1000000)) ${done_runs:-0}" >"$BUILD/fuzz-logs/$t.result"
}

total_start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  if ((running >= JOBS)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz: $t: $what ..."
  rm -f "$BUILD/fuzz-logs/$t.result"
  run_one "$t" &
  running=$((running + 1))
done
wait || true

failed=()
summary=()
for t in "${targets[@]}"; do
  read -r _ rc ms runs <"$BUILD/fuzz-logs/$t.result" || { rc=98; ms=0; runs=0; }
  if ((rc != 0)); then
    failed+=("$t")
    echo "fuzz: $t FAILED (exit $rc) after $((ms / 1000)) s; its log ($BUILD/fuzz-logs/$t.log) ends with:" >&2
    tail -60 "$BUILD/fuzz-logs/$t.log" >&2
    echo "fuzz: failing inputs: $(ls "$BUILD/fuzz-artifacts/$t" 2>/dev/null | tr '\n' ' ')" >&2
    continue
  fi
  log=$BUILD/fuzz-logs/$t.log
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  summary+=("$(printf '%-16s %5d.%d s  %9d inputs  %6s exec/s  %-10s  peak rss %4s MB  corpus %s' "$t" $((ms / 1000)) \
    $((ms % 1000 / 100)) "$runs" "$eps" "$cov" "$rss" "$(find "$BUILD/fuzz-corpus/$t" -type f | wc -l)")")
done
((${#failed[@]} == 0)) || { echo "fuzz: FAILED: ${failed[*]}" >&2; exit 1; }
echo
echo "fuzz: ${#targets[@]} targets, $what each, no crash, leak or undefined behaviour" \
  "($(($(date +%s) - total_start)) s wall, $JOBS at a time):"
printf '  %s\n' "${summary[@]}"
