#!/usr/bin/env bash
# security-hostile on the four-rail bed (ctest vm.security-hostile-rails4: run-pair.sh --rails 4; the
# management NIC is eth4 there, the plugin sees four devices): the same test, the same check.
exec "$(dirname "$0")/security-hostile.guest.sh" "$@"
