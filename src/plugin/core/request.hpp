// What NCCL's calls hand over and get back: a registration (regMr's handle), the keys a device
// slot of a comm needs, and a request (isend, irecv, iflush) from its post until test() reports it
// done.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/rdma_records.hpp"
#include "nccl_ha/net/verbs.hpp"
#include "runtime/device.hpp"
#include "runtime/flush_plan.hpp"
#include "runtime/mr_ops.hpp"

namespace nccl_ha::plugin {

// What regMr hands to NCCL: the buffer's registration on every device slot of the comm.
// Written under CommBase::reg_mutex (regMr, deregMr, a slot moving to another device: rebind.hpp);
// the data path reads mr[] / lkey / rkey while it holds the comm, which a move's installation
// also holds, so it never sees one half done.
struct RegHandle {
  MrHandle* mr[kSlots] = {};
  Device* dev[kSlots] = {};
  // A slot moving to another device: the buffer's registration there, prepared off the progress
  // thread and swapped into mr[slot] when the move is installed (rebind.cpp).
  MrHandle* next_mr = nullptr;
  Device* next_dev = nullptr;
  void* data = nullptr;  // what NCCL registered: registered again on a device the comm moves to
  std::size_t size = 0;
  bool gpu = false;  // registered as NCCL_PTR_CUDA: iflush reads it back (flush.cpp)
  // regMrDmaBuf: the handle's own duplicate of NCCL's dma-buf fd (NCCL closes its fd when the call
  // returns; a device the comm moves to registers from this one), closed at deregMr; and the
  // offset of `data` in the dma-buf. No fd: ordinary memory.
  UniqueFd dmabuf_fd;
  int dmabuf_fd_given = -1;  // NCCL's fd number, for messages only (closed by NCCL)
  std::uint64_t dmabuf_offset = 0;
  std::uint32_t lkey(int slot) const { return mr[slot] ? mr[slot]->mr->lkey : 0; }
  std::uint32_t rkey(int slot) const { return mr[slot] ? mr[slot]->mr->rkey : 0; }
};

// The comm's own memory registered on the device of one slot, and the peer's keys for its memory
// on the device at the other end of that slot's path: everything a slot's path needs besides its
// QP. Replaced whole when the slot moves to another device (rebind.hpp).
struct SlotKeys {
  net::MrPtr ctrl;        // our ControlBlock: the peer writes it
  net::MrPtr ctrl_out;    // source of our control writes
  net::MrPtr ring;        // send comm: its FIFO (the peer writes it); receive comm: its outbox (source of CTS writes)
  net::MrPtr flush_sink;  // receive comms with flush QPs: where the slot's READs land (flush.cpp)
  std::uint32_t peer_ctrl = 0;  // rkey of the peer's ControlBlock on its device of this slot
  std::uint32_t peer_fifo = 0;  // receive comm: rkey of the sender's FIFO on its device of this slot
};

enum class ReqType : std::uint8_t {
  free,   // slot unused: never used, or finished (test() reported it done, or its flush failed)
  send,   // an isend until test() reports it done (a failover replays it unless delivered)
  recv,   // an irecv group until test() reports it done (receive WRs and clear-to-send posted)
  flush,  // an iflush READ until test() reports it done; also RecvComm::flushed (done at once)
  fused   // the head of a fused device's request (datapath/fused.hpp): its parts are requests of the members
};

struct CommBase;

// What a request carries for the profiler (Request::prof; profiler.hpp).
struct RequestProfile {
  void* phandle[kMaxRecvs] = {};  // NCCL's handles of the request's buffers (send: [0]); null without profiling
  void* event[kMaxRecvs] = {};    // events open under them
  bool open = false;      // any event open
};

struct Request {
  ReqType type = ReqType::free;
  std::uint8_t nreqs = 0;      // recv: buffers in the group
  std::uint8_t completed = 0;  // completions seen so far
  std::uint8_t done_mask = 0;  // recv: which buffers completed; send: bit 0 once delivered
  std::uint8_t index = 0;      // send: buffer index inside the receiver's group
  bool buffers_gone = false;   // a buffer was deregistered while in flight (NCCL's abort path): never posted again
  std::uint8_t parts_done = 0; // send: completions of its parts on the path it was posted on (post_data)
  std::uint64_t seq = 0;
  int sizes[kMaxRecvs] = {};   // what test() reports (recv: the bytes of the parts landed so far)
  // recv, on a path whose messages are split (Path::split): the parts of each buffer landed, a bit
  // per QP; a buffer is done when every QP's part has landed.
  std::uint8_t parts[kMaxRecvs] = {};
  // send: what replaying it takes (failover.cpp)
  std::uint64_t laddr = 0;
  std::uint64_t raddr = 0;
  std::uint32_t lkey[kSlots] = {};
  std::uint32_t rkey[kSlots] = {};
  // The registration of each buffer (send: [0]; receive: [0, nreqs); flush: [0]): keys are taken
  // afresh from it when the request is posted again after its slot moved (rebind.hpp).
  const RegHandle* mh[kMaxRecvs] = {};
  CommBase* comm = nullptr;
  // flush: the device slots to read through and how far each is (flush_plan.hpp), and, while one
  // waits for its loopback QP to be rebuilt, when the flush gives up (0: not waiting).
  FlushState flush;
  std::uint64_t wait_until_ns = 0;
  RequestProfile prof;  // NCCL's profiler handles and the events open under them (profiler.hpp)
};

}  // namespace nccl_ha::plugin
