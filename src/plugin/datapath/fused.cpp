// A connection on a fused device: the members' comms and the split of each message (fused.hpp).
#include "datapath/fused.hpp"

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "core/path_ops.hpp"
#include "datapath/one_comm.hpp"
#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::plugin {
namespace {

static_assert(std::is_standard_layout_v<FusedRequest>, "FusedRequest and its head convert (ReqType::fused)");
static_assert(kMaxVDeviceMembers <= 8, "bit masks of 8 members");

FusedRequest& of_head(Request& head) noexcept { return *reinterpret_cast<FusedRequest*>(&head); }

std::uint8_t all_members(const FusedComm& f) noexcept { return static_cast<std::uint8_t>((1u << f.count) - 1); }
std::uint8_t bit(int i) noexcept { return static_cast<std::uint8_t>(1u << i); }

// A free request of f (NCCL keeps at most kMaxRequests in flight per comm, flushes besides), or null.
FusedRequest* take_request(FusedComm& f) noexcept {
  for (FusedRequest& r : f.reqs)
    if (!r.busy) {
      r.busy = true;
      r.head = Request{};
      r.head.type = ReqType::fused;
      r.parts = {};
      r.waiting = 0;
      r.sizes = {};
      return &r;
    }
  return nullptr;
}

// The call now is the one that left `pending` (NCCL repeats a call that had no request until it
// has one); anything else is a caller's error, said once.
bool same_call(FusedComm& f, const void* data, std::size_t size, int tag) {
  const FusedPending& p = f.pending;
  if (p.data == data && p.size == size && p.tag == tag) return true;
  HA_WARN("NET/HA: %s: a call (%p, %zu bytes, tag %d) came before the one left waiting for members (%p, %zu bytes, "
          "tag %d) was repeated",
          f.id.c_str(), data, size, tag, p.data, p.size, p.tag);
  return false;
}

// Starts (or goes on with) the request of this call: `post(i, out)` posts member i's part; the
// request goes to NCCL once every member's part is posted.
template <class Post>
ncclResult_t post_parts(FusedComm& f, const void* data, std::size_t size, int tag, void** request, Post&& post) {
  *request = nullptr;
  FusedPending& p = f.pending;
  if (p.req && !same_call(f, data, size, tag)) return ncclInternalError;
  if (!p.req) {
    FusedRequest* r = take_request(f);
    if (!r) return ncclSuccess;  // as a single comm: all in flight, retry later
    p = FusedPending{r, 0, data, size, tag};
  }
  FusedRequest& r = *p.req;
  for (int i = 0; i < f.count; ++i) {
    if (p.posted & bit(i)) continue;
    void* part = nullptr;
    if (auto rc = post(i, &part); rc != ncclSuccess) return rc;  // the member's error is sticky there
    if (!part) return ncclSuccess;                              // not yet: NCCL calls again
    r.parts[static_cast<std::size_t>(i)] = part;
    p.posted = static_cast<std::uint8_t>(p.posted | bit(i));
  }
  r.waiting = all_members(f);
  p = FusedPending{};
  *request = &r.head;
  return ncclSuccess;
}

// Member i's handles of NCCL's fused registrations `mhandles` (n of them).
void member_handles(void** mhandles, int n, int i, void** out) {
  for (int j = 0; j < n; ++j)
    out[j] = mhandles && mhandles[j] ? static_cast<FusedReg*>(mhandles[j])->members[static_cast<std::size_t>(i)] : nullptr;
}

std::string members_text(const FusedComm& f) {
  std::string s;
  for (int i = 0; i < f.count; ++i) {
    const CommBase& m = *f.members[static_cast<std::size_t>(i)];
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s comm %p on %s (weight %u)", i ? ", " : "",
                  m.kind == CommKind::send ? "send" : "recv", static_cast<const void*>(&m),
                  m.home ? m.home->port.id().c_str() : "?",
                  f.weights[static_cast<std::size_t>(i)]->load(std::memory_order_relaxed));
    s += buf;
  }
  return s;
}

}  // namespace

std::unique_ptr<FusedComm> make_fused(CommKind kind, std::span<const std::shared_ptr<CommBase>> members) {
  auto f = std::make_unique<FusedComm>(kind);
  f->count = static_cast<int>(std::min<std::size_t>(members.size(), kMaxVDeviceMembers));
  std::string ports;
  for (int i = 0; i < f->count; ++i) {
    const auto k = static_cast<std::size_t>(i);
    f->members[k] = members[k];
    const Device& d = *members[k]->home;  // set by the handshake: the member's own port
    f->weights[k] = &d.stripe_weight;
    ports += (i ? "+" : "") + d.name;
  }
  char id[96];
  std::snprintf(id, sizeof id, "fused %s comm %p (%s)", kind == CommKind::send ? "send" : "recv",
                static_cast<void*>(f.get()), ports.c_str());
  f->id = id;
  HA_INFO("NET/HA: %s stripes each message over %d connections: %s", f->id.c_str(), f->count, members_text(*f).c_str());
  return f;
}

ncclResult_t fused_isend(FusedComm& f, void* data, std::size_t size, int tag, void* mhandle, void* phandle,
                         void** request) {
  if (!f.pending.req) {  // a new send: split by the weights as they are now, kept until every part is posted
    std::uint32_t weights[kMaxVDeviceMembers];
    for (int i = 0; i < f.count; ++i) weights[i] = f.weights[static_cast<std::size_t>(i)]->load(std::memory_order_relaxed);
    weighted_offsets(size, std::span<const std::uint32_t>(weights, static_cast<std::size_t>(f.count)),
                     std::span<std::uint64_t>(f.offsets.data(), static_cast<std::size_t>(f.count) + 1));
  }
  const auto& offsets = f.offsets;
  auto* reg = static_cast<FusedReg*>(mhandle);
  auto post = [&](int i, void** part) {
    const auto k = static_cast<std::size_t>(i);
    auto& m = static_cast<SendComm&>(*f.members[k]);
    return send_on(m, static_cast<char*>(data) + offsets[k], offsets[k + 1] - offsets[k], tag,
                   reg ? reg->members[k] : nullptr, i == 0 ? phandle : nullptr, offsets[k], part);
  };
  auto rc = post_parts(f, data, size, tag, request, post);
  if (*request) of_head(*static_cast<Request*>(*request)).sizes[0] = size;
  return rc;
}

ncclResult_t fused_irecv(FusedComm& f, int n, void** data, const std::size_t* sizes, const int* tags, void** mhandles,
                         void** phandles, void** request) {
  auto post = [&](int i, void** part) {  // n is 1..kMaxRecvs (irecv checked it)
    void* mh[kMaxRecvs];
    member_handles(mhandles, n, i, mh);
    return recv_on(static_cast<RecvComm&>(*f.members[static_cast<std::size_t>(i)]), n, data, sizes, tags, mh,
                   i == 0 ? phandles : nullptr, part);
  };
  return post_parts(f, data[0], sizes[0], tags[0], request, post);
}

ncclResult_t fused_iflush(FusedComm& f, int n, void** data, const int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  if (f.pending.req) {  // never between a receive's calls: NCCL flushes what it has received
    HA_WARN("NET/HA: %s: iflush while a receive waits to be repeated", f.id.c_str());
    return ncclInternalError;
  }
  FusedRequest* r = take_request(f);
  if (!r) {
    HA_WARN("NET/HA: %s: more than %zu requests in flight", f.id.c_str(), f.reqs.size());
    return ncclInternalError;
  }
  // Each member reads back through the devices that wrote its parts (flush.cpp); iflush never
  // answers "not yet".
  for (int i = 0; i < f.count; ++i) {
    void* mh[kMaxRecvs];
    member_handles(mhandles, n, i, mh);
    void* part = nullptr;
    if (auto rc = flush_on(static_cast<RecvComm&>(*f.members[static_cast<std::size_t>(i)]), n, data, sizes, mh, &part);
        rc != ncclSuccess) {
      r->busy = false;  // parts already posted complete in their own comms; nobody tests them
      return rc;
    }
    r->parts[static_cast<std::size_t>(i)] = part;
    if (part) r->waiting = static_cast<std::uint8_t>(r->waiting | bit(i));
  }
  *request = &r->head;
  return ncclSuccess;
}

ncclResult_t fused_test(Request& head, int* done, int* sizes) {
  FusedRequest& r = of_head(head);
  *done = 0;
  bool recv = false;
  for (int i = 0; i < kMaxVDeviceMembers && r.waiting; ++i) {
    if (!(r.waiting & bit(i))) continue;
    auto* part = static_cast<Request*>(r.parts[static_cast<std::size_t>(i)]);
    recv = recv || part->type == ReqType::recv;
    const int nbuf = part->type == ReqType::recv ? part->nreqs : 1;
    int part_done = 0;
    int got[kMaxRecvs] = {};
    if (auto rc = test_one(*part, &part_done, got); rc != ncclSuccess) return rc;
    if (!part_done) continue;
    r.waiting = static_cast<std::uint8_t>(r.waiting & ~bit(i));
    if (recv)
      for (int j = 0; j < nbuf; ++j) r.sizes[static_cast<std::size_t>(j)] += static_cast<std::size_t>(got[j]);
    r.head.nreqs = static_cast<std::uint8_t>(std::max<int>(r.head.nreqs, nbuf));
  }
  if (r.waiting) return ncclSuccess;
  if (sizes)
    for (int j = 0; j < std::max<int>(r.head.nreqs, 1); ++j) sizes[j] = static_cast<int>(r.sizes[static_cast<std::size_t>(j)]);
  r.busy = false;
  *done = 1;
  return ncclSuccess;
}

ncclResult_t fused_reg_mr(FusedComm& f, void* data, std::size_t size, int type, std::uint64_t offset, int fd,
                          void** mhandle) {
  *mhandle = nullptr;
  auto reg = std::make_unique<FusedReg>();
  for (int i = 0; i < f.count; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (auto rc = reg_on(*f.members[k], data, size, type, offset, fd, &reg->members[k]); rc != ncclSuccess) {
      for (int j = 0; j < i; ++j) dereg_on(*f.members[static_cast<std::size_t>(j)], reg->members[static_cast<std::size_t>(j)]);
      return rc;
    }
  }
  *mhandle = reg.release();  // NCCL's until deregMr
  return ncclSuccess;
}

ncclResult_t fused_dereg_mr(FusedComm& f, void* mhandle) {
  std::unique_ptr<FusedReg> reg(static_cast<FusedReg*>(mhandle));
  ncclResult_t result = ncclSuccess;
  for (int i = 0; i < f.count; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (auto rc = dereg_on(*f.members[k], reg->members[k]); rc != ncclSuccess && result == ncclSuccess) result = rc;
  }
  return result;
}

ncclResult_t fused_close(FusedComm& f) {
  std::unique_ptr<FusedComm> owned(&f);  // NCCL's, from make_fused's release
  for (int i = 0; i < f.count; ++i) close_one(*f.members[static_cast<std::size_t>(i)]);
  return ncclSuccess;
}

}  // namespace nccl_ha::plugin
