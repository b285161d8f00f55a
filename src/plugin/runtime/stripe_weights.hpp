// The striping weights an operator or an agent sets at run time (issue #33): a file of
// "<device>[:<port>] <weight>" lines that says how much of each message a fused device's member
// port carries. The file is input from whoever can write it: it is read only when it is a regular
// file, not through a symbolic link, owned by this user or root and writable by no one else, at
// most kMaxWeightsFileBytes long; a file that breaks any rule, or any line of it, is refused whole
// with a message naming why (the weights in force stay as they were).
//
// parse_weights and WeightsFile's checks are pure or plain file reads: unit-tested with real files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_ha/reactor/expected.hpp"
#include "nccl_ha/reactor/reactor.hpp"

namespace nccl_ha::plugin {

constexpr std::size_t kMaxWeightsFileBytes = 64 * 1024;
constexpr std::size_t kMaxWeightEntries = 256;
constexpr std::uint32_t kMaxStripeWeight = 1u << 20;  // a weight is 0 .. 2^20 (0: carries nothing)

// One line: a port (its verbs device name and port number; 0: every port of the device) and its weight.
struct WeightEntry {
  std::string device;
  std::uint32_t port = 0;
  std::uint32_t weight = 0;
  friend bool operator==(const WeightEntry&, const WeightEntry&) = default;
};

// The entries of a weights file's text: one per line, "<device>[:<port>] <weight>" or
// "<device>[:<port>]=<weight>", blanks around the fields, '#' to the end of a line a comment,
// empty lines ignored. Refused (the message names the line): a device name that is not
// [A-Za-z0-9_.-]{1,64}, a port that is not 1..255, a weight that is not an integer in
// 0..kMaxStripeWeight, anything after the weight, the same port twice, more than
// kMaxWeightEntries entries, a NUL byte.
Expected<std::vector<WeightEntry>> parse_weights(std::string_view text);

// A weights file, looked at again whenever the caller polls (the reactor's timer): read only when
// it changed (device, inode, size, modification time), checked as above.
class WeightsFile {
 public:
  explicit WeightsFile(std::string path) : path_(std::move(path)) {}
  struct Change {
    std::optional<std::vector<WeightEntry>> entries;  // the new weights; nullopt: refused (`error`)
    std::string error;
  };
  // nullopt: unchanged since the last poll (a file that was and still is missing, too). A file
  // that went away: an error once. The first poll reports the file as it is.
  std::optional<Change> poll();
  const std::string& path() const noexcept { return path_; }

 private:
  struct Signature {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    std::int64_t mtime_ns = -1;
    bool missing = false;
    friend bool operator==(const Signature&, const Signature&) = default;
  };
  std::string path_;
  std::optional<Signature> last_;
};

// The text of the file at `path` if it may be trusted: opened with O_NOFOLLOW (a symbolic link is
// refused), a regular file, owned by `uid` or root, not writable by group or others, at most
// kMaxWeightsFileBytes. Pure apart from the reads; `uid` is the process's effective uid.
Expected<std::string> read_trusted_file(const std::string& path, uid_t uid);

// A port's weight under `entries`: its own line's ("<device>:<port>"), else its device's
// ("<device>"), else its speed in Mbps (at least 1: a port of unknown speed still carries its part).
// Pure; unit-tested.
std::uint32_t weight_for(std::span<const WeightEntry> entries, std::string_view device, std::uint32_t port,
                         int speed_mbps) noexcept;

struct Device;
// Every port's Device::stripe_weight from its speed; then, with a `path`, the file watched on the
// reactor (looked at every kWeightsPollMs): each change read, checked and applied to every port
// (INFO naming the weights), a refused file WARNed about with the weights in force kept.
constexpr int kWeightsPollMs = 200;
void start_stripe_weights(reactor::Reactor& r, const std::string& path, std::span<const std::unique_ptr<Device>> devices);

}  // namespace nccl_ha::plugin
