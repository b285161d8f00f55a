#!/usr/bin/env python3
"""Whether a libnccl-net-ha.so has the test hooks (HA_NCCL_TEST_*, src/plugin/runtime/test_hooks.hpp).

--expect absent (scripts/package-check.sh on the packaged plugin; ctest unit.plugin_test_hooks
in a build without NCCL_HA_TEST_HOOKS): fails when any HA_NCCL_TEST_* name is in the file - a
variable the plugin would read, or a line it would log. The one exception is
HA_NCCL_TEST_MAX_POLL: the deprecated name of the production setting HA_NCCL_MAX_POLL, still read
(with a WARN), not a test hook.
--expect present (ctest in a build with NCCL_HA_TEST_HOOKS=ON): fails when the hooks' names are
missing, i.e. when this check could not see them.

usage: check_test_hooks.py PLUGIN.so --expect absent|present
"""
import argparse
import re
import sys

ALLOWED = {b"HA_NCCL_TEST_MAX_POLL"}
# One name per hook: each must be there in a build with hooks.
HOOKS = [b"HA_NCCL_TEST_ACK_DELAY_MS", b"HA_NCCL_TEST_FAILBACK_STALL_MS", b"HA_NCCL_TEST_FAILBACK_STALL_AT",
         b"HA_NCCL_TEST_STANDBY_DELAY_MS", b"HA_NCCL_TEST_REPROTECT_DELAY_MS", b"HA_NCCL_TEST_FLUSH_QP_ERROR_MS",
         b"HA_NCCL_TEST_REAPER_DELAY_MS"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plugin")
    ap.add_argument("--expect", choices=("absent", "present"), required=True)
    args = ap.parse_args()
    data = open(args.plugin, "rb").read()
    found = sorted({m for m in re.findall(rb"HA_NCCL_TEST_[A-Z0-9_]*", data)} - ALLOWED)
    names = ", ".join(n.decode() for n in found)
    if args.expect == "absent":
        if found:
            print(f"{args.plugin}: FAIL: test hooks compiled in: {names}", file=sys.stderr)
            return 1
        print(f"{args.plugin}: no test hooks (no HA_NCCL_TEST_* name but the deprecated HA_NCCL_TEST_MAX_POLL)")
        return 0
    missing = [h.decode() for h in HOOKS if h not in found]
    if missing:
        print(f"{args.plugin}: FAIL: built with test hooks, but these names are not in it: {', '.join(missing)}",
              file=sys.stderr)
        return 1
    print(f"{args.plugin}: test hooks present: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
