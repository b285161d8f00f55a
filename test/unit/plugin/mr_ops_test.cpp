// Registration of NCCL's buffers without RDMA: the dma-buf probe's decision for each errno and for
// a libibverbs without the symbol, the DMABUF offer rule, NCCL's relaxed-ordering rule, the
// per-device decision at init, and the arguments MrCache passes to the injected verbs table
// (dma-buf offset / iova / length / fd / access, relaxed ordering through ibv_reg_mr_iova2, the
// cache never mixing dma-buf and ordinary registrations of the same addresses), and the fd owner.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include <filesystem>

#include "core/comm.hpp"
#include "datapath/p2p.hpp"
#include "ha/rebind.hpp"
#include "runtime/config.hpp"
#include "runtime/device.hpp"
#include "runtime/mr_ops.hpp"
#include "test_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using namespace nccl_ha::test;

namespace {

// What the fake verbs saw. One test at a time (Boost.Test runs them in sequence).
struct Call {
  std::string fn;
  std::uint64_t offset = 0, length = 0, iova = 0;
  std::uintptr_t addr = 0;
  int fd = -2;
  int access = 0;
};
struct Fake {
  int probe_errno = EBADF;  // what reg_dmabuf_mr fails with when fd is -1
  bool fail_all = false;    // every registration fails (ENOMEM)
  std::vector<Call> calls;
  std::array<ibv_mr, 16> mrs{};
  std::size_t next = 0;
  int deregs = 0;
  ibv_mr* make() {
    ibv_mr* m = &mrs.at(next);
    m->lkey = m->rkey = static_cast<std::uint32_t>(100 + next++);
    return m;
  }
};
Fake g;

ibv_mr* fake_reg_mr(ibv_pd*, void* addr, std::size_t length, int access) {
  g.calls.push_back({"reg_mr", 0, length, 0, reinterpret_cast<std::uintptr_t>(addr), -2, access});
  if (g.fail_all) return errno = ENOMEM, nullptr;
  return g.make();
}
ibv_mr* fake_reg_mr_iova2(ibv_pd*, void* addr, std::size_t length, std::uint64_t iova, unsigned access) {
  g.calls.push_back({"reg_mr_iova2", 0, length, iova, reinterpret_cast<std::uintptr_t>(addr), -2, static_cast<int>(access)});
  if (g.fail_all) return errno = ENOMEM, nullptr;
  return g.make();
}
ibv_mr* fake_reg_dmabuf_mr(ibv_pd*, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd, int access) {
  g.calls.push_back({"reg_dmabuf_mr", offset, length, iova, 0, fd, access});
  if (fd == -1) return errno = g.probe_errno, nullptr;
  if (g.fail_all) return errno = EOPNOTSUPP, nullptr;
  return g.make();
}
int fake_dereg_mr(ibv_mr*) {
  ++g.deregs;
  return 0;
}

MrOps fake_ops(bool iova2 = true, bool dmabuf = true) {
  MrOps ops;
  ops.reg_mr = &fake_reg_mr;
  ops.reg_mr_iova2 = iova2 ? &fake_reg_mr_iova2 : nullptr;
  ops.reg_dmabuf_mr = dmabuf ? &fake_reg_dmabuf_mr : nullptr;
  ops.dereg_mr = &fake_dereg_mr;
  return ops;
}

struct FreshFake {
  FreshFake() { g = Fake{}; }
};

ibv_mr* refusing_reg_dmabuf_mr(ibv_pd*, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd, int access) {
  g.calls.push_back({"refused", offset, length, iova, 0, fd, access});
  return errno = EOPNOTSUPP, nullptr;
}

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A device whose registrations go through `ops` (no verbs context, no PD: the fakes ignore it).
std::unique_ptr<Device> fake_device(const char* name, const MrOps& ops, bool relaxed_ordering) {
  auto d = std::make_unique<Device>();
  d->port.device = name;
  d->port.port = 1;
  d->mrs = std::make_unique<MrCache>(nullptr, ops);
  d->dmabuf = d->dmabuf_offered = true;
  d->relaxed_ordering = relaxed_ordering;
  return d;
}

// A file standing in for a dma-buf: fstat gives it an identity (memfd: its own inode).
UniqueFd fake_dmabuf() { return UniqueFd(memfd_create("fake-dmabuf", MFD_CLOEXEC)); }

const std::uintptr_t kPage = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

}  // namespace

BOOST_AUTO_TEST_SUITE(dmabuf_probe)

BOOST_FIXTURE_TEST_CASE(each_errno_decides_as_nccl_does, FreshFake) {
  const MrOps ops = fake_ops();
  struct Case { int err; bool supported; };
  for (const Case& c : {Case{EOPNOTSUPP, false}, Case{EPROTONOSUPPORT, false}, Case{EBADF, true}, Case{EINVAL, true},
                        Case{ENOMEM, true}}) {
    BOOST_TEST_CONTEXT("errno " << c.err) {
      g.probe_errno = c.err;
      g.calls.clear();
      const DmabufProbe p = probe_dmabuf(ops, nullptr);
      BOOST_TEST(p.supported == c.supported);
      BOOST_TEST(p.why.find(std::strerror(c.err)) != std::string::npos, p.why);
      BOOST_REQUIRE(g.calls.size() == 1u);  // the probe: offset 0, length 0, iova 0, fd -1, access 0
      const Call& k = g.calls[0];
      BOOST_TEST((k.fn == "reg_dmabuf_mr" && k.offset == 0 && k.length == 0 && k.iova == 0 && k.fd == -1 && k.access == 0));
    }
  }
}

BOOST_FIXTURE_TEST_CASE(a_library_without_the_symbol_is_unsupported, FreshFake) {
  const DmabufProbe p = probe_dmabuf(fake_ops(true, false), nullptr);
  BOOST_TEST(!p.supported);
  BOOST_TEST(p.why.find("no ibv_reg_dmabuf_mr") != std::string::npos, p.why);
  BOOST_TEST(g.calls.empty());
}

BOOST_AUTO_TEST_CASE(the_offer_needs_support_and_the_setting) {
  Config c;
  BOOST_TEST(offer_dmabuf(true, c));  // default: NCCL_DMABUF_ENABLE=1
  BOOST_TEST(!offer_dmabuf(false, c));
  c.dmabuf_enable = 0;
  BOOST_TEST(!offer_dmabuf(true, c));
  BOOST_TEST(!offer_dmabuf(false, c));
}

BOOST_AUTO_TEST_CASE(relaxed_ordering_rule) {
  for (int mode : {-1, 0, 1, 2, 3})
    for (bool capable : {false, true}) {
      BOOST_TEST(relaxed_ordering_on(mode, capable) == ((mode == 1 || mode == 2) && capable),
                 "mode " << mode << " capable " << capable);
      // a device without PCIe DMA (Soft-RoCE): only forced (1), never auto
      BOOST_TEST(relaxed_ordering_on(mode, capable, false) == (mode == 1 && capable),
                 "mode " << mode << " capable " << capable << " software device");
    }
  BOOST_TEST(relaxed_ordering_capable(fake_ops(true)));
  BOOST_TEST(!relaxed_ordering_capable(fake_ops(false)));
}

// The per-device decision at init: the fields getProperties and the INIT line read, and the lines
// `ha-ping --list` and the VM checks look for.
BOOST_FIXTURE_TEST_CASE(decided_per_device_at_init, FreshFake) {
  LogCapture log;
  Device d;
  d.port.device = "fake0";
  d.port.port = 1;
  Config c;
  g.probe_errno = EOPNOTSUPP;  // Soft-RoCE's answer
  decide_registration(c, fake_ops(), d, true);
  BOOST_TEST((!d.dmabuf && !d.dmabuf_offered && d.relaxed_ordering));
  BOOST_TEST(log.count(LogLevel::info, {"fake0:1: dma-buf unsupported (ibv_reg_dmabuf_mr probe: "}) == 1u, log.dump());
  BOOST_TEST(log.count(LogLevel::info, {"relaxed ordering on for NCCL's buffers (NCCL_IB_PCI_RELAXED_ORDERING=2: auto"}) ==
             1u, log.dump());
  log.clear();
  g.probe_errno = EBADF;
  c.dmabuf_enable = 0;
  c.dmabuf_enable_var = "HA_NCCL_DMABUF_ENABLE";
  c.relaxed_ordering = 1;
  decide_registration(c, fake_ops(false), d, true);  // forced on, but no ibv_reg_mr_iova2
  BOOST_TEST((d.dmabuf && !d.dmabuf_offered && !d.relaxed_ordering));
  BOOST_TEST(log.count(LogLevel::info, {"fake0:1: dma-buf supported", "not offered: HA_NCCL_DMABUF_ENABLE=0"}) == 1u,
             log.dump());
  BOOST_TEST(log.count(LogLevel::warn, {"NCCL_IB_PCI_RELAXED_ORDERING=1", "no ibv_reg_mr_iova2"}) == 1u, log.dump());
  c.dmabuf_enable = 1;
  c.relaxed_ordering = 0;
  decide_registration(c, fake_ops(), d, false);
  BOOST_TEST((d.dmabuf && d.dmabuf_offered && !d.relaxed_ordering));
  // Soft-RoCE: auto leaves it off (its own line says why), 1 forces it on.
  log.clear();
  d.port.vendor_id = 0xffffff;
  c.relaxed_ordering = 2;
  decide_registration(c, fake_ops(), d, true);
  BOOST_TEST(!d.relaxed_ordering);
  BOOST_TEST(log.count(LogLevel::info, {"fake0:1: relaxed ordering off: Soft-RoCE"}) == 1u, log.dump());
  BOOST_TEST(log.count(LogLevel::info, {"relaxed ordering on for NCCL's buffers (NCCL_IB_PCI_RELAXED_ORDERING=2: auto",
                                        "; Soft-RoCE devices off)"}) == 1u, log.dump());
  c.relaxed_ordering = 1;
  decide_registration(c, fake_ops(), d, false);
  BOOST_TEST(d.relaxed_ordering);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(mr_cache_registration)

// regMrDmaBuf of an address inside a page: the whole pages are registered, iova = the first page's
// address, the dma-buf offset moved back by the same amount, the fd and access as given.
BOOST_FIXTURE_TEST_CASE(dmabuf_arguments, FreshFake) {
  const MrOps ops = fake_ops();
  MrCache cache(nullptr, ops);
  UniqueFd buf = fake_dmabuf();
  BOOST_REQUIRE(buf);
  const std::uintptr_t base = 64 * kPage;
  void* data = reinterpret_cast<void*>(base + 0x100);
  const int access = kAccess | IBV_ACCESS_RELAXED_ORDERING;
  const DmaBuf d{buf.get(), 2 * kPage + 0x100};
  auto mr = cache.acquire(data, 2 * kPage, access, &d);
  BOOST_REQUIRE(mr.ok());
  BOOST_REQUIRE(g.calls.size() == 1u);
  const Call& k = g.calls[0];
  BOOST_TEST(k.fn == "reg_dmabuf_mr");
  BOOST_TEST(k.offset == 2 * kPage);
  BOOST_TEST(k.iova == base);
  BOOST_TEST(k.length == 3 * kPage);  // 0x100 + 2 pages spans three pages
  BOOST_TEST(k.fd == buf.get());
  BOOST_TEST(k.access == access);
  BOOST_TEST((*mr)->mr->lkey == 100u);
  // The same dma-buf at a consistent offset, inside: the cached registration.
  const DmaBuf inner{buf.get(), 3 * kPage};
  auto again = cache.acquire(reinterpret_cast<void*>(base + kPage), kPage, access, &inner);
  BOOST_TEST((again.ok() && *again == *mr));
  BOOST_TEST(g.calls.size() == 1u);
  // The same addresses as ordinary memory, another dma-buf, or an inconsistent offset: new ones.
  BOOST_TEST(cache.acquire(data, kPage, access).ok());
  BOOST_TEST(g.calls.back().fn == "reg_mr_iova2");
  UniqueFd other = fake_dmabuf();
  const DmaBuf o{other.get(), 2 * kPage + 0x100};
  BOOST_TEST(cache.acquire(data, kPage, access, &o).ok());
  const DmaBuf shifted{buf.get(), 5 * kPage + 0x100};
  BOOST_TEST(cache.acquire(data, kPage, access, &shifted).ok());
  BOOST_TEST(g.calls.size() == 4u);
  BOOST_TEST(g.calls.back().offset == 5 * kPage);
  BOOST_TEST(cache.size() == 4u);
  // An offset smaller than the address's offset in its page cannot be moved back: refused.
  const DmaBuf bad{buf.get(), 0x80};
  BOOST_TEST(!cache.acquire(data, kPage, access, &bad).ok());
  BOOST_TEST(g.calls.size() == 4u);
  cache.release(*again);
  BOOST_TEST(g.deregs == 0);
  cache.release(*mr);
  BOOST_TEST(g.deregs == 1);  // the last reference deregisters through the table
}

// Ordinary memory: ibv_reg_mr without relaxed ordering, ibv_reg_mr_iova2 (iova = address) with it.
BOOST_FIXTURE_TEST_CASE(relaxed_ordering_takes_reg_mr_iova2, FreshFake) {
  const MrOps ops = fake_ops();
  MrCache cache(nullptr, ops);
  void* data = reinterpret_cast<void*>(16 * kPage);
  BOOST_TEST(cache.acquire(data, kPage, kAccess).ok());
  BOOST_TEST((g.calls.back().fn == "reg_mr" && g.calls.back().access == kAccess && g.calls.back().length == kPage));
  BOOST_TEST(cache.acquire(data, kPage, kAccess | IBV_ACCESS_RELAXED_ORDERING).ok());  // not the same entry
  const Call& k = g.calls.back();
  BOOST_TEST((k.fn == "reg_mr_iova2" && k.iova == 16 * kPage && k.addr == 16 * kPage &&
              k.access == (kAccess | IBV_ACCESS_RELAXED_ORDERING)));
  BOOST_TEST(cache.size() == 2u);
}

BOOST_FIXTURE_TEST_CASE(a_refusal_names_the_call_and_leaves_nothing, FreshFake) {
  LogCapture log;
  const MrOps ops = fake_ops();
  MrCache cache(nullptr, ops);
  UniqueFd buf = fake_dmabuf();
  g.fail_all = true;
  const DmaBuf d{buf.get(), 0};
  auto mr = cache.acquire(reinterpret_cast<void*>(8 * kPage), kPage, kAccess, &d);
  BOOST_REQUIRE(!mr.ok());
  const std::string m = mr.error().message;
  BOOST_TEST(m.find("ibv_reg_dmabuf_mr(fd " + std::to_string(buf.get()) + ", offset 0, " + std::to_string(kPage) +
                    " bytes)") != std::string::npos, m);
  BOOST_TEST(m.find(std::strerror(EOPNOTSUPP)) != std::string::npos, m);
  BOOST_TEST(cache.size() == 0u);
  const MrOps no_dmabuf = fake_ops(true, false);
  MrCache old(nullptr, no_dmabuf);
  BOOST_TEST(!old.acquire(reinterpret_cast<void*>(8 * kPage), kPage, kAccess, &d).ok());
}

BOOST_AUTO_TEST_CASE(the_fd_copy_is_owned_and_closed) {
  UniqueFd src = fake_dmabuf();
  BOOST_REQUIRE(src);
  int copy_no = -1;
  {
    auto copy = dup_fd(src.get());
    BOOST_REQUIRE(copy.ok());
    copy_no = copy->get();
    BOOST_TEST(copy_no != src.get());
    BOOST_TEST((fcntl(copy_no, F_GETFD) & FD_CLOEXEC) != 0);
    src.reset();  // NCCL closes its fd: the copy stays usable
    BOOST_TEST(fcntl(copy_no, F_GETFD) >= 0);
    UniqueFd moved = std::move(copy).value();
    BOOST_TEST(moved.get() == copy_no);
  }
  BOOST_TEST(fcntl(copy_no, F_GETFD) == -1);  // closed with its owner
  BOOST_TEST(!dup_fd(-1).ok());
}

BOOST_AUTO_TEST_SUITE_END()

// regMrDmaBuf through a comm on two devices (primary, standby) and the device a slot is moving to:
// each registers from the handle's own copy of the fd (NCCL's is closed right after the call),
// with that device's access flags; deregMr releases every registration and closes the copy; a
// device that refuses fails the call with a WARN naming it, fd, offset, size and the error, and
// leaves no registration and no fd behind.
BOOST_AUTO_TEST_SUITE(reg_mr_dmabuf_on_a_comm)

BOOST_FIXTURE_TEST_CASE(every_device_from_a_private_copy, FreshFake) {
  LogCapture log;
  const MrOps ops = fake_ops();
  auto d0 = fake_device("fake0", ops, true), d1 = fake_device("fake1", ops, false), d2 = fake_device("fake2", ops, true);
  auto c = std::make_shared<SendComm>();
  c->devs[0] = d0.get();
  c->devs[1] = d1.get();
  begin_rebind(*c, *d2);
  const std::size_t fds = open_fds();
  UniqueFd nccl_fd = fake_dmabuf();
  void* data = reinterpret_cast<void*>(32 * kPage);
  void* mh = nullptr;
  BOOST_TEST(reg_mr_dmabuf(c.get(), data, kPage, NCCL_PTR_CUDA, 5 * kPage, nccl_fd.get(), &mh) == ncclSuccess, log.dump());
  nccl_fd.reset();  // as NCCL does
  BOOST_REQUIRE(mh != nullptr);
  BOOST_REQUIRE(g.calls.size() == 3u);  // primary, standby, the device the slot moves to
  for (const Call& k : g.calls) {
    BOOST_TEST(k.fn == "reg_dmabuf_mr");
    BOOST_TEST((k.offset == 5 * kPage && k.iova == 32 * kPage && k.length == kPage));
    BOOST_TEST(k.fd == g.calls[0].fd);
    BOOST_TEST(fcntl(k.fd, F_GETFD) >= 0);  // the copy outlives NCCL's fd
  }
  BOOST_TEST(g.calls[0].access == (kAccess | IBV_ACCESS_RELAXED_ORDERING));
  BOOST_TEST(g.calls[1].access == kAccess);
  BOOST_TEST(g.calls[2].access == (kAccess | IBV_ACCESS_RELAXED_ORDERING));
  BOOST_TEST(open_fds() == fds + 1);
  const auto* h = static_cast<const RegHandle*>(mh);
  BOOST_TEST((h->gpu && h->lkey(0) != 0 && h->lkey(1) != 0 && h->next_mr != nullptr));
  BOOST_TEST(dereg_mr(c.get(), mh) == ncclSuccess);
  BOOST_TEST(g.deregs == 3);
  BOOST_TEST((d0->mrs->size() == 0u && d1->mrs->size() == 0u && d2->mrs->size() == 0u));
  BOOST_TEST(open_fds() == fds);  // the copy is closed at deregMr
  BOOST_TEST(log.count_at_or_above(LogLevel::warn) == 0u, log.dump());
}

BOOST_FIXTURE_TEST_CASE(a_device_that_refuses_leaves_nothing_behind, FreshFake) {
  LogCapture log;
  const MrOps ops = fake_ops();
  MrOps refusing = fake_ops();
  refusing.reg_dmabuf_mr = &refusing_reg_dmabuf_mr;
  auto d0 = fake_device("fake0", ops, false), d1 = fake_device("fake1", refusing, false);
  auto c = std::make_shared<RecvComm>();
  c->devs[0] = d0.get();
  c->devs[1] = d1.get();
  const std::size_t fds = open_fds();
  UniqueFd nccl_fd = fake_dmabuf();
  void* mh = nullptr;
  BOOST_TEST(reg_mr_dmabuf(c.get(), reinterpret_cast<void*>(32 * kPage), 3 * kPage, NCCL_PTR_CUDA, 0, nccl_fd.get(),
                           &mh) == ncclSystemError);
  BOOST_TEST(mh == nullptr);
  BOOST_TEST(g.deregs == 1);  // the primary's registration is released
  BOOST_TEST((d0->mrs->size() == 0u && d1->mrs->size() == 0u && c->regs.empty()));
  BOOST_TEST(log.count(LogLevel::warn, {"regMrDmaBuf(", "dma-buf fd " + std::to_string(nccl_fd.get()), "offset 0",
                                        std::to_string(3 * kPage) + " bytes", "on fake1:1 failed",
                                        std::strerror(EOPNOTSUPP)}) == 1u,
             log.dump());
  nccl_fd.reset();
  BOOST_TEST(open_fds() == fds);  // the copy went with the failed handle
  // Not offered on the comm's device: refused before anything is registered.
  d0->dmabuf_offered = false;
  nccl_fd = fake_dmabuf();
  g.calls.clear();
  BOOST_TEST(reg_mr_dmabuf(c.get(), reinterpret_cast<void*>(32 * kPage), kPage, NCCL_PTR_CUDA, 0, nccl_fd.get(), &mh) ==
             ncclInvalidArgument);
  BOOST_TEST(g.calls.empty());
}

BOOST_AUTO_TEST_SUITE_END()
