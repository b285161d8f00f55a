#!/usr/bin/env bash
# The bed's own rails test (test/vm/smoke-rails.sh) as a VM integration test; CMakeLists.txt
# boots it with --rails 4 --islands 0-1,2-3 --rail-order-b 2,3,0,1: every rail reaches the
# same rail of the peer whatever the device numbering, cross-rail RoCE works inside an island
# and fails across islands, fault.sh acts per rail. Checked by checks/bed_rails.py.
exec "$(dirname "$0")/../vm/smoke-rails.sh" "$@"
