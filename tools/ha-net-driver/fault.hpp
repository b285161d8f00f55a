// ha-net-driver --fault NAME: error-path scenarios. Instead of the ring and the data phases,
// both ranks run one scenario that makes a plugin call fail on purpose, record what the plugin
// returned (result, time, WARN lines), and then close everything and finalize as usual, so the
// resource checks (fds, MRs, QPs, threads) still apply. See README.md for the scenarios.
//
// Exit status: 0 when every step behaved as expected (each "error" step returned an error, each
// "success" step succeeded); 1 when a step did not (the check names it); 3 for an unexpected
// plugin error outside the expected ones; 4 when a step did not end within --timeout.
#pragma once

#include <string>

#include "mgmt.hpp"
#include "options.hpp"
#include "plugin.hpp"
#include "report.hpp"

namespace hnd {

bool is_fault_name(const std::string& name);
const char* fault_names();  // "bad-handle, bad-token, ..." for messages

// Runs o.fault after init/devices/getProperties; the caller finalizes afterwards.
void run_fault(const Options& o, Plugin& net, Mgmt& mgmt, Report& rep);

}  // namespace hnd
