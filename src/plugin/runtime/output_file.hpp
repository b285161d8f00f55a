// The files the plugin writes for operators: HA_NCCL_STATS_FILE (appended to) and
// HA_NCCL_PROM_FILE (replaced whole at every snapshot). Both often live in a directory others can
// write to (/tmp, a shared node_exporter directory), so neither ever follows a symbolic link at
// its name, and no two processes share a temporary name:
//   - AppendFile opens its file with O_NOFOLLOW and takes only a regular file;
//   - replace_file writes a temporary file of its own (mkostemp: a name that exists, link or not,
//     is never opened) beside the target and renames it over the target (rename replaces a
//     symbolic link at the target's name; the file it pointed to is not touched).
// Modes: the stats file is created 0640 (less what the umask removes; an existing file keeps its
// mode); the Prometheus file is exactly 0644 (node_exporter, usually a user of its own, reads it;
// it holds counts and port names only). Unit-tested (output_file_test.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace nccl_ha::plugin {

inline constexpr mode_t kStatsFileMode = 0640;
inline constexpr mode_t kPromFileMode = 0644;

// HA_NCCL_STATS_FILE's writer: appends chunks of lines to the file at `path`, kept open between
// chunks (a failover storm writes thousands of lines a second; opening the file for each chunk cost
// a path walk every time), and opened again when the path names another file than the one open -
// rotated or removed - which is looked at once a second at most, or after a failed write. Opened
// O_WRONLY|O_APPEND|O_CREAT|O_NOFOLLOW|O_CLOEXEC (mode kStatsFileMode); a symbolic link or anything
// but a regular file at `path` is refused. One writer at a time (not thread-safe).
class AppendFile {
 public:
  explicit AppendFile(std::string path) : path_(std::move(path)) {}
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  // `now_ns`: a monotonic clock (the once-a-second look). False: the chunk was not (wholly)
  // written, error() says why; the next append opens the file again.
  bool append(std::string_view chunk, std::uint64_t now_ns);
  // Why the last append failed: "a symbolic link (not followed)", "not a regular file", or the
  // system's text for the error.
  const std::string& error() const noexcept { return error_; }

 private:
  bool open_file(std::uint64_t now_ns);
  bool fail(std::string why);
  void close_file() noexcept;
  std::string path_;
  std::string error_;
  int fd_ = -1;
  std::uint64_t checked_ns_ = 0;
};

// A temporary file of its own beside `target`: "<target's directory>/.<target's name>.XXXXXX",
// made by mkostemp (O_CREAT|O_EXCL, O_CLOEXEC; unique per process and call) and set to `mode` with
// fchmod (the umask does not apply). commit() renames it over `target`; a TempFile destroyed
// without a commit removes its file.
class TempFile {
 public:
  TempFile(const std::string& target, mode_t mode);  // ok() false: not created, error() says why
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  bool ok() const noexcept { return fd_ >= 0; }
  const std::string& name() const noexcept { return name_; }  // the temporary file's path
  const std::string& error() const noexcept { return error_; }
  bool write(std::string_view text);  // all of it; false with error()
  bool commit();                      // close, then rename over the target; false with error()

 private:
  bool fail(const char* what);
  std::string target_;
  std::string name_;
  std::string error_;
  int fd_ = -1;
  bool committed_ = false;
};

// `text` as the whole content of `path`, through a TempFile of mode `mode`. A reader of `path`
// sees the old content or the new, never part of it. False: `path` is unchanged, *why (when
// given) says what failed.
bool replace_file(const std::string& path, std::string_view text, mode_t mode, std::string* why = nullptr);

}  // namespace nccl_ha::plugin
