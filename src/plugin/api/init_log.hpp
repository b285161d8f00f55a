// What init tells the operator (init_log.cpp).
#pragma once

#include <string>

namespace nccl_ha::plugin {

struct State;

// The progress thread's name (at most 15 characters), as `top -H` and the INIT line show it.
inline constexpr const char* kProgressThreadName = "ncclHaProgress";

// The INIT|NET line: version, devices with their rail, island and standby port, the island
// setting, handshake interface, budget and the HA settings that matter, in one line an operator
// can grep for.
std::string init_summary(const State& s);
// One INFO line per device: the plugin's model of it, then what NCCL is told (getProperties).
void log_devices(const State& s);

}  // namespace nccl_ha::plugin
