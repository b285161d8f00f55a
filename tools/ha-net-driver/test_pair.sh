# Helpers of the scripts that run two ha-net-driver ranks on 127.0.0.1 (test_driver_fake.sh,
# ../plugin-loader/test_loader_lazy.sh); sourced. The caller sets DRIVER and WORK (an empty
# directory); the helpers count the failed checks in $failures.
failures=0
have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

# run_pair NAME EXPECT0 EXPECT1 PLUGIN [driver args...]; RANK0_ENV / RANK1_ENV: extra env,
# RANK0_ARGS / RANK1_ARGS: extra per-rank driver arguments (word-split).
run_pair() {
  local name=$1 want0=$2 want1=$3 plugin=$4
  shift 4
  local dir=$WORK/$name
  mkdir -p "$dir"
  env ${RANK0_ENV:-} "$DRIVER" --plugin "$plugin" --rank 0 --listen-port 0 --port-file "$dir/port" \
    --json "$dir/rank0.json" ${RANK0_ARGS:-} "$@" 2>"$dir/rank0.log" &
  local pid0=$! i
  for i in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
  if [ ! -s "$dir/port" ]; then
    echo "FAIL $name: rank 0 never wrote its port"; kill "$pid0" 2>/dev/null; wait "$pid0"
    failures=$((failures + 1)); return
  fi
  env ${RANK1_ENV:-} "$DRIVER" --plugin "$plugin" --rank 1 --peer "127.0.0.1:$(cat "$dir/port")" \
    --json "$dir/rank1.json" ${RANK1_ARGS:-} "$@" 2>"$dir/rank1.log"
  local rc1=$?
  wait "$pid0"
  local rc0=$?
  # An expected code may be a list: "3|5".
  if [[ "|$want0|" != *"|$rc0|"* || "|$want1|" != *"|$rc1|"* ]]; then
    echo "FAIL $name: exit codes rank0=$rc0 rank1=$rc1, expected $want0/$want1 (logs in $dir)"
    tail -n 15 "$dir/rank0.log" "$dir/rank1.log"
    failures=$((failures + 1)); return
  fi
  echo "ok   $name (exit $rc0/$rc1)"
}

# check_json NAME PYTHON-EXPR...: each expression is evaluated with r = the report of each rank.
check_json() {
  local name=$1
  shift
  [ "$have_python" = 1 ] || return 0
  local rank
  for rank in 0 1; do
    python3 - "$WORK/$name/rank$rank.json" "$@" <<'PY' || { echo "FAIL $name: rank $rank report"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
bad = [e for e in sys.argv[2:] if not eval(e, {"r": r})]
for e in bad:
    print("  report check failed:", e)
sys.exit(1 if bad else 0)
PY
  done
}

# check_pair NAME PYTHON-EXPR...: each expression is evaluated with a, b = the reports of rank 0, 1.
check_pair() {
  local name=$1
  shift
  [ "$have_python" = 1 ] || return 0
  python3 - "$WORK/$name/rank0.json" "$WORK/$name/rank1.json" "$@" <<'PY' || { echo "FAIL $name: cross-rank checks"; failures=$((failures + 1)); }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
bad = [e for e in sys.argv[3:] if not eval(e, {"a": a, "b": b})]
for e in bad:
    print("  cross-rank check failed:", e)
sys.exit(1 if bad else 0)
PY
}
