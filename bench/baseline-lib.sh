# Shared by the before/after benchmarks (control-plane-bench.sh, reprotect-bench.sh), sourced on
# the host:
#   bench_build_baseline REPO BUILD REV TAG
#       "after" = this working tree, built in BUILD (targets nccl-net-ha, ha-net-driver);
#       "before" = the plugin at REV, from a detached worktree BUILD/baseline-src built in
#       BUILD/baseline-build (under the build dir, not /tmp: the guests do not see the host's
#       /tmp), same build type and sanitizer setting; both reused (moved to REV if needed) by the
#       next run. NCCL_HA_BENCH_NO_BUILD=1 builds nothing (both must be there). TAG names the
#       bench in error messages. Sets REV_HASH, BASE_SRC, BEFORE_SO, AFTER_SO, DRIVER.
#   bench_write_meta META REPO BUILD REV CMD
#       META (JSON): both revisions (with the dirty flag and changed files), both plugins and
#       their sha256, the driver, build type, host cores and load, the command, and every
#       NCCL_HA_BENCH_* / HA_NCCL_* / NCCL_HA_BASELINE_REV / NCCL_HA_BUILD_DIR variable.
#   bench_meta_end META        adds the host load at the end.
#   bench_build_tree REPO BUILD  this tree's plugin and driver in BUILD (also for benches without a baseline).
bench_die() { echo "$BENCH_TAG: $*" >&2; exit 1; }

# This tree's plugin and driver in BUILD (the setup's packages first), at nice 10.
bench_build_tree() { # REPO BUILD
  bash "$1/scripts/setup.sh"
  cmake -S "$1" -B "$2" -G Ninja >/dev/null
  nice -n 10 cmake --build "$2" -j2 --target nccl-net-ha ha-net-driver
}

bench_build_baseline() { # REPO BUILD REV TAG
  local repo=$1 build=$2 rev=$3 base_build bt san
  BENCH_TAG=$4
  [[ $build == /tmp/* ]] && bench_die "NCCL_HA_BUILD_DIR=$build is under /tmp, which the guests cannot see"
  REV_HASH=$(git -C "$repo" rev-parse --verify "$rev^{commit}") || bench_die "baseline revision '$rev' not found"
  BASE_SRC=$build/baseline-src
  base_build=$build/baseline-build
  if [[ ${NCCL_HA_BENCH_NO_BUILD:-0} != 1 ]]; then
    bench_build_tree "$repo" "$build"
    if [[ -e $BASE_SRC/.git ]]; then
      if [[ $(git -C "$BASE_SRC" rev-parse HEAD) != "$REV_HASH" ]]; then
        [[ -z $(git -C "$BASE_SRC" status --porcelain --untracked-files=no) ]] ||
          bench_die "$BASE_SRC has local changes; remove it (git worktree remove --force $BASE_SRC)"
        git -C "$BASE_SRC" checkout -q --detach "$REV_HASH"
      fi
    else
      [[ ! -e $BASE_SRC ]] || bench_die "$BASE_SRC exists but is not a git worktree; remove it"
      git -C "$repo" worktree prune
      git -C "$repo" worktree add -q --detach "$BASE_SRC" "$REV_HASH"
    fi
    bt=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
    san=$(sed -n 's/^NCCL_HA_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt")
    cmake -S "$BASE_SRC" -B "$base_build" -G Ninja -DCMAKE_BUILD_TYPE="${bt:-RelWithDebInfo}" \
      -DNCCL_HA_SANITIZE="${san:-OFF}" -DNCCL_HA_BUILD_TESTS=OFF -DNCCL_HA_BUILD_TOOLS=OFF >/dev/null
    nice -n 10 cmake --build "$base_build" -j2 --target nccl-net-ha
  fi
  [[ -e $BASE_SRC/.git && $(git -C "$BASE_SRC" rev-parse HEAD) == "$REV_HASH" ]] ||
    bench_die "$BASE_SRC is not at $rev ($REV_HASH); run without NCCL_HA_BENCH_NO_BUILD=1"
  AFTER_SO=$build/src/plugin/libnccl-net-ha.so
  BEFORE_SO=$base_build/src/plugin/libnccl-net-ha.so
  DRIVER=$build/tools/ha-net-driver/ha-net-driver
  local f
  for f in "$AFTER_SO" "$BEFORE_SO" "$DRIVER"; do [[ -f $f ]] || bench_die "missing $f"; done
}

bench_write_meta() { # META REPO BUILD REV CMD
  local meta=$1 repo=$2 build=$3 rev=$4 cmd=$5 dirty=false
  [[ -z $(git -C "$repo" status --porcelain --untracked-files=no) ]] || dirty=true
  M_BASE_DESC=$(git -C "$repo" describe --always "$REV_HASH") M_BEFORE_SHA=$(sha256sum "$BEFORE_SO" | cut -d' ' -f1) \
    M_AFTER_SHA=$(sha256sum "$AFTER_SO" | cut -d' ' -f1) M_BEFORE_SO=$BEFORE_SO M_AFTER_SO=$AFTER_SO \
    M_BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt") \
    M_REV=$rev M_REV_HASH=$REV_HASH M_CUR_HASH=$(git -C "$repo" rev-parse HEAD) \
    M_CUR_DESC=$(git -C "$repo" describe --always --dirty) M_DIRTY=$dirty M_DRIVER=$DRIVER \
    M_LOAD=$(uptime) M_CMD=$cmd M_DATE=$(date -u +%Y-%m-%d) \
    M_CHANGED=$(git -C "$repo" status --porcelain --untracked-files=no | cut -c4- | paste -sd' ') python3 - "$meta" <<'EOF'
import json, os, sys
e = os.environ
json.dump({
    "date": e["M_DATE"],
    "baseline_rev": e["M_REV"], "baseline_hash": e["M_REV_HASH"], "baseline_describe": e["M_BASE_DESC"],
    "current_hash": e["M_CUR_HASH"], "current_describe": e["M_CUR_DESC"], "current_dirty": e["M_DIRTY"] == "true",
    "current_changed_files": e["M_CHANGED"].split(),
    "before_plugin": e["M_BEFORE_SO"], "before_sha256": e["M_BEFORE_SHA"],
    "after_plugin": e["M_AFTER_SO"], "after_sha256": e["M_AFTER_SHA"],
    "driver": e["M_DRIVER"], "build_type": e["M_BUILD_TYPE"], "host_nproc": os.cpu_count(),
    "host_load_at_start": e["M_LOAD"].strip(), "command": e["M_CMD"],
    "env": {k: v for k, v in sorted(e.items())
            if k.startswith(("NCCL_HA_BENCH_", "HA_NCCL_", "NCCL_HA_BASELINE_REV", "NCCL_HA_BUILD_DIR"))},
}, open(sys.argv[1], "w"), indent=2)
EOF
}

bench_meta_end() { # META
  python3 - "$1" "$(uptime)" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["host_load_at_end"] = sys.argv[2].strip()
json.dump(m, open(sys.argv[1], "w"), indent=2)
EOF
}
