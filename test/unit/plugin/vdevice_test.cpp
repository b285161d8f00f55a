// NCCL's fused NICs as net_ib merges them (vdevice.hpp): the name, the summed speed, the rail and
// the virtual plane; every request that net_ib refuses, or that would fuse nonsense, refused with
// a message naming why; the table's numbering after the ports and its lock-free reads.
#include <infiniband/verbs.h>

#include <boost/test/unit_test.hpp>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "runtime/vdevice.hpp"

using namespace nccl_ha::plugin;

namespace {

constexpr int kEth = IBV_LINK_LAYER_ETHERNET, kIb = IBV_LINK_LAYER_INFINIBAND;

MemberFacts port(const char* name, int speed, std::int16_t rail = -1, std::int16_t plane = -1, int plane_idx = 0,
                 int link = kEth) {
  return {name, speed, link, rail, plane, plane_idx};
}

bool says(const nccl_ha::Error& e, const std::string& what) { return e.message.find(what) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(vdevice)

// net_ib numbers planes in device order: the undefined plane is 0, each new plane id the next.
BOOST_AUTO_TEST_CASE(plane_indices_as_net_ib) {
  const std::int16_t planes[] = {-1, 7, 3, 7, -1, 3, 0};
  const auto idx = plane_indices(planes);
  BOOST_REQUIRE(idx.ok());
  BOOST_TEST(*idx == (std::vector<int>{0, 1, 2, 1, 0, 2, 3}), boost::test_tools::per_element());
  const std::int16_t none[] = {-1, -1};
  BOOST_TEST(*plane_indices(none) == (std::vector<int>{0, 0}), boost::test_tools::per_element());
  // A plane id with the virtual bit would collide with a fused device's planeId.
  const std::int16_t virt[] = {3, static_cast<std::int16_t>(kPlaneVirtBit | 1)};
  const auto bad = plane_indices(virt);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(says(bad.error(), "bit 14"), bad.error().message);
  // 12 planes besides the undefined one fit, a 13th does not (NCCL_IB_PLANE_MAX_INDEX - 1 entries).
  std::vector<std::int16_t> many;
  for (std::int16_t p = 0; p < 12; ++p) many.push_back(p);
  BOOST_TEST(plane_indices(many).ok());
  many.push_back(12);
  const auto full = plane_indices(many);
  BOOST_REQUIRE(!full.ok());
  BOOST_TEST(says(full.error(), "13 plane ids"), full.error().message);
}

// Two ports of one rail: "a+b", speeds summed, the rail kept, the virtual bit and each member's
// plane bit in planeId; members in the order asked.
BOOST_AUTO_TEST_CASE(merges_as_net_ib) {
  const MemberFacts ports[] = {port("mlx5_0", 400000, 2, 5, 1), port("mlx5_1", 200000, 2, 6, 2),
                               port("mlx5_2", 400000, 3, 5, 1), port("mlx5_3", 100000)};
  const int want[] = {1, 0};
  const auto v = merge_ports(ports, want, 4);
  BOOST_REQUIRE(v.ok());
  BOOST_TEST(v->count == 2);
  BOOST_TEST(v->members[0] == 1);
  BOOST_TEST(v->members[1] == 0);
  BOOST_TEST(v->name == "mlx5_1+mlx5_0");
  BOOST_TEST(v->speed == 600000);
  BOOST_TEST(v->rail_id == 2);
  BOOST_TEST(v->plane_id == (kPlaneVirtBit | (1 << 2) | (1 << 1)));
  // Different rails, or a member without one: no rail.
  const int mixed[] = {0, 2};
  BOOST_TEST(merge_ports(ports, mixed, 4)->rail_id == -1);
  BOOST_TEST(merge_ports(ports, mixed, 4)->plane_id == (kPlaneVirtBit | (1 << 1)));
  const int undef[] = {0, 3};
  BOOST_TEST(merge_ports(ports, undef, 4)->rail_id == -1);
  const int all[] = {0, 1, 2, 3};
  const auto four = merge_ports(ports, all, 4);
  BOOST_REQUIRE(four.ok());
  BOOST_TEST(four->name == "mlx5_0+mlx5_1+mlx5_2+mlx5_3");
  BOOST_TEST(four->speed == 1100000);
  BOOST_TEST(four->member_span().size() == 4u);
}

// One member is that port as it is: its own rail and plane, no virtual bit.
BOOST_AUTO_TEST_CASE(one_member_is_the_port) {
  const MemberFacts ports[] = {port("rxe0", 10000, 4, 9, 1), port("rxe1", 10000)};
  const int want[] = {0};
  const auto v = merge_ports(ports, want, 4);
  BOOST_REQUIRE(v.ok());
  BOOST_TEST(v->name == "rxe0");
  BOOST_TEST(v->speed == 10000);
  BOOST_TEST(v->rail_id == 4);
  BOOST_TEST(v->plane_id == 9);
}

BOOST_AUTO_TEST_CASE(refuses_with_the_reason) {
  const MemberFacts ports[] = {port("rxe0", 10000), port("rxe1", 10000), port("ib0", 100000, -1, -1, 0, kIb),
                               port("rxe2", 10000, -1, -1, -1), port("rxe3", 10000), port("rxe4", 10000)};
  struct Case {
    std::vector<int> want;
    int max;
    const char* says;
    nccl_ha::Errc code;
  };
  const Case cases[] = {
      {{}, 4, "at least one port", nccl_ha::Errc::invalid_argument},
      {{0, 1, 3, 4, 5}, 4, "5 ports, at most 4", nccl_ha::Errc::invalid_argument},
      {{0, 6}, 4, "device 6 is no port", nccl_ha::Errc::not_found},
      {{-1, 0}, 4, "device -1 is no port", nccl_ha::Errc::not_found},
      {{0, 1, 0}, 4, "port 0 (rxe0) named twice", nccl_ha::Errc::invalid_argument},
      {{0, 2}, 4, "different link layers", nccl_ha::Errc::unsupported},
      {{0, 3}, 4, "rxe2 has no usable plane index", nccl_ha::Errc::invalid_argument},
  };
  for (const auto& k : cases) {
    const auto v = merge_ports(ports, k.want, k.max);
    BOOST_REQUIRE(!v.ok());
    BOOST_TEST(says(v.error(), k.says), v.error().message);
    BOOST_TEST(static_cast<int>(v.error().code) == static_cast<int>(k.code), v.error().message);
  }
  // Five members where the API holds them pass the count (and fail on rxe2's plane); nine never do.
  const int five[] = {0, 1, 3, 4, 5};
  BOOST_TEST(says(merge_ports(ports, five, 5).error(), "no usable plane"));
  const std::vector<int> nine(9, 0);
  BOOST_TEST(says(merge_ports(ports, nine, 16).error(), "9 ports, at most 8"));
}

// Numbered after the ports; a port's number or one never made finds nothing; full at kMaxVDevices.
BOOST_AUTO_TEST_CASE(table_numbers_after_the_ports) {
  VDeviceTable t(4);
  BOOST_TEST(t.find(0) == nullptr);
  BOOST_TEST(t.find(4) == nullptr);
  VDevice a;
  a.name = "rxe0+rxe1";
  a.count = 2;
  a.members[1] = 1;
  const auto ia = t.add(a);
  BOOST_REQUIRE(ia.ok());
  BOOST_TEST(*ia == 4);
  BOOST_TEST(t.find(4)->name == "rxe0+rxe1");
  BOOST_TEST(t.find(3) == nullptr);
  BOOST_TEST(t.find(5) == nullptr);
  for (int i = 1; i < kMaxVDevices; ++i) BOOST_REQUIRE(t.add(VDevice{}).ok());
  BOOST_TEST(t.size() == kMaxVDevices);
  const auto over = t.add(VDevice{});
  BOOST_REQUIRE(!over.ok());
  BOOST_TEST(says(over.error(), "no more virtual devices"), over.error().message);
  BOOST_TEST(t.find(4 + kMaxVDevices - 1) != nullptr);
  BOOST_TEST(t.find(4 + kMaxVDevices) == nullptr);
}

// Readers on other threads see an entry whole once its number is known (size() acquires what add()
// released).
BOOST_AUTO_TEST_CASE(table_reads_while_adding) {
  VDeviceTable t(2);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!stop.load()) {
      const int n = t.size();
      for (int i = 0; i < n; ++i) {
        const VDevice* v = t.find(2 + i);
        if (!v || v->name != "v" + std::to_string(i) || v->speed != i) bad.fetch_add(1);
      }
    }
  });
  for (int i = 0; i < 200; ++i) {
    VDevice v;
    v.name = "v" + std::to_string(i);
    v.speed = i;
    BOOST_REQUIRE(t.add(std::move(v)).ok());
  }
  stop.store(true);
  reader.join();
  BOOST_TEST(bad.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
