// HA's part of a comm's life, as setup and the close path hand it over (face.hpp): when the comm
// is built (comm_built), when its start differs from the plan (started_on_standby,
// standby_declined), and when it ends (comm_closing; comm_discarded for one NCCL never got).
// Everything HA keeps per comm starts and ends here.
#include "core/reaper.hpp"
#include "ha/control_ops.hpp"
#include "ha/profiler.hpp"
#include "ha/rescue.hpp"

namespace nccl_ha::plugin {

void comm_built(CommBase& c) {
  init_standby(c, c.devs[1] != nullptr);
  account_ports(c);
}

void comm_closing(CommBase& c) {
  profile_end_all(c, /*fatal=*/false);  // NCCL closes with requests in flight only when it aborts
  account_ports(c);                     // closing: its ports count it no more
  write_stats(c, "close");
  unregister_comm(c);
  withdraw_rescue(c);
  if (c.kind == CommKind::recv) close_flush(static_cast<RecvComm&>(c));  // held: the control plane swaps them
  retire_job(c);
}

void comm_discarded(CommBase& c) {
  withdraw_rescue(c);
  account_ports(c);  // closing: its ports count it no more
  if (c.kind == CommKind::recv) close_flush(static_cast<RecvComm&>(c));
}

void started_on_standby(CommBase& c, const std::string& why) {
  retire(std::move(c.paths[0]));  // its QP to ERROR at once: not connected, or not to be used
  set_active_slot(c, 1);
  set_standby(c, StandbyHealth::down, why + ": started on " + c.path().dev->port.id() + ", re-protection follows");
}

void standby_declined(CommBase& c) {
  if (c.kind == CommKind::recv) drop_flush_path(static_cast<RecvComm&>(c), 1);  // its flush QP on the standby's device goes too
  retire(std::move(c.paths[1]));
  c.keys[1] = SlotKeys{};
  c.devs[1] = nullptr;
  init_standby(c, false);
  account_ports(c);
}

}  // namespace nccl_ha::plugin
