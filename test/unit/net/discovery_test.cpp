// Discovery helpers: speed/width/MTU tables, names, and the sysfs lookups against a fixture
// sysfs tree built in a temporary directory (device symlinks, numa_node files, GID ndevs).
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

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
