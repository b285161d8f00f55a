// libnccl-net-ha.so loaded the way NCCL loads it, on a host without RDMA devices, plus the
// connection-handle checks.
#define BOOST_TEST_MODULE plugin
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>

#include <boost/test/unit_test.hpp>
#include <cstdarg>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "nccl_net_abi.h"
#include "setup/handle.hpp"

namespace {

std::vector<std::string> g_lines;

__attribute__((format(printf, 5, 6))) void capture(ncclDebugLogLevel level, unsigned long flags, const char*, int,
                                                     const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_lines.push_back(std::to_string(level) + " " + std::to_string(flags) + " " + buf);
}

struct Loaded {
  void* lib = dlopen(NCCL_HA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ~Loaded() {
    if (lib) dlclose(lib);
  }
  template <class T>
  T* sym(const char* name) {
    return static_cast<T*>(dlsym(lib, name));
  }
};

// The library's v12 table, initialised with the capturing logger (its lines from here on in g_lines).
ncclNet_v12_t* init_v12(Loaded& p, void** ctx) {
  BOOST_REQUIRE(p.lib);
  auto* v12 = p.sym<ncclNet_v12_t>("ncclNetPlugin_v12");
  BOOST_REQUIRE(v12);
  g_lines.clear();
  BOOST_REQUIRE_EQUAL(v12->init(ctx, 1, nullptr, capture, nullptr), ncclSuccess);
  return v12;
}

nccl_ha::plugin::Handle good_handle() {
  nccl_ha::plugin::Handle h{};
  h.magic = nccl_ha::plugin::kHandleMagic;
  h.version = nccl_ha::plugin::kHandleVersion;
  h.length = sizeof h;
  h.family = AF_INET;
  h.port = 4242;
  const unsigned char v4[4] = {10, 30, 0, 1};
  std::memcpy(h.addr, v4, sizeof v4);
  h.token = 0x1234;
  h.secret[0] = 1;
  h.members = 1;
  return h;
}

}  // namespace

BOOST_AUTO_TEST_CASE(exports_every_version_and_nothing_else) {
  Loaded p;
  BOOST_REQUIRE_MESSAGE(p.lib, dlerror());
  for (int v = 6; v <= 12; ++v) {
    auto name = "ncclNetPlugin_v" + std::to_string(v);
    BOOST_TEST(dlsym(p.lib, name.c_str()) != nullptr, name);
  }
  BOOST_TEST(dlsym(p.lib, "ncclNetPlugin_v13") == nullptr);
  auto* v12 = p.sym<ncclNet_v12_t>("ncclNetPlugin_v12");
  BOOST_TEST(std::string(v12->name) == "HA");
  BOOST_TEST(v12->finalize != nullptr);       // mandatory from v11
  BOOST_TEST(v12->irecvConsumed == nullptr);  // must stay NULL (see abi/README.md)
}

BOOST_AUTO_TEST_CASE(init_without_devices_and_bad_device_indices) {
  Loaded p;
  void* ctx = nullptr;
  auto* net = init_v12(p, &ctx);
  BOOST_TEST(ctx != nullptr);
  int ndev = -1;
  BOOST_REQUIRE_EQUAL(net->devices(&ndev), ncclSuccess);
  BOOST_TEST(ndev == 0);  // this host has no RDMA device
  ncclNetProperties_v12_t props{};
  g_lines.clear();
  BOOST_TEST(net->getProperties(0, &props) == ncclInvalidArgument);
  BOOST_TEST(net->getProperties(-1, &props) == ncclInvalidArgument);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  BOOST_TEST(net->listen(ctx, 3, handle, &listen_comm) == ncclInvalidArgument);
  BOOST_TEST(listen_comm == nullptr);
  bool warned = false;
  for (const auto& l : g_lines)
    if (l.find("NET/HA") != std::string::npos && l.find("out of range") != std::string::npos &&
        l.rfind(std::to_string(NCCL_LOG_WARN) + " " + std::to_string(NCCL_NET), 0) == 0)
      warned = true;
  BOOST_TEST(warned, "a WARN line on the NET subsystem names the bad device index");
  // A pointer that is no context of ours: refused with a WARN, never dereferenced.
  int not_a_context = 0;
  g_lines.clear();
  BOOST_TEST(net->listen(&not_a_context, 0, handle, &listen_comm) == ncclInvalidArgument);
  BOOST_TEST(net->finalize(&not_a_context) == ncclInvalidArgument);
  BOOST_TEST(g_lines.size() == 2u);
  for (const auto& l : g_lines) BOOST_TEST(l.find("is not a context of this plugin") != std::string::npos, l);
  BOOST_TEST(net->finalize(ctx) == ncclSuccess);
  BOOST_TEST(net->finalize(ctx) == ncclInvalidArgument, "a context is finalized once");
}

// makeVDevice through the exported tables: more members than the version's vProps holds (4 before
// v12, 8 in v12), a port that is not there, null arguments: refused, each with its WARN, nothing made.
BOOST_AUTO_TEST_CASE(make_vdevice_refuses_what_it_cannot_fuse) {
  Loaded p;
  void* ctx = nullptr;
  auto* v12 = init_v12(p, &ctx);
  auto* v9 = p.sym<ncclNet_v9_t>("ncclNetPlugin_v9");
  auto warned = [](const std::string& text) {
    for (const auto& l : g_lines)
      if (l.rfind(std::to_string(NCCL_LOG_WARN) + " ", 0) == 0 && l.find(text) != std::string::npos) return true;
    return false;
  };
  int d = -7;
  ncclNetVDeviceProps_v12_t p12{};
  p12.ndevs = 9;
  g_lines.clear();
  BOOST_TEST(v12->makeVDevice(&d, &p12) == ncclInvalidUsage);
  BOOST_TEST(warned("makeVDevice: 9 devices, this API version's vProps holds 8"));
  ncclNetVDeviceProps_v9_t p9{};
  p9.ndevs = 5;
  BOOST_TEST(v9->makeVDevice(&d, &p9) == ncclInvalidUsage);
  BOOST_TEST(warned("makeVDevice: 5 devices, this API version's vProps holds 4"));
  p9.ndevs = -1;
  BOOST_TEST(v9->makeVDevice(&d, &p9) == ncclInvalidUsage);
  p12.ndevs = 2;
  p12.devs[0] = 0;
  p12.devs[1] = 1;
  BOOST_TEST(v12->makeVDevice(&d, &p12) == ncclInvalidUsage);
  BOOST_TEST(warned("makeVDevice [0,1]: device 0 is no port of this plugin (it has 0)"));
  BOOST_TEST(v12->makeVDevice(nullptr, &p12) == ncclInvalidArgument);
  BOOST_TEST(v12->makeVDevice(&d, nullptr) == ncclInvalidArgument);
  BOOST_TEST(d == -7, "nothing made");
  BOOST_TEST(v12->finalize(ctx) == ncclSuccess);
}

// Every setting at init, in lines NCCL's logger does not cut (its buffer is 1024 bytes, its prefix
// included): each "NET/HA: settings:" line well below that, together naming the first and the last.
BOOST_AUTO_TEST_CASE(the_settings_lines_fit_nccls_log_buffer) {
  Loaded p;
  void* ctx = nullptr;
  ::setenv("HA_NCCL_DEBUG", "1", 1);  // INFO lines reach the logger (as ha-ping --list has them)
  auto* v12 = init_v12(p, &ctx);
  ::unsetenv("HA_NCCL_DEBUG");
  std::string all;
  int n = 0;
  for (const auto& l : g_lines)
    if (const auto at = l.find("NET/HA: settings: "); at != std::string::npos) {
      ++n;
      BOOST_TEST(l.size() - at < 900u, l);
      all += l.substr(at + 18) + " ";
    }
  BOOST_TEST(n >= 2);
  for (const char* want : {"HA_NCCL_MAX_POLL=", "HA_NCCL_FORCE_FLUSH=", "HA_NCCL_IB_TC=", "HA_NCCL_STRIPE_WEIGHTS_FILE=",
                           "HA_NCCL_IB_AR_THRESHOLD="})
    BOOST_TEST(all.find(want) != std::string::npos, want << " in " << all);
  BOOST_TEST(v12->finalize(ctx) == ncclSuccess);
}

BOOST_AUTO_TEST_CASE(v6_table_initializes_too) {
  Loaded p;
  BOOST_REQUIRE(p.lib);
  auto* net = p.sym<ncclNet_v6_t>("ncclNetPlugin_v6");
  BOOST_REQUIRE_EQUAL(net->init(capture), ncclSuccess);
  int ndev = -1;
  BOOST_REQUIRE_EQUAL(net->devices(&ndev), ncclSuccess);
  BOOST_TEST(ndev == 0);
}

BOOST_AUTO_TEST_CASE(handle_validation) {
  using nccl_ha::Errc;
  using nccl_ha::plugin::validate_handle;
  BOOST_TEST(validate_handle(good_handle()).ok());
  auto h = good_handle();
  h.magic ^= 1;
  BOOST_TEST((validate_handle(h).error().code == Errc::bad_magic));
  h = good_handle();
  h.version = nccl_ha::plugin::kHandleVersion + 1;
  BOOST_TEST((validate_handle(h).error().code == Errc::bad_version));
  h.version = 1;  // the layout before control records carried checksums: refused, not half understood
  BOOST_TEST((validate_handle(h).error().code == Errc::bad_version));
  h = good_handle();
  h.length = 64;
  BOOST_TEST((validate_handle(h).error().code == Errc::truncated));
  h = good_handle();
  h.token = 0;
  BOOST_TEST((validate_handle(h).error().code == Errc::bad_token));
  h = good_handle();
  h.port = 0;
  BOOST_TEST(!validate_handle(h).ok());
  h = good_handle();
  h.family = 99;
  BOOST_TEST(!validate_handle(h).ok());
  BOOST_TEST(sizeof(nccl_ha::plugin::Handle) <= NCCL_NET_HANDLE_MAXSIZE);
}

BOOST_AUTO_TEST_CASE(handle_addresses_ipv4_ipv6_and_scoped) {
  using nccl_ha::plugin::handle_address;
  auto h = good_handle();
  const unsigned char v4[4] = {10, 30, 0, 1};
  std::memcpy(h.addr, v4, sizeof v4);
  BOOST_TEST(handle_address(h) == "10.30.0.1:4242");
  h.family = AF_INET6;
  BOOST_REQUIRE(inet_pton(AF_INET6, "fd00:aa::1", h.addr) == 1);
  BOOST_TEST(handle_address(h) == "[fd00:aa::1]:4242");
  // Link-local: the listener's interface index travels in the handle (offset 48).
  BOOST_TEST(offsetof(nccl_ha::plugin::Handle, scope_id) == 48u);
  BOOST_REQUIRE(inet_pton(AF_INET6, "fe80::1", h.addr) == 1);
  h.scope_id = 1;
  const std::string a = handle_address(h);
  BOOST_TEST(a.rfind("[fe80::1%", 0) == 0u, a);
  BOOST_TEST(a.substr(a.size() - 6) == "]:4242", a);
}
