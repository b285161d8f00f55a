// Operations on a comm's paths that the data path and the control plane share: taking the comm
// (Hold, HoldWait), posting (path_ops.cpp), the clear-to-send entries, reaping completions,
// whether posting is allowed now, handing a fault to the control plane. None of them waits for
// another thread, none allocates. The control plane's own calls: ha/control_ops.hpp; who runs
// what: the Threads section of api/init.hpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <thread>

#include "core/comm.hpp"

namespace nccl_ha::plugin {

// Takes the comm for the calling thread if nobody holds it (one atomic exchange, no waiting).
class Hold {
 public:
  explicit Hold(CommBase& c) noexcept
      : c_(c), ok_(!c.owned.load(std::memory_order_relaxed) && !c.owned.exchange(true, std::memory_order_acquire)) {}
  ~Hold() {
    if (ok_) c_.owned.store(false, std::memory_order_release);
  }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  explicit operator bool() const noexcept { return ok_; }

 private:
  CommBase& c_;
  bool ok_;
};
// Takes the comm, waiting (yielding) until the other thread lets go, and lets go of it when it goes
// out of scope: for the calls that may not answer "not yet" (close, iflush, deregMr); never on the
// data path's isend / irecv / test, never on the progress thread.
class HoldWait {
 public:
  explicit HoldWait(CommBase& c) noexcept : c_(c) {
    while (c.owned.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  }
  ~HoldWait() { c_.owned.store(false, std::memory_order_release); }
  HoldWait(const HoldWait&) = delete;
  HoldWait& operator=(const HoldWait&) = delete;

 private:
  CommBase& c_;
};

// ---- posting (path_ops.cpp); each returns 0 or the errno of ibv_post_*
// How many WRs of the chain `first` (at most n, linked by `next`) a post that returned `rc` and
// `bad` did post: all of them on success; on a failure the ones before `bad`, the first WR not
// posted (the verbs contract); none when `bad` is not in the chain. Pure; unit-tested.
template <class Wr>
int wrs_posted(const Wr* first, int n, int rc, const Wr* bad) noexcept {
  if (rc == 0) return n;
  int k = 0;
  for (const Wr* w = first; w && k < n; w = w->next, ++k)
    if (w == bad) return k;
  return 0;
}
// net_ib's part of a message of `size` bytes split across n QPs: size / n rounded up to 128 bytes
// (NCCL's LL and LL128 protocols need that alignment). Pure; unit-tested.
constexpr std::uint32_t split_chunk(std::uint32_t size, std::uint32_t n) noexcept {
  constexpr std::uint32_t kAlign = 128;
  const std::uint32_t share = size / n + (size % n ? 1u : 0u);
  return (share + kAlign - 1) / kAlign * kAlign;
}
// Where each of n parts of a message of `size` bytes begins when part i carries weights[i] of it
// (striping over a fused device's member ports by weight, issue #33): offsets[i] is the weights
// before part i as a share of `size`, rounded up to 128 bytes like split_chunk, at most `size`;
// offsets[n] = size. So the parts cover the message once, in order, each but the last a multiple
// of 128 bytes; a weight of 0 gets an empty part; all weights 0 count as equal. `offsets` holds
// weights.size() + 1 entries; at most 8 weights of at most 2^20 each (kMaxStripeWeight), a size below
// 2^40. Pure; unit-tested.
void weighted_offsets(std::uint64_t size, std::span<const std::uint32_t> weights,
                      std::span<std::uint64_t> offsets) noexcept;
int post_data(SendComm& c, Request& r, Path& p);  // r's WRITE_WITH_IMM on p (in parts when p.split)
int post_recvs(Path& p, int qp, int n);           // n receive WRs on p's QP `qp` (data or control)
int post_control_recvs(Path& p, int n);           // n receive WRs for control writes (QP 0)
// The n receive WRs of receive `seq`'s buffers where its data will land (its QP, or each QP when
// split), taking a QP's spare_recvs first.
int post_data_recvs(Path& p, std::uint64_t seq, int n);
int post_cts(RecvComm& c, Path& p, std::uint64_t slot);          // outbox[slot] -> peer FIFO
// Writes ctrl_out bytes [offset, offset+len) into the peer's ControlBlock over p; with a `notify`
// kind, as a write with immediate data that raises a completion (and wakes the peer's control plane).
// The keys are p's slot's (CommBase::keys), or `keys` for a path whose slot has not moved to its
// device yet (re-protection's hello).
struct WriteKeys {
  std::uint32_t lkey = 0;  // ctrl_out on p's device
  std::uint32_t rkey = 0;  // the peer's ControlBlock on its device of p
};
// `value`: the low bits of the WR's wr_id (make_wr_id).
int post_control(CommBase& c, Path& p, WrKind kind, std::size_t offset, std::size_t len, CtlKind notify = {},
                 const WriteKeys* keys = nullptr, std::uint64_t value = 0);
// One heartbeat write on p: its pair's (liveness.hpp; `seq` its number there, back in the
// completion's wr_id), or a failover's probe of its new path (seq 0).
int post_heartbeat(CommBase& c, Path& p, std::uint64_t seq = 0);

// ---- clear-to-send entries (FifoEntry), as the sender reads them from the FIFO the receiver
// writes (isend, and a failover's replay). Pure; fuzzed (test/fuzz/control_record.cpp).
enum class CtsRead : std::uint8_t {
  not_posted,  // the slot's seq is not the one wanted yet
  landing,     // its seq shows, the copy does not check (or names another seq): read again later
  corrupt,     // whole, but nreqs is not 1..kMaxRecvs: the comm fails
  whole        // `out` holds the entry: 1 <= nreqs <= kMaxRecvs
};
// The entry for receive `seq` (its FifoEntry::seq is seq + 1) in the FIFO slot `slot`, copied to
// `out` (read_record: `out` is written whatever the answer).
inline CtsRead read_cts(const FifoEntry& slot, std::uint64_t seq, FifoEntry& out) noexcept {
  if (__atomic_load_n(&slot.seq, __ATOMIC_ACQUIRE) != seq + 1) return CtsRead::not_posted;
  if (!read_record(slot, out) || out.seq != seq + 1) return CtsRead::landing;
  if (out.nreqs == 0 || out.nreqs > kMaxRecvs) return CtsRead::corrupt;
  return CtsRead::whole;
}
// The buffer of a whole entry (read_cts) a send with `tag` goes to: the first one not `matched`
// yet (bit per buffer) whose tag it is; e.nreqs when none.
inline std::uint32_t match_cts(const FifoEntry& e, std::uint8_t matched, int tag) noexcept {
  std::uint32_t index = 0;
  for (; index < e.nreqs; ++index)
    if (!(matched & (1u << index)) && e.tag[index] == tag) break;
  return index;
}
// A replayed send's key on device slot `slot` (0 or 1): the receiver's rkey of buffer `index` of
// receive `seq` in the FIFO slot as it is now, if that holds a whole entry for `seq` with that
// buffer (else `rkey` is left as it is). A send's index is below kMaxRecvs (match_cts): checked
// too, whatever nreqs the entry claims.
inline bool cts_rkey(const FifoEntry& slot_mem, std::uint64_t seq, unsigned index, int slot, std::uint32_t& rkey) noexcept {
  FifoEntry e;
  if (!read_record(slot_mem, e) || e.seq != seq + 1 || index >= e.nreqs || index >= kMaxRecvs) return false;
  rkey = e.rkey[slot][index];
  return true;
}

// ---- completions: the data path's (datapath/p2p.cpp, poll.cpp, flush.cpp), declared here
// because the control plane reaps through them too, when NCCL does not call (the one way the
// layers are crossed upward; docs/architecture.md, "Layers").
// A successful completion on path p.
void on_success(CommBase& c, Path& p, const ibv_wc& wc);
// Reaps up to `max` completions of p (successes handled, accounting kept). Returns the number
// reaped, -1 when ibv_poll_cq failed; the first error completion is copied to *error (status
// IBV_WC_SUCCESS when none).
int poll_path(CommBase& c, Path& p, int max, ibv_wc* error);
// poll_path, then arm p's completion channel and poll once more (a completion between the two
// raises an event, none is lost). Progress thread only (the control plane's reaping).
int poll_and_arm(CommBase& c, Path& p, int max, ibv_wc* error);
// Reaps the completions of a receive comm's loopback QP on `slot` (datapath/flush.cpp): a READ
// read its slot, or failed (the slot is wanted again). The data path's test, or the control plane
// before it replaces the QP (ha/flush_paths.cpp).
ncclResult_t poll_flush(RecvComm& c, int slot);
// Whether the receive comm's loopback QP on `slot` can take a flush READ (it exists and has not
// failed; the control plane replaces a failed one: ha/flush_paths.cpp).
inline bool flush_qp_usable(const RecvComm& c, int slot) noexcept {
  const Path* p = c.flush_paths[slot].get();
  return p && p->link.load(std::memory_order_relaxed) != Path::failed;
}
// True when isend / irecv may post (no failover in progress or asked for, no error).
inline bool can_post(const CommBase& c) {
  return c.error == ncclSuccess && c.cp.may_post();
}
// The data path met a fault of the active path: the control plane fails over (woken now;
// datapath/poll.cpp).
void request_failover(CommBase& c, std::string cause);
// How a failure is told in log lines (path_ops.cpp).
std::string describe_error(const Path& p, const ibv_wc& wc);
std::string describe_fault(const Device& d);

}  // namespace nccl_ha::plugin
