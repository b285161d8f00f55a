// ha-net-driver: process resource snapshots (/proc/self, and `rdma resource` for verbs objects).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hnd {

struct Snapshot {
  int fds = -1;                       // entries in /proc/self/fd
  std::int64_t rss_kib = -1;          // resident set from /proc/self/statm
  int threads = -1;                   // entries in /proc/self/task
  std::optional<int> mrs, qps;        // this process's verbs MRs / QPs (`rdma -j resource show`),
                                      // nullopt when no RDMA device or no `rdma` tool
};

// Verbs objects of this process in `rdma -j resource show qp|mr` output. The kernel records the
// *thread* that created an object (its "pid" is that thread's id: a plugin's progress thread shows
// up with its own), so an object counts when its pid is one of `tids` (this process's threads).
// An object without "pid" and without "comm" is a user object whose creating thread has exited
// (kernel objects carry a "comm" and no pid): it counts too, as this process's orphan (on a test
// bed whose only RDMA user is this process; elsewhere they cancel out between snapshots unless
// they change).
int count_owned(const std::string& rdma_json, const std::vector<int>& tids);
int count_fds();
std::int64_t rss_kib();
int count_threads();
Snapshot snapshot(bool with_verbs);

// Polls count_fds() for up to grace_ms until it is <= target (plugins may close asynchronously).
int wait_fds_at_most(int target, int grace_ms);

// fds, threads, MRs and QPs equal (RSS is not compared).
bool same_counts(const Snapshot& a, const Snapshot& b);
// Snapshots (with verbs) every 250 ms until the counts did not change for stable_ms, or bound_ms
// passed (a plugin may finish a connection's setup in the background); returns the last one.
Snapshot settled_snapshot(int stable_ms, int bound_ms);
// Snapshots (with verbs) every 250 ms until the counts equal target's, or bound_ms passed (a plugin
// may destroy verbs objects asynchronously); returns the last one and the time waited.
Snapshot snapshot_until_same(const Snapshot& target, int bound_ms, double* waited_ms);

}  // namespace hnd
