// ha-net-driver --fault NAME: error-path scenarios. Instead of the ring and the data phases,
// both ranks run one scenario that makes a plugin call fail on purpose, record what the plugin
// returned (result, time, WARN lines), and then close everything and finalize as usual, so the
// resource checks (fds, MRs, QPs, threads) still apply. See README.md for the scenarios.
//
// Exit status: 0 when every step behaved as expected (each "error" step returned an error, each
// "success" step succeeded); 1 when a step did not (the check names it); 3 for an unexpected
// plugin error outside the expected ones; 4 when a step did not end within --timeout.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "mgmt.hpp"
#include "options.hpp"
#include "plugin.hpp"
#include "report.hpp"

namespace hnd {

struct FaultCtx;  // what a scenario works with (fault.cpp)

// One --fault scenario. The table of them (fault_scenarios()) is the one list: the command line
// checks names and options against it (check_fault_options), --help lists it, run_fault
// dispatches through it.
struct FaultScenario {
  const char* name;
  const char* help;  // one line for --help
  void (*run)(FaultCtx&);
  bool needs_comms = false;  // opens --comms N pairs (N >= 1)
  bool wait_file = false;    // takes --wait-file
  std::uint64_t min_messages = 0;  // needs --messages >= this (0: none) ...
  const char* messages_why = "";   // ... because
  // Needs an out-of-range --dev: runs right after getProperties, before the --dev checks.
  bool bad_dev = false;
  // Leaves QPs that may be destroyed in the background after finalize: the resource checks after
  // finalize are informational.
  bool background = false;
};

std::span<const FaultScenario> fault_scenarios();
const FaultScenario* find_fault(const std::string& name);  // null: no such scenario
bool is_fault_name(const std::string& name);
const char* fault_names();  // "bad-handle, bad-token, ..." for messages
// The --help lines of --fault: the option, then one line per scenario.
std::string fault_usage();
// --fault NAME names a scenario, and the options it needs are there (--comms, --wait-file,
// --messages); after parse_options (main.cpp). Throws DriverError(usage).
void check_fault_options(const Options& o);

// Runs o.fault after init/devices/getProperties; the caller finalizes afterwards.
void run_fault(const Options& o, Plugin& net, Mgmt& mgmt, Report& rep);

}  // namespace hnd
