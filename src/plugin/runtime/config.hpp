// HA_NCCL_* settings read once at init, the warnings about unwise combinations, and the APM
// check. A malformed or out-of-range value is never fatal: it is WARNed about (naming the
// variable, the value and the default) and the default is used.
//
// Read elsewhere, not here:
//   HA_NCCL_QP_TIMEOUT (1..31, default 14) and HA_NCCL_QP_RETRY_CNT (0..7, default 7):
//     net::QpTimeouts::from_env() (src/net/qp.cpp), with the same WARN-and-default rule. init.cpp
//     then adjusts them on Soft-RoCE (timeout 17, retry count 6) unless the variables are set.
//   HA_NCCL_IB_HCA, HA_NCCL_IB_GID_INDEX: ha_net (device_filter.cpp, discovery.cpp).
//   HA_NCCL_LOG_LEVEL: the reactor's logger (from_lookup only WARNs about an unknown value);
//   HA_NCCL_DEBUG is also read by log.cpp.
//   HA_NCCL_TEST_*: test_hooks.cpp (State::hooks), in test builds only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::plugin {

struct Config {
  int max_poll = 16;                 // HA_NCCL_MAX_POLL 1..64: CQ entries one test() reaps at most
  int handshake_timeout_ms = 30000;  // HA_NCCL_HANDSHAKE_TIMEOUT_MS 100..3600000: one connect/accept handshake
  // The handshake interface with NCCL's syntax (prefixes, '=' exact, '^' exclude; net/socket_if.hpp),
  // from HA_NCCL_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME; empty: automatic (no loopback, docker*,
  // virbr*; non-rail interfaces before RDMA netdevs). socket_ifname_var names the variable it came from.
  std::string socket_ifname;
  std::string socket_ifname_var = "NCCL_SOCKET_IFNAME";
  // HA_NCCL_SOCKET_FAMILY, else NCCL_SOCKET_FAMILY: AF_INET or AF_INET6 (0: either, IPv4 preferred).
  int socket_family = 0;
  std::string socket_family_var = "NCCL_SOCKET_FAMILY";
  int debug = 0;                     // HA_NCCL_DEBUG 0..3
  bool enable_standby = true;        // HA_NCCL_ENABLE_STANDBY 0/1
  int heartbeat_ms = 200;            // HA_NCCL_HEARTBEAT_MS 10..60000
  int rto_ms = 1000;                 // HA_NCCL_RTO_MS 10..600000 (soft RTO)
  int max_retries = 10;              // HA_NCCL_MAX_RETRIES 0..1000000: failovers allowed per comm per window
  int retry_window_ms = 600000;      // HA_NCCL_RETRY_WINDOW_MS 1000..86400000: that window (10 min)
  bool enable_failback = true;       // HA_NCCL_ENABLE_FAILBACK 0/1 (unset: on when HA is)
  int failback_hold_ms = 5000;       // HA_NCCL_FAILBACK_HOLD_MS 0..3600000: primary must be healthy this long
                                     // (doubled per further failover in the retry window, at most x32)
  bool use_progress_thread = true;   // HA_NCCL_USE_PROGRESS_THREAD 0/1
  int failover_timeout_ms = 1000;    // HA_NCCL_FAILOVER_TIMEOUT_MS 50..60000: bound on agreeing with the peer
  int rescue_timeout_ms = 10000;     // HA_NCCL_RESCUE_TIMEOUT_MS 100..600000: bound on building a new path when none is left (rescue.hpp)
  std::string standby_map;           // HA_NCCL_STANDBY_MAP, e.g. "rxe0:rxe1,rxe1:rxe0" (standby_map.hpp)
  // HA_NCCL_ISLAND_PREFIX_LEN 0..128: the prefix length that classifies ports into islands
  // (topology.hpp island_of: IPv4 bits for an IPv4 rail, bits of the 128-bit address for IPv6 and
  // IB; never longer than the rail's own). Ports of different islands never pair up. -1: unset,
  // "from the address": each port's island is its own rail (subnet). Same value on every node.
  int island_prefix_len = -1;
  std::string stats_file;            // HA_NCCL_STATS_FILE (%h host, %p pid, %% expanded at init)
  std::string prom_file;             // HA_NCCL_PROM_FILE: Prometheus text snapshot (%h, %p, %% expanded)
  int prom_interval_ms = 10000;      // HA_NCCL_PROM_INTERVAL_MS 100..3600000: its period
  // HA_NCCL_STRIPE_WEIGHTS_FILE: the weights of fused devices' members, read again whenever it
  // changes (stripe_weights.hpp); "": each port weighs its speed.
  std::string stripe_weights_file;
  // HA_NCCL_FORCE_FLUSH 0/1: every iflush of received data reads the last buffer back with an RDMA
  // READ through the NIC that wrote it (what GPU buffers written by GPUDirect RDMA need before
  // the GPU reads them), also for host memory; reported as forceFlush. Costs a loopback QP per
  // device of every receive comm.
  bool force_flush = false;
  // HA_NCCL_FORCE_IB_TIMEOUT 0/1 (docs/settings.md, "Configuration read by the libraries": the plugin's
  // short IB timeout must not be overridden behind the user's back). 1: the QP timeout is exactly
  // HA_NCCL_QP_TIMEOUT, else NCCL_IB_TIMEOUT (or the default 14): no per-device adjustment, in
  // particular not the Soft-RoCE timeout 17. The Soft-RoCE retry-count cap (7 means "for ever"
  // there) is a correctness fix, not a tuning, and stays unless a retry count is set.
  bool force_ib_timeout = false;
  // QoS of every QP the plugin connects, primary and standby (and standbys rebuilt later), with
  // NCCL's names and rules: HA_NCCL_IB_TC, else NCCL_IB_TC (0..255, the GRH traffic class: on RoCE
  // the IP header's DSCP/ECN byte) and HA_NCCL_IB_SL, else NCCL_IB_SL (0..15); -1: not set.
  int ib_tc = -1;
  int ib_sl = -1;
  // HA_NCCL_IB_FIFO_TC, else NCCL_IB_FIFO_TC (0..255; -1: not set): on RoCE, the traffic class of a
  // receive comm's QPs - its clear-to-send writes and the acknowledgements of the data - as net_ib
  // gives it to its receiver's QPs (receiver_qos).
  int ib_fifo_tc = -1;
  // HA_NCCL_IB_MERGE_VFS, else NCCL_IB_MERGE_VFS (0/1, default 1, NCCL's): the PCI path reported
  // to NCCL merges SR-IOV virtual functions into their NIC (net::nccl_pci_path()).
  bool ib_merge_vfs = true;
  std::string ib_merge_vfs_var = "NCCL_IB_MERGE_VFS";  // the variable it came from
  // HA_NCCL_IB_DEVICE_PCI_ORDER, else NCCL_IB_DEVICE_PCI_ORDER (0/1, default 1, NCCL's): devices
  // numbered in PCI-address order (net::sort_pci_order), so every rank numbers its NICs alike; 0: by name.
  bool ib_device_pci_order = true;
  // HA_NCCL_IB_MERGE_NICS, else NCCL_IB_MERGE_NICS (0/1, default 1, net_ib's): makeVDevice may fuse
  // several ports into one virtual device (vdevice.hpp); 0: it refuses any fusion, as net_ib does.
  bool ib_merge_nics = true;
  // HA_NCCL_DMABUF_ENABLE, else NCCL_DMABUF_ENABLE (0/1, default 1): ptrSupport may offer DMABUF
  // (where the device's probe says it can register dma-bufs: mr_ops.hpp). `_var`: where it came from.
  int dmabuf_enable = 1;
  std::string dmabuf_enable_var = "NCCL_DMABUF_ENABLE";
  // HA_NCCL_IB_PCI_RELAXED_ORDERING, else NCCL_IB_PCI_RELAXED_ORDERING: 0 off, 1 on, 2 auto
  // (default); NCCL's rule (mr_ops.hpp relaxed_ordering_on) decides per device at init.
  int relaxed_ordering = 2;
  std::string relaxed_ordering_var = "NCCL_IB_PCI_RELAXED_ORDERING";
  // HA_NCCL_IB_GDR_FLUSH_DISABLE, else NCCL_IB_GDR_FLUSH_DISABLE (0/1, default 0, net_ib's): 1:
  // GPU buffers are not read back (no flush QPs unless HA_NCCL_FORCE_FLUSH; iflush completes at
  // once), for platforms whose PCIe ordering makes the READ unnecessary.
  bool gdr_flush_disable = false;
  // HA_NCCL_IB_ECE_ENABLE, else NCCL_IB_ECE_ENABLE (net_ib's: default 1, 0 off): each QP offers
  // the ECE its device reports and agrees on it with the peer's (net/ece.hpp). Off on either side:
  // the connection goes without (net_ib reads it on the connecting side only).
  bool ece_enable = true;
  // HA_NCCL_IB_QPS_PER_CONNECTION, else NCCL_IB_QPS_PER_CONNECTION (net_ib's: default 1): the RC
  // QPs of each path (primary, standby, every re-protected path), at most 8 (net_ib's 128: a
  // larger value is WARNed about and 8 taken); messages go round robin over them (seq % count),
  // or with HA_NCCL_IB_SPLIT_DATA_ON_QPS, else NCCL_IB_SPLIT_DATA_ON_QPS (0/1, default 0), each
  // split across them. The two sides agree on the smaller count (net_ib: the larger) and split
  // only when both ask.
  int qps_per_connection = 1;
  bool split_data_on_qps = false;
  // HA_NCCL_IB_ADAPTIVE_ROUTING, else NCCL_IB_ADAPTIVE_ROUTING (net_ib's): -2 (default) on for
  // InfiniBand ports, off for RoCE; 0 off; 1 on. With it, a message larger than
  // HA_NCCL_IB_AR_THRESHOLD, else NCCL_IB_AR_THRESHOLD (bytes, default 8192), goes as a plain RDMA
  // write followed by a small write with immediate data (path_ops.cpp post_data).
  int adaptive_routing = -2;
  std::uint64_t ar_threshold = 8192;
  static Config from_env();
  // The same from any source of variables (tests, fuzzers: no setenv).
  static Config from_lookup(const net::EnvLookup& env);
};

// The traffic class and service level of one connection.
struct Qos {
  std::uint8_t traffic_class = 0;
  std::uint8_t service_level = 0;
  friend bool operator==(const Qos&, const Qos&) = default;
};

// NCCL's rule (net_ib): the variable when set, else the communicator's trafficClass
// (ncclConfig_t.trafficClass via ncclNetCommConfig; -1 = undefined) when given, else 0. NCCL also
// takes the trafficClass as the service level; an SL has 4 bits, so a trafficClass above 15
// leaves the SL at 0 here instead of failing the QP transition. The connector decides; the
// listener uses the connector's values (they travel in the connection request), as NCCL does.
Qos resolve_qos(const Config& c, int comm_traffic_class);
// A receive comm's QoS: the connector's, with NCCL_IB_FIFO_TC's traffic class on RoCE when set
// (net_ib: the receiver's QPs carry only its clear-to-send writes and acknowledgements).
Qos receiver_qos(const Config& c, const Qos& connector, bool roce);

// A port's adaptive-routing threshold: messages larger go as a plain write and a size notice;
// kNoAdaptiveRouting when the mode is off for its link layer (IBV_LINK_LAYER_*). Pure function.
constexpr std::uint64_t kNoAdaptiveRouting = ~std::uint64_t{0};
std::uint64_t ar_threshold_for(const Config& c, std::uint8_t link_layer);

// WARN lines for settings that are legal but unwise: the soft RTO below twice the hardware retry
// window (4.096 us * 2^timeout * (retry_cnt + 1)), heartbeat_ms*3 > rto_ms, etc. Pure function.
std::vector<std::string> config_warnings(const Config& c, std::uint32_t qp_timeout, std::uint32_t qp_retry_cnt);

// NCCL_IB_* settings an operator may have set for net_ib that this plugin does not honour, each as
// "NAME=value (what the plugin does instead)": said once at init (a WARN), so that nobody expects
// their effect. Values that ask for net_ib's default behaviour are not listed. Pure function.
std::vector<std::string> unhonoured_nccl_settings(const net::EnvLookup& env);

// The hardware retry window in milliseconds: 4.096 us * 2^timeout * (retry_cnt + 1); 0 for
// timeout 0 (no ACK timeout: the hardware waits for ever).
double hw_retry_window_ms(std::uint32_t qp_timeout, std::uint32_t qp_retry_cnt);

// "HA_NCCL_X=value ..." one line with every effective setting (logged at INFO at init).
std::string describe(const Config& c);

// APM (automatic path migration) on `device` port `port` (docs/operator-guide.md, "What operators see"):
// true when <sysfs_root>/class/infiniband/<device>/ports/<port>/apm_enable holds a non-zero
// integer. Honest limit: mainline Linux has no such file (the port directory holds state, lid,
// lid_mask_count, sm_lid, sm_sl, cap_mask, rate, phys_state, link_layer, gids/, pkeys/,
// gid_attrs/, counters/, hw_counters/), so on a stock kernel this is false. That is also the
// truth that matters here: APM is per QP, armed only by the QP's owner loading an alternate path
// (ibv_modify_qp with IBV_QP_ALT_PATH / IBV_QP_PATH_MIG_STATE); the plugin never does, so the
// HCA cannot migrate the plugin's QPs. A file that is missing, unreadable or not an integer: false.
bool apm_enabled(const std::string& sysfs_root, const std::string& device, std::uint32_t port);

// Whether the port can do APM at all: bit IsAutomaticMigrationSupported (IBV_PORT_AUTO_MIGR_SUP,
// 1 << 5) of <sysfs_root>/class/infiniband/<device>/ports/<port>/cap_mask ("0x%08x"). A capability,
// not a state: it says nothing about any QP using APM. False when the file is missing or malformed.
bool apm_supported(const std::string& sysfs_root, const std::string& device, std::uint32_t port);

}  // namespace nccl_ha::plugin
