// The standby map (each port's first-choice standby port): the ranking rules (link layer, NIC, NUMA, PCIe switch, rail, index), the
// HA_NCCL_STANDBY_MAP override and its warnings, and port_affinity() (topology.hpp) against a
// fixture sysfs tree.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "setup/standby_map.hpp"
#include "topo_support.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;
using nccl_ha::net::PortInfo;
namespace fs = std::filesystem;

namespace {

PortInfo port(const std::string& device, std::uint32_t n, int link_layer = IBV_LINK_LAYER_ETHERNET) {
  PortInfo p;
  p.device = device;
  p.port = n;
  p.link_layer = link_layer;
  p.state = IBV_PORT_ACTIVE;
  return p;
}
PortInfo ib(const std::string& device, std::uint32_t n = 1) { return port(device, n, IBV_LINK_LAYER_INFINIBAND); }

PortAffinity aff(const std::string& nic, int numa, const std::string& pcie_switch = "", const std::string& subnet = "") {
  PortAffinity a;
  a.nic = nic;
  a.numa_node = numa;
  a.pcie_switch = pcie_switch;
  a.subnet = subnet;
  return a;
}

std::vector<int> standby_ports(const std::vector<StandbyChoice>& c) {
  std::vector<int> out;
  for (const auto& b : c) out.push_back(b.port);
  return out;
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "  " + l + "\n";
  return s;
}

// Three single-port RoCE NICs, all alike: automatically 0->1, 1->0, 2->0.
struct ThreeRxe {
  std::vector<PortInfo> ports{port("rxe0", 1), port("rxe1", 1), port("rxe2", 1)};
  std::vector<PortAffinity> affinity{aff("0000:00:04", 0), aff("0000:00:05", 0), aff("0000:00:06", 0)};
  std::vector<std::string> warnings;
  std::vector<StandbyChoice> select(const std::string& map) {
    warnings.clear();
    return select_standby_ports(ports, affinity, map, &warnings);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(standby_ranking)

BOOST_AUTO_TEST_CASE(vm_two_nics_one_port_each_back_each_other) {
  // The test bed: rxe0 and rxe1 on two virtio NICs, rail 0 and rail 1.
  const std::vector<PortInfo> ports{port("rxe0", 1), port("rxe1", 1)};
  const std::vector<PortAffinity> affinity{aff("0000:00:04", -1, "", "10.20.0.0/24"),
                                           aff("0000:00:05", -1, "", "10.21.0.0/24")};
  std::vector<std::string> warnings;
  const auto c = select_standby_ports(ports, affinity, "", &warnings);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{1, 0}), boost::test_tools::per_element());
  BOOST_TEST(c[0].reason == "different NIC, NUMA unknown, different rail 10.21.0.0/24");
  BOOST_TEST(c[1].reason == "different NIC, NUMA unknown, different rail 10.20.0.0/24");
  BOOST_TEST(warnings.empty(), joined(warnings));
}

BOOST_AUTO_TEST_CASE(one_nic_two_ports_back_each_other) {
  const std::vector<PortInfo> ports{ib("mlx5_0", 1), ib("mlx5_0", 2)};
  const std::vector<PortAffinity> affinity{aff("0000:03:00", 0), aff("0000:03:00", 0)};
  const auto c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{1, 0}), boost::test_tools::per_element());
  BOOST_TEST(c[0].reason == "same NIC 0000:03:00, same NUMA node 0, rail unknown");
}

BOOST_AUTO_TEST_CASE(a_different_nic_beats_the_same_nic_on_the_same_numa_node) {
  // Two dual-port NICs, one per NUMA node: the other NIC wins although it is remote.
  const std::vector<PortInfo> ports{ib("mlx5_0", 1), ib("mlx5_0", 2), ib("mlx5_1", 1), ib("mlx5_1", 2)};
  const std::vector<PortAffinity> affinity{aff("0000:03:00", 0), aff("0000:03:00", 0), aff("0000:83:00", 1),
                                           aff("0000:83:00", 1)};
  const auto c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(contains(c[0].reason, "different NIC, other NUMA node 1"), c[0].reason);
}

BOOST_AUTO_TEST_CASE(among_other_nics_the_same_numa_node_wins) {
  // Four single-port NICs alternating between NUMA nodes 0 and 1.
  const std::vector<PortInfo> ports{ib("mlx5_0"), ib("mlx5_1"), ib("mlx5_2"), ib("mlx5_3")};
  const std::vector<PortAffinity> affinity{aff("0000:03:00", 0), aff("0000:83:00", 1), aff("0000:04:00", 0),
                                           aff("0000:84:00", 1)};
  const auto c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 3, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(contains(c[0].reason, "different NIC, same NUMA node 0"), c[0].reason);
}

BOOST_AUTO_TEST_CASE(then_the_same_pcie_switch) {
  const std::vector<PortInfo> ports{ib("mlx5_0"), ib("mlx5_1"), ib("mlx5_2")};
  const std::vector<PortAffinity> affinity{aff("0000:03:00", 0, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"),
                                           aff("0000:05:00", 0, "/sys/devices/pci0000:00/0000:00:02.0/0000:04:00.0"),
                                           aff("0000:06:00", 0, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0")};
  const auto c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(contains(c[0].reason, "same PCIe switch"), c[0].reason);
  BOOST_TEST(contains(c[1].reason, "different PCIe switch"), c[1].reason);
}

BOOST_AUTO_TEST_CASE(numa_outranks_the_pcie_switch) {
  const std::vector<PortInfo> ports{ib("mlx5_0"), ib("mlx5_1"), ib("mlx5_2")};
  const std::vector<PortAffinity> affinity{aff("a", 0, "/sw0"), aff("b", 1, "/sw0"), aff("c", 0, "/sw1")};
  const auto c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(c[0].port == 2);
  BOOST_TEST(c[0].reason == "different NIC, same NUMA node 0, different PCIe switch, rail unknown");
}

BOOST_AUTO_TEST_CASE(then_a_different_rail) {
  const std::vector<PortInfo> ports{port("rxe0", 1), port("rxe1", 1), port("rxe2", 1)};
  std::vector<PortAffinity> affinity{aff("a", 0, "", "10.20.0.0/24"), aff("b", 0, "", "10.20.0.0/24"),
                                     aff("c", 0, "", "10.21.0.0/24")};
  auto c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 2, 0}), boost::test_tools::per_element());
  BOOST_TEST(contains(c[1].reason, "different rail 10.21.0.0/24"), c[1].reason);
  // An unknown rail ranks between a different and the same one.
  affinity[2].subnet = "";
  c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 2, 0}), boost::test_tools::per_element());
  BOOST_TEST(contains(c[0].reason, "rail unknown"), c[0].reason);
  affinity[2].subnet = "10.20.0.0/24";
  c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{1, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(contains(c[0].reason, "same rail 10.20.0.0/24"), c[0].reason);
}

BOOST_AUTO_TEST_CASE(numa_outranks_the_rail) {
  const std::vector<PortInfo> ports{port("rxe0", 1), port("rxe1", 1), port("rxe2", 1)};
  const std::vector<PortAffinity> affinity{aff("a", 0, "", "10.20.0.0/24"), aff("b", 1, "", "10.21.0.0/24"),
                                           aff("c", 0, "", "10.20.0.0/24")};
  BOOST_TEST(select_standby_ports(ports, affinity, "", nullptr)[0].port == 2);
}

BOOST_AUTO_TEST_CASE(a_single_port_has_no_standby_port) {
  const auto c = select_standby_ports({port("rxe0", 1)}, {aff("a", 0)}, "", nullptr);
  BOOST_TEST_REQUIRE(c.size() == 1u);
  BOOST_TEST(c[0].port == -1);
  BOOST_TEST(c[0].reason == "only one port");
  BOOST_TEST(select_standby_ports({}, {}, "rxe0:rxe1", nullptr).empty());
}

BOOST_AUTO_TEST_CASE(link_layers_never_mix) {
  auto c = select_standby_ports({ib("mlx5_0"), port("rxe0", 1)}, {aff("a", 0), aff("b", 0)}, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{-1, -1}), boost::test_tools::per_element());
  BOOST_TEST(c[0].reason == "no usable standby port: no other IB port");
  BOOST_TEST(c[1].reason == "no usable standby port: no other RoCE port");
  // With a second InfiniBand port, the IB ports pair up and the RoCE port stays alone, even
  // though it would be the better NUMA match.
  c = select_standby_ports({ib("mlx5_0"), port("rxe0", 1), ib("mlx5_1")}, {aff("a", 0), aff("b", 0), aff("c", 1)}, "",
                     nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, -1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(missing_affinity_means_unknown_and_the_device_is_the_nic) {
  const std::vector<PortInfo> ports{ib("mlx5_0", 1), ib("mlx5_0", 2), ib("mlx5_1", 1)};
  const auto c = select_standby_ports(ports, {}, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 2, 0}), boost::test_tools::per_element());
  BOOST_TEST(c[0].reason == "different NIC, NUMA unknown, rail unknown");
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_lowest_index_every_time) {
  const std::vector<PortInfo> ports{port("rxe0", 1), port("rxe1", 1), port("rxe2", 1), port("rxe3", 1)};
  const std::vector<PortAffinity> affinity(4, aff("", 0, "/sw", "10.0.0.0/8"));  // all alike; NIC = device
  const auto first = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(first) == (std::vector<int>{1, 0, 0, 0}), boost::test_tools::per_element());
  for (int round = 0; round < 5; ++round) {
    const auto again = select_standby_ports(ports, affinity, "", nullptr);
    BOOST_TEST_REQUIRE(again.size() == first.size());
    for (std::size_t i = 0; i < first.size(); ++i) {
      BOOST_TEST(again[i].port == first[i].port);
      BOOST_TEST(again[i].reason == first[i].reason);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(standby_map)

BOOST_FIXTURE_TEST_CASE(a_valid_entry_overrides_only_its_primary, ThreeRxe) {
  auto c = select("rxe0:rxe2");
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(c[0].reason == "HA_NCCL_STANDBY_MAP (different NIC, same NUMA node 0, rail unknown)");
  BOOST_TEST(!contains(c[1].reason, "HA_NCCL_STANDBY_MAP"));
  BOOST_TEST(warnings.empty(), joined(warnings));
  // Whitespace, empty entries and device/port names.
  c = select(" rxe0/1 : rxe2 ,, rxe2:rxe1/1 ,");
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(warnings.empty(), joined(warnings));
}

BOOST_AUTO_TEST_CASE(a_map_can_pick_a_port_of_the_same_nic) {
  const std::vector<PortInfo> ports{ib("mlx5_0", 1), ib("mlx5_0", 2), ib("mlx5_1", 1), ib("mlx5_1", 2)};
  const std::vector<PortAffinity> affinity{aff("0000:03:00", 0), aff("0000:03:00", 0), aff("0000:04:00", 0),
                                           aff("0000:04:00", 0)};
  std::vector<std::string> warnings;
  auto c = select_standby_ports(ports, affinity, "mlx5_0/1:mlx5_0/2", &warnings);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{1, 2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(contains(c[0].reason, "same NIC 0000:03:00"), c[0].reason);
  // A bare device name as the primary means all its ports; as the standby its lowest port.
  c = select_standby_ports(ports, affinity, "mlx5_1:mlx5_0", &warnings);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(!contains(c[1].reason, "HA_NCCL_STANDBY_MAP"), c[1].reason);
  BOOST_TEST(contains(c[2].reason, "HA_NCCL_STANDBY_MAP"), c[2].reason);
  BOOST_TEST(contains(c[3].reason, "HA_NCCL_STANDBY_MAP"), c[3].reason);
  c = select_standby_ports(ports, affinity, "mlx5_1:mlx5_0/2", &warnings);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 2, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(warnings.empty(), joined(warnings));
}

BOOST_FIXTURE_TEST_CASE(unknown_devices_are_warned_about_and_ignored, ThreeRxe) {
  for (const std::string entry : {"rxe0:rxe9", "rxe9:rxe0", "rxe0:rxe1/2", "mlx5_0/1:rxe1"}) {
    BOOST_TEST_CONTEXT(entry) {
      const auto c = select(entry);
      BOOST_TEST(standby_ports(c) == (std::vector<int>{1, 0, 0}), boost::test_tools::per_element());
      BOOST_TEST_REQUIRE(warnings.size() == 1u, joined(warnings));
      BOOST_TEST(contains(warnings[0], "HA_NCCL_STANDBY_MAP: ignoring '" + entry + "'"), warnings[0]);
      BOOST_TEST(contains(warnings[0], "among the ports in use"), warnings[0]);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(self_mappings_are_warned_about_and_ignored, ThreeRxe) {
  for (const std::string entry : {"rxe1:rxe1", "rxe1/1:rxe1", "rxe1:rxe1/1"}) {
    BOOST_TEST_CONTEXT(entry) {
      const auto c = select(entry);
      BOOST_TEST(standby_ports(c) == (std::vector<int>{1, 0, 0}), boost::test_tools::per_element());
      BOOST_TEST_REQUIRE(warnings.size() == 1u, joined(warnings));
      BOOST_TEST(contains(warnings[0], "maps rxe1/1 to itself"), warnings[0]);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(malformed_entries_are_warned_about_and_ignored, ThreeRxe) {
  for (const std::string entry : {"rxe0", "rxe0:rxe1:rxe2", ":rxe1", "rxe0:", "rxe0/x:rxe2", "rxe0/0:rxe2",
                                  "rxe0/-1:rxe2", "rxe0/:rxe2", "/1:rxe2", "rxe0:rxe2/1/1"}) {
    BOOST_TEST_CONTEXT(entry) {
      const auto c = select(entry);
      BOOST_TEST(standby_ports(c) == (std::vector<int>{1, 0, 0}), boost::test_tools::per_element());
      BOOST_TEST_REQUIRE(warnings.size() == 1u, joined(warnings));
      BOOST_TEST(contains(warnings[0], "expected PRIMARY:STANDBY"), warnings[0]);
    }
  }
  // A bad entry does not spoil the good ones around it.
  const auto c = select("rxe0:rxe2,bogus,rxe2:rxe1");
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(warnings.size() == 1u, joined(warnings));
  // No warning sink: still works.
  BOOST_TEST(standby_ports(select_standby_ports(ports, affinity, "bogus,rxe0:rxe2", nullptr)) == (std::vector<int>{2, 0, 0}),
             boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(a_primary_mapped_twice_keeps_the_first_entry, ThreeRxe) {
  const auto c = select("rxe0:rxe2,rxe0:rxe1");
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(warnings.size() == 1u, joined(warnings));
  BOOST_TEST(contains(warnings[0], "'rxe0:rxe1'"), warnings[0]);
  BOOST_TEST(contains(warnings[0], "already mapped"), warnings[0]);
}

BOOST_AUTO_TEST_CASE(a_map_cannot_mix_link_layers) {
  std::vector<std::string> warnings;
  const auto c = select_standby_ports({ib("mlx5_0"), port("rxe0", 1)}, {}, "mlx5_0:rxe0", &warnings);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{-1, -1}), boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(warnings.size() == 1u, joined(warnings));
  BOOST_TEST(contains(warnings[0], "mlx5_0/1 is IB but rxe0/1 is RoCE"), warnings[0]);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A fixture sysfs tree:
//   devices/pci0000:00/0000:00:01.0/0000:01:00.0/                 switch upstream port
//     0000:02:08.0/0000:03:00.0 (numa 1)  <- mlx5_0    (NIC 0000:03:00, port 1 of a dual-port card)
//     0000:02:08.0/0000:03:00.1 (numa 1)  <- mlx5_1    (same NIC, second function)
//     0000:02:08.0/0000:03:10.1 physfn -> 0000:03:00.0  <- mlx5_4 (a virtual function)
//     0000:02:10.0/0000:04:00.0 (numa 1)  <- mlx5_2    (another NIC behind the same switch)
//   devices/pci0000:00/0000:00:02.0/0000:05:00.0 (numa 1) <- mlx5_3 (straight under a root port)
//   devices/pci0000:00/0000:00:04.0 (numa 0) /virtio1  <- eth0 <- rxe0 (Soft-RoCE on virtio)
//   class/infiniband/mlx5_0/ports/1/gids/0 = fe80:0000:0000:0000:0002:c903:00f1:2345
struct PciSysfs {
  fs::path root;
  const std::string sw = "devices/pci0000:00/0000:00:01.0/0000:01:00.0";

  PciSysfs() {
    std::string tmpl = (fs::temp_directory_path() / "nccl-ha-pci-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    write(sw + "/0000:02:08.0/0000:03:00.0/numa_node", "1\n");
    write(sw + "/0000:02:08.0/0000:03:00.1/numa_node", "1\n");
    write(sw + "/0000:02:08.0/0000:03:10.1/numa_node", "1\n");
    fs::create_directory_symlink("../0000:03:00.0", root / sw / "0000:02:08.0/0000:03:10.1/physfn");
    write(sw + "/0000:02:10.0/0000:04:00.0/numa_node", "1\n");
    write("devices/pci0000:00/0000:00:02.0/0000:05:00.0/numa_node", "1\n");
    write("devices/pci0000:00/0000:00:04.0/numa_node", "0\n");
    fs::create_directories(root / "devices/pci0000:00/0000:00:04.0/virtio1");
    link("class/infiniband/mlx5_0/device", "../../../" + sw + "/0000:02:08.0/0000:03:00.0");
    link("class/infiniband/mlx5_1/device", "../../../" + sw + "/0000:02:08.0/0000:03:00.1");
    link("class/infiniband/mlx5_2/device", "../../../" + sw + "/0000:02:10.0/0000:04:00.0");
    link("class/infiniband/mlx5_3/device", "../../../devices/pci0000:00/0000:00:02.0/0000:05:00.0");
    link("class/infiniband/mlx5_4/device", "../../../" + sw + "/0000:02:08.0/0000:03:10.1");
    link("class/net/eth0/device", "../../../devices/pci0000:00/0000:00:04.0/virtio1");
    write("class/infiniband/mlx5_0/ports/1/gids/0", "fe80:0000:0000:0000:0002:c903:00f1:2345\n");
    write("class/infiniband/mlx5_1/ports/1/gids/0", "fe80:0000:0000:0001:0002:c903:00f1:2346\n");
  }
  ~PciSysfs() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  std::string r() const { return root.string(); }
  // The model as init builds it: the rail from the fixture (IB: GID 0), no host addresses.
  PortAffinity model(const PortInfo& p) const { return port_affinity(p, r(), port_rail(p, {}, r())); }
  std::string real(const std::string& rel) const { return fs::canonical(root / rel).string(); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  void link(const std::string& rel, const std::string& target) const {
    fs::create_directories((root / rel).parent_path());
    fs::create_directory_symlink(target, root / rel);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(affinity_model)

BOOST_FIXTURE_TEST_CASE(hca_behind_a_pcie_switch, PciSysfs) {
  const PortAffinity a = model(ib("mlx5_0"));
  BOOST_TEST(a.pci_path == real(sw + "/0000:02:08.0/0000:03:00.0"));
  BOOST_TEST(a.nic == "0000:03:00");
  BOOST_TEST(a.pcie_switch == real(sw));
  BOOST_TEST(a.numa_node == 1);
  BOOST_TEST(a.subnet == "fe80::/64");  // IB: the subnet prefix of GID 0
}

BOOST_FIXTURE_TEST_CASE(functions_and_virtual_functions_share_their_nic, PciSysfs) {
  const PortAffinity f0 = model(ib("mlx5_0"));
  const PortAffinity f1 = model(ib("mlx5_1"));
  const PortAffinity vf = model(ib("mlx5_4"));
  const PortAffinity other = model(ib("mlx5_2"));
  BOOST_TEST(f1.nic == f0.nic);
  BOOST_TEST(vf.nic == f0.nic);
  BOOST_TEST(vf.pci_path == real(sw + "/0000:02:08.0/0000:03:10.1"));  // the model keeps the VF's own path
  BOOST_TEST(other.nic == "0000:04:00");
  BOOST_TEST(other.pcie_switch == f0.pcie_switch);
  BOOST_TEST(f1.subnet == "fe80:0:0:1::/64");
  BOOST_TEST(other.subnet.empty());  // no GID file
}

BOOST_FIXTURE_TEST_CASE(a_function_under_a_root_port_has_no_switch, PciSysfs) {
  const PortAffinity a = model(ib("mlx5_3"));
  BOOST_TEST(a.nic == "0000:05:00");
  BOOST_TEST(a.pcie_switch.empty());
  BOOST_TEST(a.numa_node == 1);
}

BOOST_FIXTURE_TEST_CASE(soft_roce_on_a_virtio_nic, PciSysfs) {
  PortInfo p = port("rxe0", 1);
  p.netdev = "eth0";
  const PortAffinity a = port_affinity(p, r(), test::v4("10.20.0.0", 24));
  BOOST_TEST(a.pci_path == real("devices/pci0000:00/0000:00:04.0/virtio1"));
  BOOST_TEST(a.nic == "0000:00:04");
  BOOST_TEST(a.pcie_switch.empty());
  BOOST_TEST(a.numa_node == 0);  // from the PCI function above the virtio device
  BOOST_TEST(a.subnet == "10.20.0.0/24");
}

BOOST_FIXTURE_TEST_CASE(values_already_discovered_are_kept, PciSysfs) {
  PortInfo p = ib("mlx5_0");
  p.pci_path = real(sw + "/0000:02:10.0/0000:04:00.0");
  p.numa_node = 3;
  const PortAffinity a = port_affinity(p, r(), test::v6("fd00:99::", 64));
  BOOST_TEST(a.pci_path == p.pci_path);
  BOOST_TEST(a.nic == "0000:04:00");
  BOOST_TEST(a.numa_node == 3);
  BOOST_TEST(a.subnet == "fd00:99::/64");  // the rail given, not GID 0's
}

BOOST_FIXTURE_TEST_CASE(no_pci_device_at_all, PciSysfs) {
  PortInfo p = port("rxe7", 1);
  p.netdev = "no-such-netdev0";
  const PortAffinity a = model(p);
  BOOST_TEST(a.pci_path.empty());
  BOOST_TEST(a.nic == "rxe7");
  BOOST_TEST(a.pcie_switch.empty());
  BOOST_TEST(a.numa_node == -1);
  BOOST_TEST(a.subnet.empty());
}

BOOST_FIXTURE_TEST_CASE(the_model_drives_the_choice, PciSysfs) {
  // mlx5_0's best standby port is mlx5_2: another NIC on the same NUMA node behind the same switch,
  // ahead of its own second function (mlx5_1) and of mlx5_3 under another root port.
  const std::vector<PortInfo> ports{ib("mlx5_0"), ib("mlx5_1"), ib("mlx5_2"), ib("mlx5_3")};
  std::vector<PortAffinity> affinity;
  for (const auto& p : ports) affinity.push_back(model(p));
  const auto c = select_standby_ports(ports, affinity, "", nullptr);
  BOOST_TEST(standby_ports(c) == (std::vector<int>{2, 2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(c[0].reason == "different NIC, same NUMA node 1, same PCIe switch, rail unknown");
  BOOST_TEST(c[3].reason == "different NIC, same NUMA node 1, rail unknown");
}

BOOST_AUTO_TEST_SUITE_END()
