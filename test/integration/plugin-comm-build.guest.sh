#!/usr/bin/env bash
# Guest side of plugin-comm-build (issue #22): the unit test test_comm_build on real verbs (rxe0 and
# rxe1). It builds comms and paths without the plugin's init or its process-wide state (CommEnv);
# natively it has no RDMA port and skips every case, so only here does it really run. Only a runs
# it (it is local work, no peer); b has nothing to do. Records comm-build.rc, comm-build.log (the
# test log), comm-build.report (Boost.Test's detailed report) and comm-build.stderr (the plugin's
# log lines) in $VM_OUT; checks/plugin_comm_build.py judges them. The script itself exits 0.
set -euo pipefail
source "$(dirname "$0")/plugin-lib.sh"  # REPO BUILD, test/vm/lib.sh
TEST_BIN=$BUILD/test/unit/plugin/test_comm_build
[[ $VM_ROLE == a ]] || exit 0
[[ -x $TEST_BIN ]] || vm_die "no $TEST_BIN: build the target test_comm_build"
vm_log "RDMA devices: $(rdma link show 2>/dev/null | tr '\n' ';')"
rc=0
"$TEST_BIN" --log_level=test_suite --report_level=detailed --color_output=no --report_sink="$VM_OUT/comm-build.report" \
  >"$VM_OUT/comm-build.log" 2>"$VM_OUT/comm-build.stderr" || rc=$?
echo "$rc" >"$VM_OUT/comm-build.rc"
vm_log "test_comm_build: exit $rc"
cat "$VM_OUT/comm-build.report"
