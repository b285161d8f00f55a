#include "runtime/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace nccl_ha::plugin {

// ---- AppendFile

AppendFile::~AppendFile() { close_file(); }

void AppendFile::close_file() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool AppendFile::fail(std::string why) {
  error_ = std::move(why);
  return false;
}

bool AppendFile::open_file(std::uint64_t now_ns) {
  // O_NONBLOCK: a FIFO at the name fails or is refused below instead of blocking the writer.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                        kStatsFileMode);
  if (fd < 0) {
    const int e = errno;
    struct stat named {};
    if (e == ELOOP && ::lstat(path_.c_str(), &named) == 0 && S_ISLNK(named.st_mode)) {
      errno = e;
      return fail("a symbolic link (not followed)");
    }
    errno = e;
    return fail(std::strerror(e));
  }
  struct stat opened {};
  if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode)) {
    ::close(fd);
    errno = EINVAL;
    return fail("not a regular file");
  }
  fd_ = fd;
  checked_ns_ = now_ns;
  return true;
}

bool AppendFile::append(std::string_view chunk, std::uint64_t now_ns) {
  constexpr std::uint64_t kLookNs = 1'000'000'000;
  if (fd_ >= 0 && now_ns - checked_ns_ >= kLookNs) {
    checked_ns_ = now_ns;
    struct stat open_file {}, named {};
    if (::fstat(fd_, &open_file) != 0 || ::lstat(path_.c_str(), &named) != 0 || open_file.st_dev != named.st_dev ||
        open_file.st_ino != named.st_ino)
      close_file();  // rotated, removed or replaced: the path's file from now on
  }
  if (fd_ < 0 && !open_file(now_ns)) return false;
  while (!chunk.empty()) {
    const ssize_t n = ::write(fd_, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      close_file();
      errno = e;
      return fail(std::strerror(e));
    }
    chunk.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// ---- TempFile

TempFile::TempFile(const std::string& target, mode_t mode) : target_(target) {
  const auto slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : target.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string templ = dir + "." + base + ".XXXXXX";
  const int fd = ::mkostemp(templ.data(), O_CLOEXEC);
  if (fd < 0) {
    fail("cannot create a temporary file beside it");
    return;
  }
  fd_ = fd;
  name_ = std::move(templ);
  if (::fchmod(fd_, mode) != 0) {
    fail("cannot set the temporary file's mode");
    ::close(fd_);
    fd_ = -1;
  }
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !name_.empty()) ::unlink(name_.c_str());
}

bool TempFile::fail(const char* what) {
  error_ = std::string(what) + ": " + std::strerror(errno);
  return false;
}

bool TempFile::write(std::string_view text) {
  if (fd_ < 0) return false;
  while (!text.empty()) {
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return fail("cannot write the temporary file");
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool TempFile::commit() {
  if (fd_ < 0) return false;
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return fail("cannot write the temporary file");
  if (::rename(name_.c_str(), target_.c_str()) != 0) return fail("cannot rename the temporary file over it");
  committed_ = true;
  return true;
}

bool replace_file(const std::string& path, std::string_view text, mode_t mode, std::string* why) {
  TempFile tmp(path, mode);
  if (tmp.ok() && tmp.write(text) && tmp.commit()) return true;
  if (why) *why = tmp.error();
  return false;
}

}  // namespace nccl_ha::plugin
