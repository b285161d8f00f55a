// A buffer's registrations on the comm's devices (RegHandle, request.hpp): defined by the data
// path (datapath/reg.cpp: regMr, deregMr), declared here because a slot moving to another device
// registers the comm's buffers there too (ha/rebind.cpp).
#pragma once

#include "core/comm.hpp"

namespace nccl_ha::plugin {

// Access flags of every buffer NCCL registers (regMr, regMrDmaBuf) and of its registration on a new
// device: these, plus IBV_ACCESS_RELAXED_ORDERING where the device's rule says so (mr_ops.hpp).
constexpr int kBufferAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
inline int buffer_access(const Device& d) {
  return kBufferAccess | (d.relaxed_ordering ? IBV_ACCESS_RELAXED_ORDERING : 0);
}
// The buffer of `h` registered on `d` through its cache (a dma-buf from the handle's own fd), with
// the device's buffer_access. Every registration of an NCCL buffer goes through here.
Expected<MrHandle*> register_on(Device& d, const RegHandle& h);
// deregMr, a failed regMr and closing: releases the registrations of `h` (under reg_mutex), a
// move's prepared one too.
void release_registrations(RegHandle& h);

}  // namespace nccl_ha::plugin
