// Fault injection for the VM tests: the HA_NCCL_TEST_* settings. They exist only in a plugin
// built with -DNCCL_HA_TEST_HOOKS=ON (the test builds: scripts/test.sh, scripts/fuzz.sh). In any
// other build (the default, the packages) kTestHooks is false: from_lookup reads no variable,
// every accessor below is a constant "off", and the code behind a hook is dropped by the compiler
// (scripts/package-check.sh checks that the packaged plugin holds no HA_NCCL_TEST_* name).
//
// The hooks (each 0 / empty: off):
//   HA_NCCL_TEST_ACK_DELAY_MS 0..60000: the listener holds every handshake this long between the
//     connector's conn_ready and its decision (queue + conn_ack, or the error frame when
//     closeListen came first), with a WARN per connection (listen.cpp; VM test plugin-errors).
//   HA_NCCL_TEST_FAILBACK_STALL_MS 0..60000 at HA_NCCL_TEST_FAILBACK_STALL_AT `switch` (the sender,
//     before it writes its notice on the target) or `finish` (the sender, after the receiver's
//     report came): a failback is held there that long (failover.cpp; VM test failover-failback-flap).
//   HA_NCCL_TEST_STANDBY_DELAY_MS 0..60000: every new comm connects its standby this much later
//     (handshake_common.cpp; VM test failover-standby-late).
//   HA_NCCL_TEST_REPROTECT_DELAY_MS 0..60000: re-protection makes no attempt until this long after
//     the standby was lost (a rescue's and a move's attempts are not held) (reprotect.cpp; VM test
//     rails-sequential).
//   HA_NCCL_TEST_FLUSH_QP_ERROR_MS=T[,T...] (at most 8, each 0..600000): T ms after a receive
//     comm's flush QPs were built, the active slot's loopback QP is moved to ERROR (ha/flush_paths.cpp; VM
//     test failover-flush).
//   HA_NCCL_TEST_REAPER_DELAY_MS=MS[:down] (MS 0..600000): every QP destruction (with ":down", of
//     a path whose port is down) waits this long first, as the kernel does on a dead Soft-RoCE port
//     under some loads (reaper.cpp; VM test plugin-teardown).
// A malformed value is WARNed about and the hook stays off. init WARNs once when any is set.
#pragma once

#ifndef NCCL_HA_TEST_HOOKS
#error "NCCL_HA_TEST_HOOKS (0 or 1) is defined by the build (CMake option NCCL_HA_TEST_HOOKS)"
#endif

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nccl_ha/net/env.hpp"

namespace nccl_ha::plugin {

inline constexpr bool kTestHooks = NCCL_HA_TEST_HOOKS != 0;

class TestHooks {
 public:
  enum FailbackStall : std::uint8_t {
    stall_switch,  // `switch`: the sender holds before it writes its notice on the target
    stall_finish   // `finish`: the sender holds after the receiver's report came, before finish()
  };
  // The hooks as set (what from_lookup reads; tests build them directly).
  struct Values {
    int ack_delay_ms = 0;
    int failback_stall_ms = 0;
    FailbackStall failback_stall_at = stall_switch;
    int standby_delay_ms = 0;
    int reprotect_delay_ms = 0;
    std::vector<int> flush_qp_error_ms;  // sorted
    int reaper_delay_ms = 0;
    bool reaper_delay_down_only = false;
  };

  TestHooks() = default;
  explicit TestHooks(Values v) : v_(std::move(v)) {}
  // The HA_NCCL_TEST_* variables; without kTestHooks none is read and every hook is off.
  static TestHooks from_lookup(const net::EnvLookup& env);

  int ack_delay_ms() const noexcept { return kTestHooks ? v_.ack_delay_ms : 0; }
  int failback_stall_ms() const noexcept { return kTestHooks ? v_.failback_stall_ms : 0; }
  FailbackStall failback_stall_at() const noexcept { return kTestHooks ? v_.failback_stall_at : stall_switch; }
  int standby_delay_ms() const noexcept { return kTestHooks ? v_.standby_delay_ms : 0; }
  int reprotect_delay_ms() const noexcept { return kTestHooks ? v_.reprotect_delay_ms : 0; }
  std::span<const int> flush_qp_error_ms() const noexcept {
    return kTestHooks ? std::span<const int>(v_.flush_qp_error_ms) : std::span<const int>();
  }
  int reaper_delay_ms() const noexcept { return kTestHooks ? v_.reaper_delay_ms : 0; }
  bool reaper_delay_down_only() const noexcept { return kTestHooks && v_.reaper_delay_down_only; }

  // Whether any hook is on.
  bool any() const noexcept {
    return kTestHooks && (v_.ack_delay_ms || v_.failback_stall_ms || v_.standby_delay_ms || v_.reprotect_delay_ms ||
                          !v_.flush_qp_error_ms.empty() || v_.reaper_delay_ms);
  }
  // "HA_NCCL_TEST_X=value ..." of the hooks that are on, for the settings line ("" when none).
  std::string settings() const;
  // The same with what each does, for init's WARN ("" when none).
  std::string effects() const;

 private:
  Values v_;
};

// What one comm keeps of the hooks (CommBase::hooks), set when the comm is made: the failback
// stall, the flush-QP error times, and how far each has gone. Used by the code that runs the hook
// (failover.cpp, flush_paths.cpp), progress thread, comm held; all zero and never read without kTestHooks.
struct CommHooks {
  std::uint64_t failback_stall_ns = 0;  // HA_NCCL_TEST_FAILBACK_STALL_MS
  TestHooks::FailbackStall failback_stall_at = TestHooks::stall_switch;
  std::uint64_t stall_until_ns = 0;     // the failback stall under way ends then (0: none)
  std::vector<std::uint64_t> flush_error_ns;  // HA_NCCL_TEST_FLUSH_QP_ERROR_MS, as now_ns() times
  std::size_t flush_errors_done = 0;
};

}  // namespace nccl_ha::plugin
