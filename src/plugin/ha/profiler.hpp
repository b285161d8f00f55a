// NCCL's profiler as a net plugin may feed it (net API v10+): HA's switches and restored
// protection as events under the profiler handles NCCL gave with isend/irecv (abi/nccl_ha_profiler.h
// says what a profiler plugin reads). NCCL's callback dereferences the parent handle at a start,
// which is valid only while that request is in flight, so events open only on requests NCCL is
// still waiting for, from code that holds the comm (CommBase::owned), and they end when test()
// reports the request done, when the comm fails, or when it is closed.
//
// Writers: the data path stores each request's handles (isend/irecv) and ends its events in
// test() (profile_done, one branch when none is open); everything else is written here, on the
// progress thread under the comm, or by close. Nothing is called without a callback from init.
#pragma once

#include <atomic>
#include <cstdint>

#include "nccl_ha_profiler.h"
#include "nccl_net_abi.h"
#include "ha/face.hpp"

namespace nccl_ha::plugin {

struct CommBase;
struct Request;  // request.hpp: its RequestProfile

// The callback init() was given (v10+; null before v10 or when NCCL gave none). Process-wide:
// NCCL passes the same function to every init.
void install_profiler(ncclProfilerCallback_t cb) noexcept;
bool profiling() noexcept;

// A note for the next request posted on a comm (CommBase::prof_note): 0, or kNoteSet | type << 16
// | (device + 1). Written by HA, taken (exchanged) by isend / irecv.
constexpr std::uint64_t kNoteSet = 1ull << 40;

// HA, holding the comm, as a switch of `type` begins: an event under every buffer in flight
// (an open one is updated instead).
void profile_switch(CommBase& c, std::uint8_t type, int from_dev, int to_dev, std::uint32_t epoch);
// HA: the comm's standby on `dev` is up again; said under the next request posted.
void profile_protected(CommBase& c, int dev) noexcept;
// The comm failed (HA, holding it) or is closed: every open event is ended (after an update
// saying ncclHaProfileFatal when `fatal`).
void profile_end_all(CommBase& c, bool fatal);

// The data path's two calls (profile_posted, profile_done): face.hpp.

}  // namespace nccl_ha::plugin
