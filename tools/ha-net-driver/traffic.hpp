// ha-net-driver: data phases on one send comm + one recv comm (integrity, ping-pong, bandwidth).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "mgmt.hpp"
#include "options.hpp"
#include "plugin.hpp"
#include "report.hpp"
#include "unique_fd.hpp"

namespace hnd {

class Churn;

// Page-aligned send and receive regions of `slots` slots each. A slot holds the largest message
// plus a 64-byte guard (checked for overruns), rounded up to 4 KiB.
class Buffers {
 public:
  static constexpr std::size_t kGuard = 64;
  // memfd: each region is a memfd's mapping (MAP_SHARED; send_fd / recv_fd), else anonymous memory.
  Buffers(std::size_t max_size, int slots, bool memfd = false);
  ~Buffers();
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  std::uint8_t* send_slot(int i) const { return send_ + static_cast<std::size_t>(i) * stride_; }
  std::uint8_t* recv_slot(int i) const { return recv_ + static_cast<std::size_t>(i) * stride_; }
  std::uint8_t* send_base() const { return send_; }
  std::uint8_t* recv_base() const { return recv_; }
  std::size_t region_bytes() const { return bytes_; }
  std::size_t stride() const { return stride_; }
  int slots() const { return slots_; }
  int send_fd() const { return send_fd_.get(); }  // -1 unless memfd
  int recv_fd() const { return recv_fd_.get(); }

 private:
  std::uint8_t* send_ = nullptr;
  std::uint8_t* recv_ = nullptr;
  std::size_t stride_ = 0, bytes_ = 0;
  int slots_ = 0;
  UniqueFd send_fd_, recv_fd_;
};

struct DataCtx {
  Plugin& net;
  Mgmt& mgmt;
  void* send_comm;
  void* recv_comm;
  Buffers& buf;
  void* send_mh;  // regMr(send_comm, buf.send_base())
  void* recv_mh;  // regMr(recv_comm, buf.recv_base())
  int rank;
  const Options& opt;
  // --fault peer-death. watch_peer = false: a management connection closed by the peer does not
  // end the phase (the plugin must report the dead peer); its time goes to *peer_gone_ns instead.
  // An abort message from the peer still ends it.
  bool watch_peer = true;
  std::int64_t* peer_gone_ns = nullptr;
  // Called after each completed receive with the number of messages received so far.
  std::function<void(std::uint64_t)> after_recv;
  // Integrity phase: completions over time (may be null; the caller starts it).
  Timeline* timeline = nullptr;
  // --outlive-peer: where a peer abort seen in a data phase is recorded (null: abort at once).
  PeerAbort* peer_abort = nullptr;
  // Integrity phase, --idle: the windows taken (without any plugin call) are appended here (may be
  // null: the windows are still taken).
  std::vector<IdleTaken>* idle_taken = nullptr;
  // Integrity phase, --churn: stepped once per polling turn; the phase also waits for it.
  Churn* churn = nullptr;
};

// Mixed sizes (message k has size sizes[k % n]), --messages per direction (--one-way: rank 1 to
// rank 0 only; --min-seconds: at least that long), every byte checked, then one iflush of the last
// received group. The counters go to st as they happen (they survive an error).
void run_integrity(DataCtx& c, Integrity& st);
std::vector<LatResult> run_pingpong(DataCtx& c);
std::vector<BwResult> run_bw(DataCtx& c);

// Helpers shared with the comms test.
void wait_request(Plugin& net, void* req, int* sizes, const Deadline& d, double timeout_s, const char* what);

}  // namespace hnd
