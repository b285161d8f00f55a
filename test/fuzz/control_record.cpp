// The RDMA control records the peer writes into our memory (src/plugin/core/comm.hpp): the clear-to-send
// entries of a send comm's FIFO (FifoEntry), and the failover notice (SyncMsg), the re-protection
// message (ReprotectMsg) and hello (HelloMsg) of the ControlBlock. They land in no defined byte
// order; each carries a checksum (record_check) and is read only through read_record.
// Byte 0: bits 0-1 the record (0 FifoEntry, 1 SyncMsg, 2 HelloMsg, 3 ReprotectMsg); bit 2: sealed
// first (a whole write of the peer), else the bytes as they are (forged, torn, never written);
// bit 3 (FifoEntry): its seq set to the one wanted. Then the record's bytes (zero-filled), then
// the parameters of the checks below (zeros when the input ends).
// Properties, every record:
//   read_record copies the bytes exactly and takes the record iff its check matches its bytes;
//   a sealed record is taken, sealing is idempotent; one byte changed anywhere (the check
//   included) is refused; a record torn between two whole writes (a prefix of one, or any words
//   of each) is taken only if it is one of them.
// FifoEntry, as isend reads it (path_ops.hpp read_cts, match_cts) and a failover's replay
// (cts_rkey): the entry for seq is not_posted iff its seq is not seq + 1, else landing iff its
// check fails, else corrupt iff nreqs is not 1..kMaxRecvs, else whole and copied exactly; on a
// whole entry, sends carrying its tags in any order take each buffer exactly once (each the first
// free buffer of its tag, never one matched already), a tag with no free buffer matches none;
// a replay takes a buffer's rkey only from a whole entry for its seq holding that buffer.
// SyncMsg: delivered() on any report says every receive before base received, none from
// base + kMaxRequests on, never reads outside the report; and a receiver's report (receiver_report
// of any receive window, sealed as send_notice does), read back, says of every buffer exactly
// whether the receiver has it: the sender replays exactly what is missing.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/path_ops.hpp"
#include "fuzz_common.hpp"
#include "ha/control_ops.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {

// The parameters after the record: little-endian values, zeros once the input ends.
struct Params {
  const std::uint8_t* p;
  std::size_t n;
  std::uint64_t get(int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      const std::uint64_t b = n ? (--n, *p++) : 0;
      v |= b << (8 * i);
    }
    return v;
  }
  std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() { return get(8); }
};

template <class T>
bool same(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}
template <class T>
std::uint8_t* raw(T& r) {
  return reinterpret_cast<std::uint8_t*>(&r);
}
template <class T>
bool checks(const T& r) {
  return r.check == record_check(&r, offsetof(T, check));
}

// The properties every record has.
template <class T>
void record_properties(const T& in, Params& p) {
  T out;
  std::memset(&out, 0xa5, sizeof out);
  const bool taken = read_record(in, out);
  FUZZ_REQUIRE(same(out, in));
  FUZZ_REQUIRE(taken == checks(in));

  T a = in;
  seal(a);
  T tmp;
  FUZZ_REQUIRE(read_record(a, tmp) && same(tmp, a));
  T a2 = a;
  seal(a2);
  FUZZ_REQUIRE(same(a, a2));
  // One byte changed, wherever: refused (each step of record_check is a bijection of its state;
  // only its last, 0 -> 1, is not, which two records would have to meet exactly).
  {
    T f = a;
    raw(f)[p.u16() % sizeof(T)] ^= static_cast<std::uint8_t>(p.u8() | 1);
    FUZZ_REQUIRE(!read_record(f, tmp));
  }
  // A second whole write of the record (b: a changed in a few bytes, sealed), and what is seen
  // while it lands over the first: a prefix of it, or any of its words.
  T b = a;
  for (int k = p.u8() % 8; k > 0; --k) raw(b)[p.u16() % offsetof(T, check)] ^= p.u8();
  seal(b);
  {
    T m = a;
    std::memcpy(&m, &b, p.u16() % (sizeof(T) + 1));
    if (read_record(m, tmp)) FUZZ_REQUIRE(same(m, a) || same(m, b));
  }
  {
    T m = a;
    const std::uint32_t mask = p.u32();
    for (std::size_t w = 0; w < sizeof(T) / 8; ++w)
      if ((mask >> (w % 32)) & 1u) std::memcpy(raw(m) + 8 * w, raw(b) + 8 * w, 8);
    if (read_record(m, tmp)) FUZZ_REQUIRE(same(m, a) || same(m, b));
  }
}

void fifo_properties(const FifoEntry& slot, std::uint64_t seq, Params& p) {
  FifoEntry cur;
  const CtsRead r = read_cts(slot, seq, cur);
  if (slot.seq != seq + 1) {
    FUZZ_REQUIRE(r == CtsRead::not_posted);
  } else if (!checks(slot)) {
    FUZZ_REQUIRE(r == CtsRead::landing);
  } else if (slot.nreqs == 0 || slot.nreqs > kMaxRecvs) {
    FUZZ_REQUIRE(r == CtsRead::corrupt);
  } else {
    FUZZ_REQUIRE(r == CtsRead::whole && same(cur, slot));
  }
  if (r == CtsRead::whole) {
    const std::uint32_t n = cur.nreqs;
    const auto full = static_cast<std::uint8_t>((1u << n) - 1);
    // Sends with the entry's tags, in an order from the input: every buffer taken exactly once.
    std::uint32_t order[kMaxRecvs];
    for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
    for (std::uint32_t i = n; i > 1; --i) std::swap(order[i - 1], order[p.u8() % i]);
    std::uint8_t matched = 0;
    for (std::uint32_t k = 0; k < n; ++k) {
      const int tag = cur.tag[order[k]];
      const std::uint32_t index = match_cts(cur, matched, tag);
      FUZZ_REQUIRE(index < n && cur.tag[index] == tag && !((matched >> index) & 1u));
      for (std::uint32_t j = 0; j < index; ++j) FUZZ_REQUIRE(((matched >> j) & 1u) || cur.tag[j] != tag);
      matched = static_cast<std::uint8_t>(matched | (1u << index));
    }
    FUZZ_REQUIRE(matched == full);
    for (std::uint32_t i = 0; i < n; ++i) FUZZ_REQUIRE(match_cts(cur, matched, cur.tag[i]) == n);
    // Any tag against any buffers already matched.
    const auto some = static_cast<std::uint8_t>(p.u8() & full);
    const int tag = p.u8() & 1 ? cur.tag[p.u8() % n] : static_cast<int>(p.u32());
    const std::uint32_t index = match_cts(cur, some, tag);
    FUZZ_REQUIRE(index <= n);
    for (std::uint32_t j = 0; j < index; ++j) FUZZ_REQUIRE(((some >> j) & 1u) || cur.tag[j] != tag);
    if (index < n) FUZZ_REQUIRE(cur.tag[index] == tag && !((some >> index) & 1u));
  }
  // A replay's key (failover.cpp refresh_send), for this seq or another one.
  const std::uint64_t rseq = p.u8() & 1 ? seq : p.u64();
  const unsigned index = p.u8();
  const int s = p.u8() & 1;
  const std::uint32_t before = p.u32();
  std::uint32_t rkey = before;
  const bool took = cts_rkey(slot, rseq, index, s, rkey);
  const bool expect = checks(slot) && slot.seq == rseq + 1 && index < slot.nreqs && index < kMaxRecvs;
  FUZZ_REQUIRE(took == expect);
  FUZZ_REQUIRE(rkey == (took ? slot.rkey[s][index] : before));
}

// delivered() on any report, whole or not: what the sender's replay (apply_report) asks of it.
void report_bounds(const SyncMsg& m, Params& p) {
  for (int k = 0; k < 4; ++k) {
    const std::uint64_t seq = p.u8() & 1 ? m.base + (p.u8() % (kMaxRequests + 8)) - 4 : p.u64();
    const unsigned index = p.u8() % kMaxRecvs;
    const bool d = delivered(m, seq, index);
    if (seq < m.base) FUZZ_REQUIRE(d);
    if (seq >= m.base && seq - m.base >= kMaxRequests) FUZZ_REQUIRE(!d);
  }
}

// A receiver's window of receives (at most kMaxRequests in flight, each in slot seq % kMaxRequests,
// anything older handed back to NCCL), its report as send_notice writes it, read back by the sender.
void report_round_trip(Params& p) {
  const std::uint64_t next_seq = p.u64() >> (1 + p.u8() % 63);  // below 2^63: seq + 1 never wraps
  std::array<Request, kMaxRequests> reqs{};
  for (std::uint64_t d = 1; d <= kMaxRequests && d <= next_seq; ++d) {
    const std::uint8_t b = p.u8();
    if (!(b & 1)) continue;  // handed back (or never a receive of this slot): free
    Request& r = reqs[(next_seq - d) % kMaxRequests];
    r.type = ReqType::recv;
    r.seq = next_seq - d;
    r.nreqs = static_cast<std::uint8_t>(1 + ((b >> 1) % kMaxRecvs));
    r.done_mask = static_cast<std::uint8_t>(p.u8() & ((1u << r.nreqs) - 1));
  }
  SyncMsg m = receiver_report(reqs, next_seq);
  m.slot = p.u8() & 1;
  m.planned = p.u8() & 1;
  m.epoch = p.u32();
  seal(m);
  SyncMsg got;
  FUZZ_REQUIRE(read_record(m, got));
  FUZZ_REQUIRE(got.base <= next_seq);
  const std::uint64_t lo = next_seq > kMaxRequests + 4 ? next_seq - kMaxRequests - 4 : 0;
  for (std::uint64_t seq = lo; seq < next_seq + 4; ++seq) {
    const Request& r = reqs[seq % kMaxRequests];
    const bool outstanding = r.type == ReqType::recv && r.seq == seq;
    if (outstanding) FUZZ_REQUIRE(got.base <= seq);
    for (unsigned index = 0; index < kMaxRecvs; ++index) {
      if (outstanding && index >= r.nreqs) continue;  // no such buffer: no send names it
      const bool has = seq < next_seq && (!outstanding || ((r.done_mask >> index) & 1u));
      FUZZ_REQUIRE(delivered(got, seq, index) == has);
    }
  }
}

template <class T>
T load(const std::uint8_t* data, std::size_t size) {
  T r;
  std::memset(&r, 0, sizeof r);
  std::memcpy(&r, data, std::min(size, sizeof r));
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::uint8_t* body = data + 1;
  const std::size_t len = size - 1;
  auto params = [&](std::size_t record) { return record < len ? Params{body + record, len - record} : Params{body, 0}; };
  switch (mode & 3) {
    case 0: {
      alignas(64) FifoEntry e = load<FifoEntry>(body, len);
      Params p = params(sizeof e);
      const std::uint64_t seq = p.u64();
      if (mode & 8) e.seq = seq + 1;
      if (mode & 4) seal(e);
      record_properties(e, p);
      fifo_properties(e, seq, p);
      break;
    }
    case 1: {
      SyncMsg m = load<SyncMsg>(body, len);
      Params p = params(sizeof m);
      if (mode & 4) seal(m);
      record_properties(m, p);
      report_bounds(m, p);
      report_round_trip(p);
      break;
    }
    case 2: {
      HelloMsg h = load<HelloMsg>(body, len);
      Params p = params(sizeof h);
      if (mode & 4) seal(h);
      record_properties(h, p);
      break;
    }
    default: {
      ReprotectMsg m = load<ReprotectMsg>(body, len);
      Params p = params(sizeof m);
      if (mode & 4) seal(m);
      record_properties(m, p);
      break;
    }
  }
  return 0;
}
