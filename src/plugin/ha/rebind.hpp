// A slot moving to another device. A comm's slot is its device's: the slot's QP, the comm's own
// registrations (SlotKeys) and every buffer NCCL registered on the comm live on that device. The
// standby slot moves when the two ends agree on a standby pair other than the one the slot is on
// (a standby on a third port when the failed one stays down, a fall-back to the next candidate:
// reprotect.cpp). The move is prepared off the progress thread and installed in one step:
//
//   progress thread   begin_rebind(c, d): the move is announced (ControlPlane::rebind().dev); from now
//                     on regMr registers new buffers on d as well
//   worker            prepare_rebind(c, d, slot, gen, keys): the comm's own memory and every buffer
//                     registered so far registered on d (SlotKeys, RegHandle::next_mr)
//   progress thread   commit_rebind(c, slot, gen, keys), comm held: the slot's registrations, keys
//   (comm held)       and device become d's at once (under CommBase::reg_mutex); or abort_rebind(c):
//                     what was prepared is released
//
// Requests already posted keep the keys they were posted with (they are on the active slot).
// Whatever is posted again on a slot after a failover takes its keys afresh: the sender's replays
// from their RegHandle and the receiver's re-published clear-to-send, the receiver's re-published
// entries from their RegHandles (failover.cpp), flush reads from theirs (flush.cpp).
#pragma once

#include <cstdint>

#include "core/comm.hpp"
#include "core/reg_ops.hpp"

namespace nccl_ha::plugin {

// Progress thread: a move to `d` starts (one at a time: a move still pending is aborted). Returns
// its generation, which prepare and commit check.
std::uint64_t begin_rebind(CommBase& c, Device& d);
// Worker: registers the comm's own memory on `d` as slot `slot`'s into `keys` (the peer's keys are
// the caller's to fill in), and every buffer of the comm on `d`. Fails when the move was aborted
// or superseded meanwhile, or a registration fails.
Status prepare_rebind(CommBase& c, Device& d, int slot, std::uint64_t gen, SlotKeys& keys);
// Progress thread, comm held: whether the move `gen` can be committed now (every buffer has its
// registration on the new device). Lets a side refuse before it tells the peer it is ready.
Status rebind_ready(CommBase& c, std::uint64_t gen);
// Progress thread, comm held: the move `gen` takes effect: devs[slot], keys[slot] (swapped with
// `keys`, which then holds the old ones for the caller to drop) and every buffer's registration.
Status commit_rebind(CommBase& c, int slot, std::uint64_t gen, SlotKeys& keys);
// Progress thread: a pending move is given up; the registrations it prepared are released.
void abort_rebind(CommBase& c);

}  // namespace nccl_ha::plugin
