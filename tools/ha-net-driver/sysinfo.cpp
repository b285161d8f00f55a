#include "sysinfo.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <thread>

namespace hnd {
namespace {

int count_dir(const char* path) {
  DIR* d = ::opendir(path);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

std::vector<int> thread_ids() {
  std::vector<int> out;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') out.push_back(std::atoi(e->d_name));
  ::closedir(d);
  return out;
}

// Objects of `kind` (mr, qp) owned by this process, from `rdma -j resource show <kind>`.
std::optional<int> count_verbs(const char* kind) {
  DIR* d = ::opendir("/sys/class/infiniband");
  if (!d) return std::nullopt;
  ::closedir(d);
  if (::access("/usr/sbin/rdma", X_OK) != 0 && ::access("/sbin/rdma", X_OK) != 0 && ::access("/usr/bin/rdma", X_OK) != 0)
    return std::nullopt;
  std::string cmd = std::string("rdma -j resource show ") + kind + " 2>/dev/null";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (st != 0 || out.empty() || out[0] != '[') return std::nullopt;
  return count_owned(out, thread_ids());
}

}  // namespace

int count_owned(const std::string& json, const std::vector<int>& tids) {
  // A flat array of flat objects: split at '}' and look at each object's "pid" and "comm".
  int count = 0;
  std::size_t pos = 0;
  for (std::size_t end = json.find('}', pos); end != std::string::npos; pos = end + 1, end = json.find('}', pos)) {
    const std::string obj = json.substr(pos, end - pos);
    const std::size_t at = obj.find("\"pid\":");
    if (at == std::string::npos) {
      if (obj.find("\"comm\":") == std::string::npos && obj.find('{') != std::string::npos) ++count;  // an orphan
      continue;
    }
    const int pid = std::atoi(obj.c_str() + at + 6);
    if (std::find(tids.begin(), tids.end(), pid) != tids.end()) ++count;
  }
  return count;
}

int count_fds() {
  // opendir itself holds one descriptor while counting.
  int n = count_dir("/proc/self/fd");
  return n < 0 ? -1 : n - 1;
}

std::int64_t rss_kib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long long size = 0, resident = 0;
  int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (got != 2) return -1;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

int count_threads() { return count_dir("/proc/self/task"); }

Snapshot snapshot(bool with_verbs) {
  Snapshot s;
  if (with_verbs) {
    s.mrs = count_verbs("mr");
    s.qps = count_verbs("qp");
  }
  s.fds = count_fds();
  s.rss_kib = rss_kib();
  s.threads = count_threads();
  return s;
}

int wait_fds_at_most(int target, int grace_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  int n = count_fds();
  while (n > target && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    n = count_fds();
  }
  return n;
}

bool same_counts(const Snapshot& a, const Snapshot& b) {
  return a.fds == b.fds && a.threads == b.threads && a.mrs == b.mrs && a.qps == b.qps;
}

Snapshot settled_snapshot(int stable_ms, int bound_ms) {
  using std::chrono::steady_clock;
  const auto t0 = steady_clock::now();
  const auto end = t0 + std::chrono::milliseconds(bound_ms);
  Snapshot s = snapshot(true);
  auto since = steady_clock::now();
  while (steady_clock::now() < end && steady_clock::now() - since < std::chrono::milliseconds(stable_ms)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    Snapshot n = snapshot(true);
    if (!same_counts(n, s)) since = steady_clock::now();
    s = n;
  }
  return s;
}

Snapshot snapshot_until_same(const Snapshot& target, int bound_ms, double* waited_ms) {
  using std::chrono::steady_clock;
  const auto t0 = steady_clock::now();
  const auto end = t0 + std::chrono::milliseconds(bound_ms);
  Snapshot s = snapshot(true);
  while (!same_counts(s, target) && steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    s = snapshot(true);
  }
  *waited_ms = std::chrono::duration<double, std::milli>(steady_clock::now() - t0).count();
  return s;
}

}  // namespace hnd
