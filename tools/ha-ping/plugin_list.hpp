// ha-ping --list: the nccl-ha plugin's view of this host (devices after filtering, standby ports,
// budgets, settings), without traffic.
#pragma once

#include "options.hpp"

namespace ha_ping {

// Prints the list (text or --json) on stdout. 0: the plugin loaded and has a device; 1 otherwise.
int run_list(const Options& o);

}  // namespace ha_ping
