#include "ha/rebind.hpp"

#include <algorithm>
#include <mutex>

#include "core/state.hpp"

namespace nccl_ha::plugin {

// The writer of a comm's move of a slot (ControlPlane): defined here only.
struct RebindWriter {
  static RebindState& of(CommBase& c) noexcept { return c.cp.rebind_; }
};
namespace {
RebindState& rebind_of(CommBase& c) noexcept { return RebindWriter::of(c); }
}  // namespace
namespace {

// reg_mutex held: drops the registrations a move prepared.
void release_next(CommBase& c) {
  for (RegHandle* h : c.regs) {
    if (h->next_mr) h->next_dev->mrs->release(h->next_mr);
    h->next_mr = nullptr;
    h->next_dev = nullptr;
  }
  rebind_of(c).dev = nullptr;
  ++rebind_of(c).gen;
}

// reg_mutex held.
Status check_ready(const CommBase& c, std::uint64_t gen) {
  if (c.cp.rebind().gen != gen || !c.cp.rebind().dev) return make_error(Errc::closed, "the move of the slot was given up");
  for (const RegHandle* h : c.regs)
    if (h->next_dev != c.cp.rebind().dev)
      return make_error(Errc::verbs, "a buffer of the comm could not be registered on " + c.cp.rebind().dev->port.id());
  return {};
}

}  // namespace

std::uint64_t begin_rebind(CommBase& c, Device& d) {
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  if (rebind_of(c).dev) release_next(c);
  rebind_of(c).dev = &d;
  return ++rebind_of(c).gen;
}

Status prepare_rebind(CommBase& c, Device& d, int slot, std::uint64_t gen, SlotKeys& keys) {
  if (auto s = register_slot_keys(c, d, slot, keys); !s) return s;
  std::lock_guard<std::mutex> lock(c.reg_mutex);  // regMr waits meanwhile (it is not on the data path)
  if (rebind_of(c).gen != gen || rebind_of(c).dev != &d) return make_error(Errc::closed, "the move of the slot was given up");
  for (RegHandle* h : c.regs) {
    if (h->next_dev == &d) continue;  // regMr registered it there already
    auto mr = register_on(d, *h);
    if (!mr) return std::move(mr).error();
    h->next_mr = *mr;
    h->next_dev = &d;
  }
  return {};
}

Status rebind_ready(CommBase& c, std::uint64_t gen) {
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  return check_ready(c, gen);
}

Status commit_rebind(CommBase& c, int slot, std::uint64_t gen, SlotKeys& keys) {
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  if (auto s = check_ready(c, gen); !s) return s;
  Device* d = rebind_of(c).dev;
  for (RegHandle* h : c.regs) {
    if (h->mr[slot]) h->dev[slot]->mrs->release(h->mr[slot]);
    h->mr[slot] = h->next_mr;
    h->dev[slot] = d;
    h->next_mr = nullptr;
    h->next_dev = nullptr;
  }
  c.devs[slot] = d;
  rebind_of(c).dev = nullptr;
  ++rebind_of(c).gen;
  std::swap(c.keys[slot], keys);
  return {};
}

void abort_rebind(CommBase& c) {
  std::lock_guard<std::mutex> lock(c.reg_mutex);
  if (rebind_of(c).dev) release_next(c);
}

}  // namespace nccl_ha::plugin
