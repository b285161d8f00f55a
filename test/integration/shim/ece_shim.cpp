// Test-only (never installed, never in a package): ECE on Soft-RoCE for the VM test plugin-ece.
// LD_PRELOAD it into a process that loads libnccl-net-ha.so.
//
// Soft-RoCE has no Enhanced Connection Establishment: ibv_query_ece / ibv_set_ece answer
// EOPNOTSUPP, so on the bed the plugin's ECE exchange (net/ece.hpp, net_ib's) would never run.
// This shim stands in for a device that has it, as mlx5 does, and nothing else:
//   - HA_TEST_ECE_OPTIONS (an integer, e.g. 0x3c): the options this "device" supports. Unset or
//     empty: unsupported (EOPNOTSUPP), as rxe answers.
//   - ibv_query_ece (the plugin resolves it with dlvsym, IBVERBS_1.10; this dlvsym answers that
//     name and ibv_set_ece with the shim's, every other lookup goes on to libc's): vendor 0x15b3,
//     the supported options until the QP reached RTR with an ECE set, the reduced ECE after that;
//   - ibv_set_ece: stores the options for the next transition to RTR (mlx5 passes them with the
//     modify command); another vendor id or a comp_mask is EINVAL, and so is a set on a QP that is
//     already past INIT (too late: the device would ignore it);
//   - ibv_modify_qp to RTR: the real transition; the QP's ECE becomes the options set AND the
//     supported ones (the device's reduction);
//   - ibv_destroy_qp forgets the QP.
// HA_TEST_ECE_LOG (a file): one line per call, for checks/plugin_ece.py:
//   query qp=N dev=D options=0xX | unsupported
//   set qp=N dev=D options=0xX [late|bad]
//   rtr qp=N dev=D dest=M set=none|0xX ece=0xX
// What is real: the plugin's calls, their order against the QP's transitions, the values it puts
// in its endpoints and handshakes, on every path (primary, standby, re-protected). What is
// emulated: the device's support and its reduction (an AND of the two option sets).
#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace {

constexpr std::uint32_t kVendor = 0x15b3;

struct QpEce {
  std::optional<std::uint32_t> set;      // the options set before RTR
  std::optional<std::uint32_t> reduced;  // after RTR with a set
  bool past_init = false;
};

std::mutex g_mutex;
std::unordered_map<const ibv_qp*, QpEce> g_qps;  // under g_mutex

using DlvsymFn = void* (*)(void*, const char*, const char*);
using ModifyFn = int (*)(ibv_qp*, ibv_qp_attr*, int);
using DestroyFn = int (*)(ibv_qp*);

DlvsymFn real_dlvsym() {
  static const DlvsymFn fn = reinterpret_cast<DlvsymFn>(dlsym(RTLD_NEXT, "dlvsym"));
  return fn;
}

// libibverbs' own: the plugin loads it in its local scope (dlopen), where RTLD_NEXT does not look.
void* verbs_lib() {
  static void* const lib = [] {
    void* h = dlopen("libibverbs.so.1", RTLD_NOW);
    if (!h) std::abort();
    return h;
  }();
  return lib;
}

ModifyFn real_modify() {
  static const ModifyFn fn = reinterpret_cast<ModifyFn>(real_dlvsym()(verbs_lib(), "ibv_modify_qp", "IBVERBS_1.1"));
  return fn;
}

DestroyFn real_destroy() {
  static const DestroyFn fn = reinterpret_cast<DestroyFn>(real_dlvsym()(verbs_lib(), "ibv_destroy_qp", "IBVERBS_1.1"));
  return fn;
}

std::optional<std::uint32_t> supported() {
  static const std::optional<std::uint32_t> options = []() -> std::optional<std::uint32_t> {
    const char* v = std::getenv("HA_TEST_ECE_OPTIONS");
    if (!v || !*v) return std::nullopt;
    return static_cast<std::uint32_t>(std::strtoul(v, nullptr, 0));
  }();
  return options;
}

// Opened when the shim is loaded, before the process counts its fds (ha-net-driver checks that
// finalize gives back every fd init took).
int g_log_fd = -1;
__attribute__((constructor)) void open_log() {
  const char* path = std::getenv("HA_TEST_ECE_LOG");
  if (path && *path) g_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char* fmt, ...) {
  const int fd = g_log_fd;
  if (fd < 0) return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  const std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(n), sizeof line - 2);
  line[len] = '\n';
  (void)!write(fd, line, len + 1);  // O_APPEND: one line per write
}

const char* dev_of(const ibv_qp* qp) { return qp->context->device->name; }

int shim_query_ece(ibv_qp* qp, ibv_ece* ece) {
  const auto options = supported();
  if (!options) {
    note("query qp=%u dev=%s unsupported", qp->qp_num, dev_of(qp));
    return EOPNOTSUPP;
  }
  std::uint32_t now = *options;
  {
    const std::lock_guard<std::mutex> lock(g_mutex);
    if (const auto it = g_qps.find(qp); it != g_qps.end() && it->second.reduced) now = *it->second.reduced;
  }
  ece->vendor_id = kVendor;
  ece->options = now;
  ece->comp_mask = 0;
  note("query qp=%u dev=%s options=0x%x", qp->qp_num, dev_of(qp), now);
  return 0;
}

int shim_set_ece(ibv_qp* qp, ibv_ece* ece) {
  if (!supported()) return EOPNOTSUPP;
  if (ece->vendor_id != kVendor || ece->comp_mask != 0) {
    note("set qp=%u dev=%s options=0x%x bad", qp->qp_num, dev_of(qp), ece->options);
    return EINVAL;
  }
  const std::lock_guard<std::mutex> lock(g_mutex);
  QpEce& q = g_qps[qp];
  if (q.past_init) {
    note("set qp=%u dev=%s options=0x%x late", qp->qp_num, dev_of(qp), ece->options);
    return EINVAL;
  }
  q.set = ece->options;
  note("set qp=%u dev=%s options=0x%x", qp->qp_num, dev_of(qp), ece->options);
  return 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* dlvsym(void* handle, const char* symbol, const char* version) {
  if (std::strcmp(symbol, "ibv_query_ece") == 0) return reinterpret_cast<void*>(&shim_query_ece);
  if (std::strcmp(symbol, "ibv_set_ece") == 0) return reinterpret_cast<void*>(&shim_set_ece);
  return real_dlvsym()(handle, symbol, version);
}

__attribute__((visibility("default"))) int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  const int rc = real_modify()(qp, attr, mask);
  if (rc != 0 || !(mask & IBV_QP_STATE) || attr->qp_state == IBV_QPS_INIT || attr->qp_state == IBV_QPS_RESET) return rc;
  const std::lock_guard<std::mutex> lock(g_mutex);
  QpEce& q = g_qps[qp];
  q.past_init = true;
  if (attr->qp_state != IBV_QPS_RTR) return rc;
  const auto options = supported();
  if (q.set && options) q.reduced = *q.set & *options;
  char set[16] = "none";
  if (q.set) std::snprintf(set, sizeof set, "0x%x", *q.set);
  note("rtr qp=%u dev=%s dest=%u set=%s ece=0x%x", qp->qp_num, dev_of(qp), attr->dest_qp_num, set,
       q.reduced.value_or(0));
  return rc;
}

__attribute__((visibility("default"))) int ibv_destroy_qp(ibv_qp* qp) {
  {
    const std::lock_guard<std::mutex> lock(g_mutex);
    g_qps.erase(qp);
  }
  return real_destroy()(qp);
}

}  // extern "C"
