// Test-only NCCL net plugin for ha-net-driver's own tests: the "network" is one TCP socket per
// comm between the two ranks. Honest enough to exercise a driver: non-blocking connect/accept
// that return NULL comms until the handshake is done, requests that progress only in test(),
// tags and grouped receives, buffer/registration checks, NULL requests under back-pressure.
//
// Built three times: libnccl-net-fake.so exports ncclNetPlugin_v10, libnccl-net-fake-v8.so
// (FAKE_NET_V8) exports ncclNetPlugin_v8, libnccl-net-fake-lazy.so (FAKE_NET_LAZY) exports a
// ncclNetPlugin_v10 with only `name` and `init` set, which init fills (as
// nccl-rdma-sharp-plugins does: NCCL calls init before it reads any other slot).
//
// Environment:
//   FAKE_NET_IP=A.B.C.D   address put into listen handles (default 127.0.0.1)
//   FAKE_CORRUPT=1        flip one byte of the 3rd non-empty message received (once per process)
//   FAKE_RETRY_EVERY=N    every Nth isend/irecv returns a NULL request ("try again")
//   FAKE_HANG=ENTRY       that entry point (connect, test or closeSend) never returns
//   FAKE_FAIL_AFTER=N     once N requests completed, every test() returns ncclSystemError (with a WARN)
//   FAKE_LEAK_CLOSE=1     closeRecv leaks the comm's socket (an fd leak for the resource checks to find)
//   FAKE_CONNECT_FAIL_EVERY=N  every Nth connection (its first connect call) fails with ncclSystemError
//   FAKE_LAZY_NULL=SLOT,...    FAKE_NET_LAZY: mandatory slots (devices, isend, ...) init leaves NULL
//   FAKE_DEVICES=N        N devices fake0 .. fake<N-1> (1..4, default 1), all on the same loopback
//   FAKE_VDEVICE_REFUSE=1 makeVDevice (v10) refuses every fusion of several devices
//   FAKE_PROFILE_RETRY=1  v10: after an isend / irecv returned "try again", the next test() starts a
//                         profiler event (of its own plugin id) under the step handle that call
//                         was given, as a plugin that keeps part of the message posted across the
//                         retry may (a fused comm)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_set>

#include "nccl_net_abi.h"

namespace {

ncclDebugLogger_t g_log = nullptr;
#define FAKE_LOG(level, fmt, ...) \
  do { \
    if (g_log) g_log(level, NCCL_NET, __FILE__, __LINE__, fmt __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)
#define FAKE_WARN(fmt, ...) FAKE_LOG(NCCL_LOG_WARN, "NET/Fake : " fmt __VA_OPT__(, ) __VA_ARGS__)
#define FAKE_INFO(fmt, ...) FAKE_LOG(NCCL_LOG_INFO, "NET/Fake : " fmt __VA_OPT__(, ) __VA_ARGS__)

constexpr std::uint32_t kMagic = 0x46414b45;  // "FAKE"
constexpr int kMaxRecvs = 8;
constexpr std::size_t kSendLimit = NCCL_NET_MAX_REQUESTS * kMaxRecvs, kRecvLimit = NCCL_NET_MAX_REQUESTS;

in_addr_t g_ip = htonl(INADDR_LOOPBACK);
bool g_corrupt = false, g_corrupted = false;
bool g_leak_close = false;        // FAKE_LEAK_CLOSE=1
long g_connect_fail_every = 0;    // FAKE_CONNECT_FAIL_EVERY
unsigned long g_connects = 0;
long g_fail_after = -1;           // FAKE_FAIL_AFTER (-1: off)
unsigned long g_completed = 0;   // requests test() reported done
long g_retry_every = 0;
bool g_profile_retry = false;             // FAKE_PROFILE_RETRY=1
ncclProfilerCallback_t g_prof = nullptr;  // v10 init's
std::atomic<void*> g_retried_step{nullptr};  // FAKE_PROFILE_RETRY: a retried call's step handle
constexpr int64_t kFakeProfilerId = 0x46414b45;  // "FAKE": not nccl-ha's id
// Devices: g_ndev physical ones, then the virtual ones makeVDevice made (v10).
int g_ndev = 1;
bool g_vdevice_refuse = false;
struct FusedDev {
  int ndevs = 0;
  int devs[4] = {};
  char name[64] = {};
};
FusedDev g_fused[8];
int g_nfused = 0;
bool dev_ok(int dev) { return dev >= 0 && dev < g_ndev + g_nfused; }
unsigned long g_post_calls = 0, g_nonempty_received = 0;

// Listen handle (inside the 128-byte NCCL handle). `stage` is the connecting side's state,
// kept in its own copy of the handle between connect() retries (as NCCL's IB plugin does).
struct Handle {
  std::uint32_t magic;
  std::uint32_t ip;  // network order
  std::uint16_t port;  // network order
  std::uint16_t pad[3];
  void* stage;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE);

struct WireHeader {
  std::uint32_t magic;
  std::int32_t tag;
  std::uint64_t size;
};

struct Mr {
  const std::uint8_t* base;
  std::size_t size;
};

struct Comm;
struct Req {
  enum Type { send, recv, flush } type;
  Comm* comm;
  bool done = false;
  // send
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  WireHeader hdr{};
  std::size_t off = 0;  // header + payload bytes written
  // recv
  int n = 0;
  std::uint8_t* bufs[kMaxRecvs] = {};
  std::size_t caps[kMaxRecvs] = {};
  int tags[kMaxRecvs] = {};
  std::size_t got[kMaxRecvs] = {};
  bool filled[kMaxRecvs] = {};
  int nfilled = 0;
};

struct Comm {
  int fd = -1;
  bool is_send = false;
  std::deque<Req*> queue;           // posted, not yet complete, in posting order
  std::unordered_set<Req*> live;    // every request not yet returned done by test()
  // receive side: the message being read
  WireHeader hdr{};
  std::size_t hdr_got = 0;
  Req* cur = nullptr;
  int cur_idx = 0;
  std::size_t cur_off = 0;
};

struct ListenComm {
  int fd = -1;
  int cfd = -1;  // accepted, hello not complete yet
  std::size_t hello_got = 0;
  std::uint32_t hello = 0;
};

struct ConnectState {
  int fd = -1;
  bool connected = false;
  std::size_t hello_sent = 0;
};

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool in_mr(const void* mh, const void* data, std::size_t size) {
  const auto* mr = static_cast<const Mr*>(mh);
  const auto* p = static_cast<const std::uint8_t*>(data);
  return mr && p >= mr->base && p + size <= mr->base + mr->size;
}

const char* g_hang = nullptr;

void maybe_hang(const char* entry) {
  if (g_hang && std::strcmp(g_hang, entry) == 0)
    for (;;) ::pause();
}

bool retry_now() { return g_retry_every > 0 && ++g_post_calls % static_cast<unsigned long>(g_retry_every) == 0; }

// FAKE_PROFILE_RETRY (v10): the step handle of the last call that returned no request, and the
// next test() (of any request: the caller's loop tests before it repeats the call) starts an event
// under it - after the call returned, as a fused comm's member part or its control plane may.
[[maybe_unused]] void profile_retry(void* phandle, void* request) {  // v10 only
  if (g_profile_retry && g_prof && phandle && !request) g_retried_step.store(phandle);
}
void profile_retried_step() {
  if (void* step = g_retried_step.exchange(nullptr)) {
    void* e = nullptr;
    g_prof(&e, ncclProfilerNetEventStart, step, kFakeProfilerId, nullptr);
  }
}

ncclResult_t progress_send(Comm* c) {
  while (!c->queue.empty()) {
    Req* r = c->queue.front();
    iovec iov[2];
    int niov = 0;
    if (r->off < sizeof(WireHeader)) {
      iov[niov++] = {reinterpret_cast<std::uint8_t*>(&r->hdr) + r->off, sizeof(WireHeader) - r->off};
      if (r->size) iov[niov++] = {const_cast<std::uint8_t*>(r->data), r->size};
    } else {
      std::size_t p = r->off - sizeof(WireHeader);
      iov[niov++] = {const_cast<std::uint8_t*>(r->data) + p, r->size - p};
    }
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<std::size_t>(niov);
    ssize_t n = ::sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
      FAKE_WARN("send failed: %s", std::strerror(errno));
      return ncclSystemError;
    }
    r->off += static_cast<std::size_t>(n);
    if (r->off < sizeof(WireHeader) + r->size) return ncclSuccess;
    r->done = true;
    c->queue.pop_front();
  }
  return ncclSuccess;
}

// Reads up to `len` bytes; returns bytes read, 0 if nothing available, -1 on error/EOF.
ssize_t read_some(Comm* c, void* p, std::size_t len) {
  if (len == 0) return 0;
  ssize_t n = ::recv(c->fd, p, len, MSG_DONTWAIT);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (n == 0) FAKE_WARN("peer closed the connection with receives pending");
  else FAKE_WARN("recv failed: %s", std::strerror(errno));
  return -1;
}

ncclResult_t progress_recv(Comm* c) {
  while (!c->queue.empty()) {
    if (c->hdr_got < sizeof(WireHeader)) {
      ssize_t n = read_some(c, reinterpret_cast<std::uint8_t*>(&c->hdr) + c->hdr_got, sizeof(WireHeader) - c->hdr_got);
      if (n < 0) return ncclSystemError;
      if (n == 0) return ncclSuccess;
      c->hdr_got += static_cast<std::size_t>(n);
      if (c->hdr_got < sizeof(WireHeader)) return ncclSuccess;
      if (c->hdr.magic != kMagic) {
        FAKE_WARN("bad message header (magic 0x%x)", c->hdr.magic);
        return ncclInternalError;
      }
    }
    if (!c->cur) {
      // Sends match receives in posting order: the oldest receive with a free buffer of this tag.
      for (Req* r : c->queue) {
        for (int i = 0; i < r->n && !c->cur; ++i)
          if (!r->filled[i] && r->tags[i] == c->hdr.tag) {
            c->cur = r;
            c->cur_idx = i;
          }
        if (c->cur) break;
      }
      if (!c->cur) return ncclSuccess;  // no matching receive posted yet: leave data in the socket
      if (c->hdr.size > c->cur->caps[c->cur_idx]) {
        FAKE_WARN("message of %llu bytes (tag %d) exceeds the posted buffer of %zu bytes",
                  static_cast<unsigned long long>(c->hdr.size), c->hdr.tag, c->cur->caps[c->cur_idx]);
        return ncclInternalError;
      }
      c->cur_off = 0;
    }
    Req* r = c->cur;
    std::size_t size = c->hdr.size;
    ssize_t n = read_some(c, r->bufs[c->cur_idx] + c->cur_off, size - c->cur_off);
    if (n < 0) return ncclSystemError;
    c->cur_off += static_cast<std::size_t>(n);
    if (c->cur_off < size) return ncclSuccess;
    if (size > 0 && g_corrupt && !g_corrupted && ++g_nonempty_received >= 3) {
      r->bufs[c->cur_idx][size / 2] ^= 0x5a;
      g_corrupted = true;
      FAKE_INFO("FAKE_CORRUPT: flipped byte %zu of a %zu-byte message", size / 2, size);
    }
    r->got[c->cur_idx] = size;
    r->filled[c->cur_idx] = true;
    c->cur = nullptr;
    c->hdr_got = 0;
    if (++r->nfilled == r->n) {
      r->done = true;
      c->queue.erase(std::find(c->queue.begin(), c->queue.end(), r));
    }
  }
  return ncclSuccess;
}

// ---- entry points (size_t flavour; the v8 table wraps the int ones) ----

ncclResult_t fake_init_common(ncclDebugLogger_t logger) {
  g_log = logger;
  if (const char* ip = std::getenv("FAKE_NET_IP")) {
    in_addr a{};
    if (::inet_pton(AF_INET, ip, &a) != 1) {
      FAKE_WARN("FAKE_NET_IP=%s is not an IPv4 address", ip);
      return ncclInvalidArgument;
    }
    g_ip = a.s_addr;
  }
  if (const char* c = std::getenv("FAKE_CORRUPT")) g_corrupt = std::strcmp(c, "1") == 0;
  if (const char* r = std::getenv("FAKE_RETRY_EVERY")) g_retry_every = std::strtol(r, nullptr, 10);
  if (const char* n = std::getenv("FAKE_DEVICES")) g_ndev = std::clamp(static_cast<int>(std::strtol(n, nullptr, 10)), 1, 4);
  if (const char* r = std::getenv("FAKE_VDEVICE_REFUSE")) g_vdevice_refuse = std::strcmp(r, "1") == 0;
  if (const char* p = std::getenv("FAKE_PROFILE_RETRY")) g_profile_retry = std::strcmp(p, "1") == 0;
  g_hang = std::getenv("FAKE_HANG");
  if (const char* f = std::getenv("FAKE_FAIL_AFTER")) g_fail_after = std::strtol(f, nullptr, 10);
  if (const char* l = std::getenv("FAKE_LEAK_CLOSE")) g_leak_close = std::strcmp(l, "1") == 0;
  if (const char* c = std::getenv("FAKE_CONNECT_FAIL_EVERY")) g_connect_fail_every = std::strtol(c, nullptr, 10);
  char ip[INET_ADDRSTRLEN];
  in_addr a{};
  a.s_addr = g_ip;
  ::inet_ntop(AF_INET, &a, ip, sizeof ip);
  FAKE_INFO("loopback TCP plugin, address %s%s, retry every %ld", ip, g_corrupt ? ", CORRUPTING" : "", g_retry_every);
  return ncclSuccess;
}

ncclResult_t fake_devices(int* ndev) {
  *ndev = g_ndev;
  return ncclSuccess;
}

template <class P>
ncclResult_t fake_props(int dev, P* p) {
  if (!dev_ok(dev)) return ncclInvalidArgument;
  std::memset(p, 0, sizeof *p);
  static char names[4][8] = {"fake0", "fake1", "fake2", "fake3"};
  const FusedDev* fused = dev >= g_ndev ? &g_fused[dev - g_ndev] : nullptr;
  p->name = fused ? g_fused[dev - g_ndev].name : names[dev];
  p->pciPath = nullptr;
  p->guid = 0x66616b6500000001ull;
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 10000 * (fused ? fused->ndevs : 1);
  p->port = 1;
  p->latency = 0;
  p->maxComms = 65536;
  p->maxRecvs = kMaxRecvs;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  if constexpr (requires { p->vProps; }) {
    p->vProps.ndevs = fused ? fused->ndevs : 1;
    for (int i = 0; i < p->vProps.ndevs; ++i) p->vProps.devs[i] = fused ? fused->devs[i] : dev;
    p->maxP2pBytes = NCCL_HA_NET_LEGACY_MAX_P2P_BYTES;
    p->maxCollBytes = NCCL_HA_NET_LEGACY_MAX_COLL_BYTES;
  }
  return ncclSuccess;
}

ncclResult_t fake_listen(int dev, void* handle, void** listenComm) {
  if (!dev_ok(dev)) return ncclInvalidArgument;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ncclSystemError;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = g_ip;
  sa.sin_port = 0;
  socklen_t sl = sizeof sa;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &sl) != 0) {
    FAKE_WARN("listen failed: %s", std::strerror(errno));
    ::close(fd);
    return ncclSystemError;
  }
  Handle h{};
  h.magic = kMagic;
  h.ip = sa.sin_addr.s_addr;
  h.port = sa.sin_port;
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  auto* l = new ListenComm;
  l->fd = fd;
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t fake_connect(int dev, void* handle, void** sendComm) {
  *sendComm = nullptr;
  maybe_hang("connect");
  if (!dev_ok(dev)) return ncclInvalidArgument;
  Handle h;
  std::memcpy(&h, handle, sizeof h);
  if (h.magic != kMagic) {
    FAKE_WARN("connect: not a fake handle");
    return ncclInvalidArgument;
  }
  auto* st = static_cast<ConnectState*>(h.stage);
  if (!st) {
    if (g_connect_fail_every > 0 && ++g_connects % static_cast<unsigned long>(g_connect_fail_every) == 0) {
      FAKE_WARN("connect: failing connection %lu on purpose (FAKE_CONNECT_FAIL_EVERY)", g_connects);
      return ncclSystemError;
    }
    st = new ConnectState;
    st->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = h.ip;
    sa.sin_port = h.port;
    if (st->fd < 0 || (::connect(st->fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS)) {
      FAKE_WARN("connect failed: %s", std::strerror(errno));
      if (st->fd >= 0) ::close(st->fd);
      delete st;
      return ncclSystemError;
    }
    h.stage = st;
    std::memcpy(handle, &h, sizeof h);
    return ncclSuccess;  // always at least one retry, like a real handshake
  }
  if (!st->connected) {
    pollfd p{st->fd, POLLOUT, 0};
    if (::poll(&p, 1, 0) <= 0) return ncclSuccess;
    int err = 0;
    socklen_t el = sizeof err;
    ::getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
      FAKE_WARN("connect failed: %s", std::strerror(err));
      ::close(st->fd);
      h.stage = nullptr;
      std::memcpy(handle, &h, sizeof h);
      delete st;
      return ncclSystemError;
    }
    st->connected = true;
    set_nodelay(st->fd);
  }
  std::uint32_t hello = kMagic;
  ssize_t n = ::send(st->fd, reinterpret_cast<std::uint8_t*>(&hello) + st->hello_sent, sizeof hello - st->hello_sent,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) st->hello_sent += static_cast<std::size_t>(n);
  if (st->hello_sent < sizeof hello) return ncclSuccess;
  auto* c = new Comm;
  c->fd = st->fd;
  c->is_send = true;
  delete st;
  h.stage = nullptr;
  std::memcpy(handle, &h, sizeof h);
  *sendComm = c;
  return ncclSuccess;
}

ncclResult_t fake_accept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l->cfd < 0) {
    l->cfd = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (l->cfd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
      FAKE_WARN("accept failed: %s", std::strerror(errno));
      return ncclSystemError;
    }
    set_nodelay(l->cfd);
    l->hello_got = 0;
  }
  ssize_t n = ::recv(l->cfd, reinterpret_cast<std::uint8_t*>(&l->hello) + l->hello_got, sizeof l->hello - l->hello_got,
                     MSG_DONTWAIT);
  if (n > 0) l->hello_got += static_cast<std::size_t>(n);
  if (l->hello_got < sizeof l->hello) return ncclSuccess;
  if (l->hello != kMagic) {
    FAKE_WARN("accept: bad hello");
    return ncclInternalError;
  }
  auto* c = new Comm;
  c->fd = l->cfd;
  l->cfd = -1;
  *recvComm = c;
  return ncclSuccess;
}

ncclResult_t fake_regmr(void* comm, void* data, std::size_t size, int type, void** mhandle) {
  if (!comm) return ncclInvalidArgument;
  if (type != NCCL_PTR_HOST) {
    FAKE_WARN("regMr: only NCCL_PTR_HOST is supported (type %d)", type);
    return ncclInvalidArgument;
  }
  *mhandle = new Mr{static_cast<const std::uint8_t*>(data), size};
  return ncclSuccess;
}

ncclResult_t fake_regmr_dmabuf(void*, void*, std::size_t, int, std::uint64_t, int, void**) { return ncclInvalidUsage; }

ncclResult_t fake_deregmr(void* comm, void* mhandle) {
  if (!comm || !mhandle) return ncclInvalidArgument;
  delete static_cast<Mr*>(mhandle);
  return ncclSuccess;
}

ncclResult_t fake_isend(void* sendComm, void* data, std::size_t size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  auto* c = static_cast<Comm*>(sendComm);
  if (!c->is_send) return ncclInvalidArgument;
  if (!in_mr(mhandle, data, size)) {
    FAKE_WARN("isend: buffer %p+%zu is not inside its registration", data, size);
    return ncclInvalidArgument;
  }
  if (c->live.size() >= kSendLimit || retry_now()) return ncclSuccess;
  auto* r = new Req{Req::send, c};
  r->data = static_cast<const std::uint8_t*>(data);
  r->size = size;
  r->hdr = WireHeader{kMagic, tag, size};
  c->queue.push_back(r);
  c->live.insert(r);
  *request = r;
  return ncclSuccess;
}

ncclResult_t fake_irecv(void* recvComm, int n, void** data, const std::size_t* sizes, int* tags, void** mhandles,
                        void** request) {
  // An optional-completion hint may be preset; this plugin always completes for real.
  *request = nullptr;
  auto* c = static_cast<Comm*>(recvComm);
  if (c->is_send || n < 1 || n > kMaxRecvs) return ncclInvalidArgument;
  for (int i = 0; i < n; ++i)
    if (!in_mr(mhandles[i], data[i], sizes[i])) {
      FAKE_WARN("irecv: buffer %d (%p+%zu) is not inside its registration", i, data[i], sizes[i]);
      return ncclInvalidArgument;
    }
  if (c->live.size() >= kRecvLimit || retry_now()) return ncclSuccess;
  auto* r = new Req{Req::recv, c};
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->bufs[i] = static_cast<std::uint8_t*>(data[i]);
    r->caps[i] = sizes[i];
    r->tags[i] = tags[i];
  }
  c->queue.push_back(r);
  c->live.insert(r);
  *request = r;
  return ncclSuccess;
}

ncclResult_t fake_iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  auto* c = static_cast<Comm*>(recvComm);
  if (n < 1 || n > kMaxRecvs) return ncclInvalidArgument;
  bool any = false;
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > 0 && !in_mr(mhandles[i], data[i], static_cast<std::size_t>(sizes[i]))) return ncclInvalidArgument;
    any = any || sizes[i] > 0;
  }
  if (!any) return ncclSuccess;
  auto* r = new Req{Req::flush, c};
  r->done = true;  // host memory: nothing to flush, but hand out a request to exercise test()
  c->live.insert(r);
  *request = r;
  return ncclSuccess;
}

ncclResult_t fake_test(void* request, int* done, int* sizes) {
  auto* r = static_cast<Req*>(request);
  *done = 0;
  maybe_hang("test");
  profile_retried_step();
  if (g_fail_after >= 0 && g_completed >= static_cast<unsigned long>(g_fail_after)) {
    FAKE_WARN("FAKE_FAIL_AFTER: failing test() after %lu completed requests", g_completed);
    return ncclSystemError;
  }
  Comm* c = r->comm;
  if (!c->live.count(r)) {
    FAKE_WARN("test: unknown or already completed request %p", request);
    return ncclInternalError;
  }
  if (!r->done) {
    ncclResult_t res = c->is_send ? progress_send(c) : progress_recv(c);
    if (res != ncclSuccess) return res;
  }
  if (!r->done) return ncclSuccess;
  *done = 1;
  ++g_completed;
  if (sizes) {
    if (r->type == Req::recv)
      for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(std::min<std::size_t>(r->got[i], INT_MAX));
    else if (r->type == Req::send)
      sizes[0] = static_cast<int>(std::min<std::size_t>(r->size, INT_MAX));
  }
  c->live.erase(r);
  delete r;
  return ncclSuccess;
}

ncclResult_t close_comm(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  if (c->is_send) maybe_hang("closeSend");
  for (Req* r : c->live) delete r;
  if (c->fd >= 0 && (c->is_send || !g_leak_close)) ::close(c->fd);
  delete c;
  return ncclSuccess;
}

ncclResult_t fake_close_listen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (!l) return ncclSuccess;
  if (l->cfd >= 0) ::close(l->cfd);
  ::close(l->fd);
  delete l;
  return ncclSuccess;
}

#ifdef FAKE_NET_V8
ncclResult_t v8_init(ncclDebugLogger_t logger) { return fake_init_common(logger); }
ncclResult_t v8_props(int dev, ncclNetProperties_v8_t* p) { return fake_props(dev, p); }
ncclResult_t v8_connect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** /*devHandle*/) {
  return fake_connect(dev, handle, sendComm);
}
ncclResult_t v8_accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** /*devHandle*/) {
  return fake_accept(listenComm, recvComm);
}
ncclResult_t v8_isend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) return ncclInvalidArgument;
  return fake_isend(sendComm, data, static_cast<std::size_t>(size), tag, mhandle, request);
}
ncclResult_t v8_irecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (n < 1 || n > kMaxRecvs) return ncclInvalidArgument;
  std::size_t s[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return ncclInvalidArgument;
    s[i] = static_cast<std::size_t>(sizes[i]);
  }
  return fake_irecv(recvComm, n, data, s, tags, mhandles, request);
}
#else
ncclResult_t fake_irecv_consumed(void* recvComm, int n, void* request) {
  // NCCL passes the request test() already completed: only check the arguments.
  if (!recvComm || n < 1 || !request) return ncclInvalidArgument;
  return ncclSuccess;
}

ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  g_prof = prof;
  return fake_init_common(logger);
}
ncclResult_t v10_props(int dev, ncclNetProperties_v10_t* p) { return fake_props(dev, p); }
ncclResult_t v10_connect(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                         ncclNetDeviceHandle_v10_t** /*devHandle*/) {
  if (!config) return ncclInvalidArgument;
  return fake_connect(dev, handle, sendComm);
}
ncclResult_t v10_accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v10_t** /*devHandle*/) {
  return fake_accept(listenComm, recvComm);
}
ncclResult_t v10_isend(void* sendComm, void* data, std::size_t size, int tag, void* mhandle, void* phandle,
                       void** request) {
  const ncclResult_t rc = fake_isend(sendComm, data, size, tag, mhandle, request);
  if (rc == ncclSuccess) profile_retry(phandle, *request);
  return rc;
}
ncclResult_t v10_irecv(void* recvComm, int n, void** data, std::size_t* sizes, int* tags, void** mhandles,
                       void** phandles, void** request) {
  const ncclResult_t rc = fake_irecv(recvComm, n, data, sizes, tags, mhandles, request);
  if (rc == ncclSuccess && phandles) profile_retry(phandles[0], *request);
  return rc;
}

// Fuses up to 4 distinct physical devices into a new one (its number after the physical ones and
// those made before), as net_ib does; one device is that device; FAKE_VDEVICE_REFUSE=1 refuses.
ncclResult_t v10_make_vdevice(int* d, ncclNetVDeviceProps_v10_t* props) {
  if (!d || !props || props->ndevs < 1 || props->ndevs > 4) return ncclInvalidArgument;
  for (int i = 0; i < props->ndevs; ++i) {
    if (props->devs[i] < 0 || props->devs[i] >= g_ndev) return ncclInvalidArgument;
    for (int k = 0; k < i; ++k)
      if (props->devs[k] == props->devs[i]) return ncclInvalidArgument;
  }
  if (props->ndevs == 1) {
    *d = props->devs[0];
    return ncclSuccess;
  }
  if (g_vdevice_refuse) {
    FAKE_INFO("makeVDevice: refused (FAKE_VDEVICE_REFUSE=1)");
    return ncclInvalidUsage;
  }
  if (g_nfused == 8) return ncclInvalidUsage;
  FusedDev& f = g_fused[g_nfused];
  f.ndevs = props->ndevs;
  std::string name;
  for (int i = 0; i < f.ndevs; ++i) {
    f.devs[i] = props->devs[i];
    name += (i ? "+fake" : "fake") + std::to_string(f.devs[i]);
  }
  std::snprintf(f.name, sizeof f.name, "%s", name.c_str());
  *d = g_ndev + g_nfused++;
  return ncclSuccess;
}

constexpr ncclNet_v10_t kV10 = {
    "Fake", v10_init, fake_devices, v10_props, fake_listen, v10_connect, v10_accept, fake_regmr, fake_regmr_dmabuf,
    fake_deregmr, v10_isend, v10_irecv, fake_iflush, fake_test, close_comm, close_comm, fake_close_listen,
    /*getDeviceMr=*/nullptr, fake_irecv_consumed, v10_make_vdevice};
#ifdef FAKE_NET_LAZY
ncclResult_t lazy_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof);
// What the lazy library exports: name and init, every other slot NULL until init.
constexpr ncclNet_v10_t lazy_table() {
  ncclNet_v10_t t{};
  t.name = "Fake";
  t.init = lazy_init;
  return t;
}
#endif
#endif

}  // namespace

extern "C" {
#ifdef FAKE_NET_V8
__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    "Fake", v8_init, fake_devices, v8_props, fake_listen, v8_connect, v8_accept, fake_regmr, fake_regmr_dmabuf,
    fake_deregmr, v8_isend, v8_irecv, fake_iflush, fake_test, close_comm, close_comm, fake_close_listen,
    /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr};
#elif defined(FAKE_NET_LAZY)
__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = lazy_table();
#else
__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = kV10;
#endif
}

#ifdef FAKE_NET_LAZY
namespace {

// Installs kV10 (keeping lazy_init as init), less the slots FAKE_LAZY_NULL names.
ncclResult_t lazy_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  const ncclResult_t r = v10_init(logger, prof);
  if (r != ncclSuccess) return r;
  const char* env = std::getenv("FAKE_LAZY_NULL");
  const std::string nulls = "," + std::string(env ? env : "") + ",";
  ncclNet_v10_t t = kV10;
  t.init = lazy_init;
#define FAKE_LAZY_SLOT(slot) \
  if (nulls.find("," #slot ",") != std::string::npos) t.slot = nullptr;
  FAKE_LAZY_SLOT(devices) FAKE_LAZY_SLOT(getProperties) FAKE_LAZY_SLOT(listen) FAKE_LAZY_SLOT(connect)
  FAKE_LAZY_SLOT(accept) FAKE_LAZY_SLOT(regMr) FAKE_LAZY_SLOT(deregMr) FAKE_LAZY_SLOT(isend) FAKE_LAZY_SLOT(irecv)
  FAKE_LAZY_SLOT(iflush) FAKE_LAZY_SLOT(test) FAKE_LAZY_SLOT(closeSend) FAKE_LAZY_SLOT(closeRecv)
  FAKE_LAZY_SLOT(closeListen)
#undef FAKE_LAZY_SLOT
  ncclNetPlugin_v10 = t;
  return ncclSuccess;
}

}  // namespace
#endif
