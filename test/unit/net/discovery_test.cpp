// Discovery helpers: speed/width/MTU tables (the port speed against NCCL's computation), names,
// and the sysfs lookups against a fixture sysfs tree built in a temporary directory (device
// symlinks, numa_node files, GID ndevs), including the PCI path and real port NCCL is told.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nccl_ha/net/discovery.hpp"

using namespace nccl_ha;
using namespace nccl_ha::net;
namespace fs = std::filesystem;

namespace {

// root/
//   devices/pci0000:00/0000:00:03.0/numa_node = 1        <- mlx5_0 (hardware HCA)
//   devices/pci0000:00/0000:00:04.0/numa_node = 0
//   devices/pci0000:00/0000:00:04.0/virtio1/             <- eth0 (virtio: no numa_node of its own)
//   devices/pci0000:00/0000:00:05.0/numa_node = -1       <- mlx5_1 (no NUMA affinity)
//   devices/pci0000:00/0000:00:06.0/numa_node = garbage  <- mlx5_2
//   devices/platform/vdev0/                              <- no numa_node anywhere near
//   class/infiniband/mlx5_{0,1,2}/device -> ../../../devices/...
//   class/infiniband/dangling/device -> ../../../devices/gone
//   class/infiniband/rxe0/ports/1/gid_attrs/ndevs/{0,1} = eth0, ports/2/gid_attrs/ndevs/0 = eth1
//   class/net/eth0/device -> ../../../devices/pci0000:00/0000:00:04.0/virtio1
//   class/net/eth1/                                      <- virtual netdev: no device link
struct SysfsFixture {
  fs::path root;

  SysfsFixture() {
    std::string tmpl = (fs::temp_directory_path() / "nccl-ha-sysfs-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    const fs::path pci = root / "devices/pci0000:00";
    write(pci / "0000:00:03.0/numa_node", "1\n");
    write(pci / "0000:00:04.0/numa_node", "0\n");
    fs::create_directories(pci / "0000:00:04.0/virtio1");
    write(pci / "0000:00:05.0/numa_node", "-1\n");
    write(pci / "0000:00:06.0/numa_node", "garbage\n");
    fs::create_directories(root / "devices/platform/vdev0");
    link(root / "class/infiniband/mlx5_0/device", "../../../devices/pci0000:00/0000:00:03.0");
    link(root / "class/infiniband/mlx5_1/device", "../../../devices/pci0000:00/0000:00:05.0");
    link(root / "class/infiniband/mlx5_2/device", "../../../devices/pci0000:00/0000:00:06.0");
    link(root / "class/infiniband/dangling/device", "../../../devices/gone");
    write(root / "class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "eth0\n");
    write(root / "class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1", "eth0\n");
    write(root / "class/infiniband/rxe0/ports/2/gid_attrs/ndevs/0", "eth1\n");
    link(root / "class/net/eth0/device", "../../../devices/pci0000:00/0000:00:04.0/virtio1");
    fs::create_directories(root / "class/net/eth1");
  }
  ~SysfsFixture() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  std::string r() const { return root.string(); }
  std::string real(const std::string& rel) const { return fs::canonical(root / rel).string(); }

  static void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  static void link(const fs::path& p, const std::string& target) {
    fs::create_directories(p.parent_path());
    fs::create_directory_symlink(target, p);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(discovery_tables)

BOOST_AUTO_TEST_CASE(lane_speeds) {
  BOOST_TEST(lane_speed_mbps(1) == 2500);     // SDR
  BOOST_TEST(lane_speed_mbps(2) == 5000);     // DDR
  BOOST_TEST(lane_speed_mbps(4) == 10000);    // QDR
  BOOST_TEST(lane_speed_mbps(8) == 10000);    // FDR10
  BOOST_TEST(lane_speed_mbps(16) == 14000);   // FDR
  BOOST_TEST(lane_speed_mbps(32) == 25000);   // EDR
  BOOST_TEST(lane_speed_mbps(64) == 50000);   // HDR
  BOOST_TEST(lane_speed_mbps(128) == 100000); // NDR
  for (int unknown : {0, 3, 5, 127, 255}) BOOST_TEST(lane_speed_mbps(static_cast<std::uint8_t>(unknown)) == 0);
}

BOOST_AUTO_TEST_CASE(widths) {
  BOOST_TEST(width_lanes(1) == 1);
  BOOST_TEST(width_lanes(2) == 4);
  BOOST_TEST(width_lanes(4) == 8);
  BOOST_TEST(width_lanes(8) == 12);
  BOOST_TEST(width_lanes(16) == 2);
  for (int unknown : {0, 3, 32, 255}) BOOST_TEST(width_lanes(static_cast<std::uint8_t>(unknown)) == 0);
  BOOST_TEST(lane_speed_mbps(32) * width_lanes(2) == 100000);  // EDR 4x = 100 Gb/s
}

// NCCL's computation (net_ib init.cc ncclIbSpeed / ncclIbWidth), restated as the reference: the
// first set bit of the encoding indexes the table, a value with no bit below the last index takes
// the last entry.
int nccl_reference_mbps(std::uint8_t width, std::uint8_t speed, std::uint32_t speed_ex) {
  static constexpr int kSpeeds[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  static constexpr int kWidths[] = {1, 4, 8, 12, 2};
  auto first_bit = [](std::uint32_t v, int max) {
    int i = 0;
    while (i < max && (v & (1u << i)) == 0) ++i;
    return i;
  };
  const std::uint32_t s = speed_ex ? speed_ex : speed;
  return kSpeeds[first_bit(s, 8)] * kWidths[first_bit(width, 4)];
}

BOOST_AUTO_TEST_CASE(port_speed_table) {
  struct Row {
    std::uint8_t width, speed;
    std::uint32_t speed_ex;
    int mbps;
  };
  const Row rows[] = {
      {1, 1, 0, 2500},         // SDR 1x
      {2, 2, 0, 20000},        // DDR 4x
      {2, 4, 0, 40000},        // QDR 4x
      {2, 8, 0, 40000},        // FDR10 4x
      {2, 16, 0, 56000},       // FDR 4x
      {2, 32, 0, 100000},      // EDR 4x
      {2, 64, 0, 200000},      // HDR 4x
      {2, 128, 0, 400000},     // NDR 4x (ConnectX-7)
      {2, 0, 0x100, 800000},   // XDR 4x (ConnectX-8): active_speed 0, active_speed_ex 0x100
      {2, 128, 0x100, 800000}, // active_speed_ex wins when non-zero
      {4, 64, 0, 400000},      // HDR 8x
      {8, 32, 0, 300000},      // EDR 12x
      {16, 128, 0, 200000},    // NDR 2x
      {1, 0, 0x100, 200000},   // XDR 1x
      {16, 0, 0x100, 400000},  // XDR 2x
      {2, 48, 0, 56000},       // two bits (FDR|EDR): the first set counts, as NCCL reads it
      {6, 32, 0, 100000},      // width bits 4x|8x: 4x
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT("width " << int(r.width) << " speed " << int(r.speed) << " speed_ex " << r.speed_ex) {
      BOOST_TEST(port_speed_mbps(r.width, r.speed, r.speed_ex) == r.mbps);
      BOOST_TEST(nccl_reference_mbps(r.width, r.speed, r.speed_ex) == r.mbps);
    }
  }
  // Every valid encoding (one width bit x one speed bit, active_speed or XDR in active_speed_ex):
  // what NCCL computes.
  int checked = 0;
  for (int wb = 0; wb < 5; ++wb) {
    const auto width = static_cast<std::uint8_t>(1u << wb);
    for (int sb = 0; sb < 8; ++sb, ++checked) {
      const auto speed = static_cast<std::uint8_t>(1u << sb);
      BOOST_TEST(port_speed_mbps(width, speed, 0) == nccl_reference_mbps(width, speed, 0));
      BOOST_TEST(port_speed_mbps(width, speed, 0) > 0);
    }
    BOOST_TEST(port_speed_mbps(width, 0, 0x100) == nccl_reference_mbps(width, 0, 0x100));
    ++checked;
  }
  BOOST_TEST(checked == 45);
  // No known bit (none set, or one past the table): clamped to the table's last entry as NCCL
  // clamps it (XDR lanes / 2x), never 0.
  for (const auto& [w, sp, ex] : {std::tuple<std::uint8_t, std::uint8_t, std::uint32_t>{2, 0, 0}, {0, 32, 0}, {32, 32, 0},
                                  {2, 0, 0x200}, {0, 0, 0}}) {
    BOOST_TEST_CONTEXT("width " << int(w) << " speed " << int(sp) << " speed_ex " << ex) {
      BOOST_TEST(port_speed_mbps(w, sp, ex) == nccl_reference_mbps(w, sp, ex));
      BOOST_TEST(port_speed_mbps(w, sp, ex) > 0);
    }
  }
  BOOST_TEST(port_speed_mbps(2, 0, 0) == 800000);
  BOOST_TEST(port_speed_mbps(0, 32, 0) == 50000);
}

// A port not ACTIVE at discovery reports the fastest ACTIVE port's speed of its link layer; with
// no ACTIVE port of that layer it keeps its own.
BOOST_AUTO_TEST_CASE(inactive_ports_take_their_active_siblings_speed) {
  auto port = [](const char* dev, int state, int layer, int mbps) {
    PortInfo p;
    p.device = dev;
    p.port = 1;
    p.state = static_cast<ibv_port_state>(state);
    p.link_layer = layer;
    p.speed_mbps = mbps;
    return p;
  };
  constexpr int kEth = IBV_LINK_LAYER_ETHERNET, kIb = IBV_LINK_LAYER_INFINIBAND;
  std::vector<PortInfo> ports = {port("mlx5_0", IBV_PORT_ACTIVE, kEth, 400000), port("mlx5_1", IBV_PORT_DOWN, kEth, 800000),
                                 port("mlx5_2", IBV_PORT_ACTIVE, kEth, 200000), port("mlx5_3", IBV_PORT_DOWN, kIb, 10000),
                                 port("mlx5_4", IBV_PORT_ACTIVE, kEth, 400000)};
  const std::vector<std::size_t> changed = settle_inactive_speeds(ports);
  BOOST_TEST(changed == (std::vector<std::size_t>{1}), boost::test_tools::per_element());
  BOOST_TEST(ports[1].speed_mbps == 400000);  // the fastest ACTIVE Ethernet port's
  BOOST_TEST(ports[3].speed_mbps == 10000);   // no ACTIVE InfiniBand port: its own
  BOOST_TEST(ports[0].speed_mbps == 400000);
  BOOST_TEST(ports[2].speed_mbps == 200000);  // ACTIVE ports keep theirs
}

BOOST_AUTO_TEST_CASE(mtus) {
  BOOST_TEST(mtu_bytes(IBV_MTU_256) == 256);
  BOOST_TEST(mtu_bytes(IBV_MTU_512) == 512);
  BOOST_TEST(mtu_bytes(IBV_MTU_1024) == 1024);
  BOOST_TEST(mtu_bytes(IBV_MTU_2048) == 2048);
  BOOST_TEST(mtu_bytes(IBV_MTU_4096) == 4096);
  BOOST_TEST(mtu_bytes(static_cast<ibv_mtu>(0)) == 0);
  BOOST_TEST(mtu_bytes(static_cast<ibv_mtu>(6)) == 0);
}

BOOST_AUTO_TEST_CASE(names_and_port_info) {
  BOOST_TEST(std::string(link_layer_name(IBV_LINK_LAYER_INFINIBAND)) == "IB");
  BOOST_TEST(std::string(link_layer_name(IBV_LINK_LAYER_ETHERNET)) == "RoCE");
  BOOST_TEST(std::string(link_layer_name(IBV_LINK_LAYER_UNSPECIFIED)) == "unspecified");
  BOOST_TEST(std::string(link_layer_name(77)) == "unspecified");
  BOOST_TEST(std::string(port_state_name(IBV_PORT_ACTIVE)) == ibv_port_state_str(IBV_PORT_ACTIVE));
  BOOST_TEST(std::string(port_state_name(IBV_PORT_ACTIVE)).find("active") != std::string::npos);
  BOOST_TEST(std::string(port_state_name(IBV_PORT_DOWN)).find("down") != std::string::npos);

  PortInfo p;
  p.device = "rxe0";
  p.port = 2;
  BOOST_TEST(p.id() == "rxe0:2");
  BOOST_TEST(!p.active());
  p.state = IBV_PORT_ACTIVE;
  BOOST_TEST(p.active());
  BOOST_TEST(!p.roce());
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  BOOST_TEST(p.roce());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(discovery_sysfs, SysfsFixture)

BOOST_AUTO_TEST_CASE(pci_path_of_a_hardware_hca) {
  BOOST_TEST(sysfs_pci_path(r(), "mlx5_0", "") == real("devices/pci0000:00/0000:00:03.0"));
  // The device's own link wins over its netdev's.
  BOOST_TEST(sysfs_pci_path(r(), "mlx5_0", "eth0") == real("devices/pci0000:00/0000:00:03.0"));
}

BOOST_AUTO_TEST_CASE(pci_path_of_a_software_device_comes_from_its_netdev) {
  BOOST_TEST(sysfs_pci_path(r(), "rxe0", "eth0") == real("devices/pci0000:00/0000:00:04.0/virtio1"));
  BOOST_TEST(sysfs_pci_path(r(), "rxe0", "") == "");      // no netdev known
  BOOST_TEST(sysfs_pci_path(r(), "rxe0", "eth1") == "");  // virtual netdev: no device link
  BOOST_TEST(sysfs_pci_path(r(), "rxe0", "eth9") == "");  // no such netdev
}

BOOST_AUTO_TEST_CASE(pci_path_of_missing_or_dangling_devices_is_empty) {
  BOOST_TEST(sysfs_pci_path(r(), "nope", "") == "");
  BOOST_TEST(sysfs_pci_path(r(), "dangling", "") == "");
  BOOST_TEST(sysfs_pci_path(r() + "/does-not-exist", "mlx5_0", "eth0") == "");
}

BOOST_AUTO_TEST_CASE(numa_node) {
  BOOST_TEST(sysfs_numa_node(real("devices/pci0000:00/0000:00:03.0")) == 1);
  BOOST_TEST(sysfs_numa_node(real("devices/pci0000:00/0000:00:04.0")) == 0);
  BOOST_TEST(sysfs_numa_node(real("devices/pci0000:00/0000:00:04.0/virtio1")) == 0);  // from the parent
  BOOST_TEST(sysfs_numa_node(real("devices/pci0000:00/0000:00:05.0")) == -1);
  BOOST_TEST(sysfs_numa_node(real("devices/pci0000:00/0000:00:06.0")) == -1);  // unparsable
  BOOST_TEST(sysfs_numa_node(real("devices/platform/vdev0")) == -1);
  BOOST_TEST(sysfs_numa_node("") == -1);
  BOOST_TEST(sysfs_numa_node(r() + "/devices/nowhere") == -1);
  // End to end: PCI path, then NUMA node.
  BOOST_TEST(sysfs_numa_node(sysfs_pci_path(r(), "rxe0", "eth0")) == 0);
  BOOST_TEST(sysfs_numa_node(sysfs_pci_path(r(), "mlx5_0", "")) == 1);
}

BOOST_AUTO_TEST_CASE(pci_bdf_components) {
  for (const char* good : {"0000:3b:00.0", "0000:3B:1f.7", "10000:00:02.1", "abcd:ef:01.3"})
    BOOST_TEST(is_pci_bdf(good), good);
  for (const char* bad : {"", "virtio0", "pci0000:00", "0000:3b:00", "0000:3b:00.8", "000:3b:00.0", "0000:3b:0g.0",
                          "0000-3b:00.0", "0000:3b:00:0", "x0000:3b:00.0", "0000:3b:00.0 "})
    BOOST_TEST(!is_pci_bdf(bad), bad);
}

BOOST_AUTO_TEST_CASE(gid_netdev) {
  BOOST_TEST(sysfs_gid_netdev(r(), "rxe0", 1, 0) == "eth0");
  BOOST_TEST(sysfs_gid_netdev(r(), "rxe0", 1, 1) == "eth0");
  BOOST_TEST(sysfs_gid_netdev(r(), "rxe0", 2, 0) == "eth1");
  BOOST_TEST(sysfs_gid_netdev(r(), "rxe0", 1, 5) == "");  // no such GID entry
  BOOST_TEST(sysfs_gid_netdev(r(), "rxe0", 3, 0) == "");  // no such port
  BOOST_TEST(sysfs_gid_netdev(r(), "mlx5_0", 1, 0) == "");
  BOOST_TEST(sysfs_gid_netdev(r(), "nope", 1, 0) == "");
}

BOOST_AUTO_TEST_SUITE_END()

// NCCL's PCI path and real port on fixture trees: a dual-port NIC (one PCI function per port),
// SR-IOV virtual functions with and without NCCL_IB_MERGE_VFS, a Soft-RoCE port on virtio.
BOOST_FIXTURE_TEST_SUITE(nccl_pci_identity, SysfsFixture)

struct NcclView {
  std::vector<std::string> paths;
  std::vector<int> ports;
};
// What NCCL would be told about `devices` (name, port), in this order.
NcclView nccl_view(const SysfsFixture& f, const std::vector<std::pair<std::string, std::uint32_t>>& devices,
                   bool merge_vfs) {
  NcclView v;
  for (const auto& [dev, port] : devices) {
    const std::string netdev = dev.rfind("rxe", 0) == 0 ? "eth0" : "";
    v.paths.push_back(nccl_pci_path(sysfs_pci_path(f.r(), dev, netdev), merge_vfs));
  }
  const auto real = nccl_real_ports(v.paths);
  for (std::size_t i = 0; i < devices.size(); ++i) v.ports.push_back(static_cast<int>(devices[i].second) + real[i]);
  return v;
}

BOOST_AUTO_TEST_CASE(dual_port_nic_is_one_pci_device_with_two_ports) {
  const fs::path nic = root / "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
  fs::create_directories(nic.parent_path() / "0000:3b:00.1");
  fs::create_directories(nic);
  link(root / "class/infiniband/mlx5_4/device", "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
  link(root / "class/infiniband/mlx5_5/device", "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1");
  for (bool merge : {true, false}) {
    BOOST_TEST_CONTEXT("merge_vfs " << merge) {
      const auto v = nccl_view(*this, {{"mlx5_4", 1}, {"mlx5_5", 1}}, merge);
      const std::string one = real("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
      BOOST_TEST(v.paths == (std::vector<std::string>{one, one}), boost::test_tools::per_element());
      BOOST_TEST(v.ports == (std::vector<int>{1, 2}), boost::test_tools::per_element());
    }
  }
  // The plugin's own path keeps the function.
  BOOST_TEST(sysfs_pci_path(r(), "mlx5_5", "") == real("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1"));
}

BOOST_AUTO_TEST_CASE(virtual_functions_merge_only_with_merge_vfs) {
  const std::string bus = "devices/pci0000:5d/0000:5d:00.0/";
  for (const char* fn : {"0000:5e:00.0", "0000:5e:00.2", "0000:5e:01.3"}) fs::create_directories(root / (bus + fn));
  link(root / "class/infiniband/mlx5_8/device", "../../../" + bus + "0000:5e:00.0");   // PF
  link(root / "class/infiniband/mlx5_9/device", "../../../" + bus + "0000:5e:00.2");   // VF, device 00
  link(root / "class/infiniband/mlx5_10/device", "../../../" + bus + "0000:5e:01.3");  // VF, device 01
  const std::string pf = real(bus + "0000:5e:00.0");
  const std::string dev1 = pf.substr(0, pf.size() - 4) + "01.0";
  const auto merged = nccl_view(*this, {{"mlx5_8", 1}, {"mlx5_9", 1}, {"mlx5_10", 1}}, true);
  BOOST_TEST(merged.paths == (std::vector<std::string>{pf, pf, pf}), boost::test_tools::per_element());
  BOOST_TEST(merged.ports == (std::vector<int>{1, 2, 3}), boost::test_tools::per_element());
  const auto apart = nccl_view(*this, {{"mlx5_8", 1}, {"mlx5_9", 1}, {"mlx5_10", 1}}, false);
  BOOST_TEST(apart.paths == (std::vector<std::string>{pf, pf, dev1}), boost::test_tools::per_element());
  BOOST_TEST(apart.ports == (std::vector<int>{1, 2, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(soft_roce_path_is_not_mangled) {
  // rxe0 sits on eth0, a virtio NIC: its path ends in virtio1, not in a PCI address: reported as is.
  const std::string virtio = real("devices/pci0000:00/0000:00:04.0/virtio1");
  for (bool merge : {true, false}) {
    const auto v = nccl_view(*this, {{"rxe0", 1}, {"mlx5_0", 1}}, merge);
    BOOST_TEST(v.paths[0] == virtio);
    // mlx5_0 (0000:00:03.0): merged to device 00 with VF merging, as NCCL does.
    BOOST_TEST(v.paths[1] == real("devices/pci0000:00") + (merge ? "/0000:00:00.0" : "/0000:00:03.0"));
    BOOST_TEST(v.ports == (std::vector<int>{1, 1}), boost::test_tools::per_element());
  }
  // The digits of a BDF earlier in the path are not touched either.
  BOOST_TEST(nccl_pci_path("/sys/devices/pci0000:00/0000:00:04.7/virtio1", true) ==
             "/sys/devices/pci0000:00/0000:00:04.7/virtio1");
  BOOST_TEST(nccl_pci_path("", true) == "");
  // Devices without a path never share one.
  BOOST_TEST(nccl_real_ports({"", "", "/a/0000:01:00.0", "/a/0000:01:00.0", ""}) ==
                 (std::vector<int>{0, 0, 0, 1, 0}),
             boost::test_tools::per_element());
}

// net_ib's sort key (NCCL_IB_DEVICE_PCI_ORDER): the PCI address as one hex number, from the last
// path component that is one (a Soft-RoCE port: its virtio NIC's function).
BOOST_AUTO_TEST_CASE(pci_order_key_is_nccls_number) {
  BOOST_TEST(*pci_order_key("/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0") == 0x000002000);
  BOOST_TEST(*pci_order_key("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1") == 0x00003b001);
  BOOST_TEST(*pci_order_key("/sys/devices/pci10000:00/10000:00:00.0/10000:e1:00.0") == 0x10000e1000);
  BOOST_TEST(*pci_order_key("/x/0000:AB:1f.7") == 0x0000ab1f7);
  BOOST_TEST(*pci_order_key("/sys/devices/pci0000:00/0000:00:13.0/virtio3") == 0x000000130);
  BOOST_TEST(!pci_order_key("").has_value());
  BOOST_TEST(!pci_order_key("/sys/devices/platform/vdev0").has_value());
  BOOST_TEST(!pci_order_key("/sys/devices/pci0000:00").has_value());
}

// Devices in PCI order whatever their names (mlx5_10 on bus 0x1a before mlx5_2 on bus 0x9c; the
// verbs library's and the names' order both differ from it), ports of one device by port number,
// devices without a PCI address last, by name.
BOOST_AUTO_TEST_CASE(devices_sorted_in_pci_order) {
  auto at = [](std::string dev, std::uint32_t port, std::string path) {
    PortInfo p;
    p.device = std::move(dev);
    p.port = port;
    p.pci_path = std::move(path);
    return p;
  };
  std::vector<PortInfo> ports = {at("mlx5_2", 1, "/d/pci0000:97/0000:97:02.0/0000:9c:00.0"),
                                 at("rxe1", 1, ""),
                                 at("mlx5_10", 2, "/d/pci0000:18/0000:18:02.0/0000:1a:00.0"),
                                 at("mlx5_3", 1, "/d/pci0000:97/0000:97:02.0/0000:9c:00.1"),
                                 at("mlx5_10", 1, "/d/pci0000:18/0000:18:02.0/0000:1a:00.0"),
                                 at("rxe0", 1, "/d/platform/vdev0"),
                                 at("mlx5_1", 1, "/d/pci0000:18/0000:18:02.0/0000:1b:00.0")};
  sort_pci_order(ports);
  std::vector<std::string> order;
  for (const auto& p : ports) order.push_back(p.id());
  BOOST_TEST(order == (std::vector<std::string>{"mlx5_10:1", "mlx5_10:2", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1",
                                                "rxe0:1", "rxe1:1"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
