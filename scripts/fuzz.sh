#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz) with clang, AddressSanitizer and UndefinedBehaviorSanitizer,
# and runs every target for $FUZZ_RUNS inputs (default 1,000,000) from its checked-in seed corpus
# (test/fuzz/corpus/<target>/) and, when there is one, its dictionary (test/fuzz/dict/<target>.dict).
#   scripts/fuzz.sh                    every target
#   scripts/fuzz.sh conn_msg handle    only these
# Build dir: $NCCL_HA_FUZZ_DIR (default build-fuzz/); compiler: $NCCL_HA_FUZZ_CXX (clang++-14);
# targets run $FUZZ_JOBS at a time (default: the number of CPUs).
# New inputs go to <build dir>/fuzz-corpus/<target> (the checked-in seeds are only read), a
# failing input to <build dir>/fuzz-artifacts/<target>/ (reproduce: fuzz_<target> FILE), the
# log to <build dir>/fuzz-logs/<target>.log.
# Fails loudly: any crash, sanitizer report, leak, timeout, or a target that did not run all its
# inputs makes the script print that target's log and exit non-zero.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${NCCL_HA_FUZZ_DIR:-$REPO/build-fuzz}
RUNS=${FUZZ_RUNS:-1000000}
JOBS=${FUZZ_JOBS:-$(nproc)}
CXX_FUZZ=${NCCL_HA_FUZZ_CXX:-clang++-14}
# Longest input per target (libFuzzer's -max_len); a handshake stream needs no more than 1 KiB.
declare -A MAX_LEN=([handshake_read]=1024)

cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DNCCL_HA_FUZZ=ON \
  -DNCCL_HA_BUILD_TESTS=OFF -DNCCL_HA_BUILD_TOOLS=OFF -DNCCL_HA_WERROR=ON >/dev/null
cmake --build "$BUILD" --target fuzzers

if (($#)); then
  targets=("$@")
else
  mapfile -t targets < <(find "$REPO/test/fuzz/corpus" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
fi
for t in "${targets[@]}"; do
  [[ -x $BUILD/test/fuzz/fuzz_$t && -d $REPO/test/fuzz/corpus/$t ]] ||
    { echo "fuzz: no target '$t' (no fuzz_$t or no corpus/$t)" >&2; exit 1; }
done

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
mkdir -p "$BUILD/fuzz-logs"

# One target: its log, then a result line "<target> <rc> <ms>" in fuzz-logs/<target>.result.
run_one() {
  local t=$1 work=$BUILD/fuzz-corpus/$1 artifacts=$BUILD/fuzz-artifacts/$1 log=$BUILD/fuzz-logs/$1.log
  mkdir -p "$work" "$artifacts"
  rm -f "$artifacts"/*
  local start rc=0 dict=()
  [[ -f $REPO/test/fuzz/dict/$t.dict ]] && dict=(-dict="$REPO/test/fuzz/dict/$t.dict")
  start=$(date +%s%N)
  "$BUILD/test/fuzz/fuzz_$t" -runs="$RUNS" -max_len="${MAX_LEN[$t]:-4096}" -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" ${dict[@]+"${dict[@]}"} "$work" "$REPO/test/fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  ((rc != 0)) || grep -q "^Done $RUNS runs" "$log" || rc=99  # ended early without saying why
  echo "$t $rc $((($(date +%s%N) - start) / 1000000))" >"$BUILD/fuzz-logs/$t.result"
}

total_start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  if ((running >= JOBS)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz: $t: $RUNS inputs ..."
  rm -f "$BUILD/fuzz-logs/$t.result"
  run_one "$t" &
  running=$((running + 1))
done
wait || true

failed=()
summary=()
for t in "${targets[@]}"; do
  read -r _ rc ms <"$BUILD/fuzz-logs/$t.result" || { rc=98; ms=0; }
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
  summary+=("$(printf '%-16s %5d.%d s  %6s exec/s  %-10s  peak rss %4s MB  corpus %s' "$t" $((ms / 1000)) \
    $((ms % 1000 / 100)) "$eps" "$cov" "$rss" "$(find "$BUILD/fuzz-corpus/$t" -type f | wc -l)")")
done
((${#failed[@]} == 0)) || { echo "fuzz: FAILED: ${failed[*]}" >&2; exit 1; }
echo
echo "fuzz: ${#targets[@]} targets, $RUNS inputs each, no crash, leak or undefined behaviour" \
  "($(($(date +%s) - total_start)) s wall, $JOBS at a time):"
printf '  %s\n' "${summary[@]}"
