// Which loopback QPs a flush reads through (flush.cpp): the pure part, unit-tested on its own.
//
// An RDMA READ orders only the writes of the NIC that carries it. So a flush reads through the
// loopback QP of every device slot that delivered data since the previous flush was posted, on
// the device that wrote it. The flush's request keeps, per slot: still to read (`want`), READ
// posted and outstanding (`out`), read (`done`), and the device whose writes the read orders
// (Device::index; kAnyDevice: a read through whatever device the active slot is on).
#pragma once

#include <cstdint>

namespace nccl_ha::plugin {

inline constexpr int kFlushSlots = 2;             // = kSlots (comm.hpp static_asserts it)
inline constexpr std::int16_t kAnyDevice = -1;    // FlushState::dev: no particular device

struct FlushState {
  std::uint8_t want = 0;  // slots whose READ is still to post
  std::uint8_t out = 0;   // slots whose READ is posted and not yet reaped
  std::uint8_t done = 0;  // slots read
  std::int16_t dev[kFlushSlots] = {kAnyDevice, kAnyDevice};
  bool redirected = false;  // a writer's slot was read through the active one instead (said once)
};

// One slot as a flush finds it now.
struct FlushSlotView {
  int dev = -1;            // Device::index of the slot's device (-1: the slot has none)
  bool port_up = false;    // its port is up (a loopback READ needs it)
  bool qp_usable = false;  // its loopback QP is installed on that device and has not failed
};

struct FlushPlan {
  std::uint8_t post = 0;  // wanted slots whose READ can be posted now
  std::uint8_t wait = 0;  // wanted slots waiting for their loopback QP (being rebuilt)
  int lost = -1;          // a slot whose writer no READ can reach any more, redirected now
};

// Slot `s`'s bit in a flush's masks (FlushState::want, out, done; RecvComm::flush_wrote).
constexpr std::uint8_t slot_bit(int s) noexcept { return static_cast<std::uint8_t>(1u << s); }

// Moves what no READ can order any more to the active slot and says what to post and what waits.
// A slot whose device is no longer the one that wrote (the slot moved: re-protection's rebind),
// or whose port is down, is read through the active slot instead (unless the active slot is read
// already): its READ, wanted or outstanding, is given up (a late completion is stale). A read
// meant for the active slot (kAnyDevice) follows it across a failover. The active slot down
// itself: its read waits (for the failover that moves the comm). Returns the slot given up, if any.
inline FlushPlan plan_flush(FlushState& f, const FlushSlotView (&v)[kFlushSlots], int active) {
  FlushPlan plan;
  const auto clear = [](std::uint8_t& m, std::uint8_t b) { m = static_cast<std::uint8_t>(m & ~b); };
  for (int s = 0; s < kFlushSlots; ++s) {
    const bool wanted = f.want & slot_bit(s), reading = f.out & slot_bit(s);
    if (!wanted && !reading) continue;
    const bool any = f.dev[s] == kAnyDevice;
    const bool lost = any ? s != active && (wanted || !v[s].port_up) : v[s].dev != f.dev[s] || !v[s].port_up;
    if (!lost) continue;
    clear(f.want, slot_bit(s));
    clear(f.out, slot_bit(s));
    if (!any) plan.lost = s;
    if (!((f.want | f.out | f.done) & slot_bit(active))) {
      f.want = static_cast<std::uint8_t>(f.want | slot_bit(active));
      f.dev[active] = kAnyDevice;
    }
  }
  for (int s = 0; s < kFlushSlots; ++s) {
    if (!(f.want & slot_bit(s))) continue;
    if (v[s].qp_usable && v[s].port_up)
      plan.post = static_cast<std::uint8_t>(plan.post | slot_bit(s));
    else
      plan.wait = static_cast<std::uint8_t>(plan.wait | slot_bit(s));
  }
  return plan;
}

}  // namespace nccl_ha::plugin
