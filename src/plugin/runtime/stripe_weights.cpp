#include "runtime/stripe_weights.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "runtime/device.hpp"
#include "runtime/log.hpp"
#include "runtime/mr_ops.hpp"

namespace nccl_ha::plugin {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

std::optional<std::uint32_t> number(std::string_view s, std::uint32_t max) {
  std::uint32_t v = 0;
  if (s.empty() || s.size() > 10) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

Error line_error(std::size_t line, const std::string& what) {
  return make_error(Errc::invalid_argument, "line " + std::to_string(line) + ": " + what);
}

}  // namespace

Expected<std::vector<WeightEntry>> parse_weights(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return make_error(Errc::invalid_argument, "a NUL byte");
  std::vector<WeightEntry> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const auto sep = line.find_first_of(" \t=");
    if (sep == std::string_view::npos) return line_error(line_no, "no weight ('<device>[:<port>] <weight>')");
    std::string_view port_part = trim(line.substr(0, sep));
    const std::string_view weight_part = trim(line.substr(sep + 1));
    WeightEntry e;
    if (const auto colon = port_part.find(':'); colon != std::string_view::npos) {
      const auto p = number(port_part.substr(colon + 1), 255);
      if (!p || *p == 0) return line_error(line_no, "port '" + std::string(port_part.substr(colon + 1)) + "' is not 1..255");
      e.port = *p;
      port_part = port_part.substr(0, colon);
    }
    if (port_part.empty() || port_part.size() > 64 || !std::all_of(port_part.begin(), port_part.end(), name_char))
      return line_error(line_no, "'" + std::string(port_part.substr(0, 64)) + "' is not a device name");
    e.device = std::string(port_part);
    const auto w = number(weight_part, kMaxStripeWeight);
    if (!w)
      return line_error(line_no, "weight '" + std::string(weight_part.substr(0, 32)) + "' is not an integer in 0.." +
                                     std::to_string(kMaxStripeWeight));
    e.weight = *w;
    for (const auto& seen : out)
      if (seen.device == e.device && seen.port == e.port)
        return line_error(line_no, e.device + (e.port ? ":" + std::to_string(e.port) : "") + " named twice");
    if (out.size() == kMaxWeightEntries)
      return line_error(line_no, "more than " + std::to_string(kMaxWeightEntries) + " entries");
    out.push_back(std::move(e));
  }
  return out;
}

Expected<std::string> read_trusted_file(const std::string& path, uid_t uid) {
  // O_NONBLOCK: a FIFO planted at the name is refused below instead of blocking the reader.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    const int e = errno;
    struct stat named {};
    if (e == ELOOP && ::lstat(path.c_str(), &named) == 0 && S_ISLNK(named.st_mode))
      return make_error(Errc::invalid_argument, "a symbolic link (not followed)");
    return errno_error(e == ENOENT ? Errc::not_found : Errc::system, "open", e);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(Errc::system, "fstat", errno);
  if (!S_ISREG(st.st_mode)) return make_error(Errc::invalid_argument, "not a regular file");
  if (st.st_uid != uid && st.st_uid != 0)
    return make_error(Errc::invalid_argument, "owned by uid " + std::to_string(st.st_uid) + ", not by this user (" +
                                                  std::to_string(uid) + ") or root");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return make_error(Errc::invalid_argument, "writable by group or others");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxWeightsFileBytes)
    return make_error(Errc::oversized, std::to_string(st.st_size) + " bytes, at most " +
                                           std::to_string(kMaxWeightsFileBytes));
  std::string text(kMaxWeightsFileBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {  // it may grow while read: never more than the limit + 1 byte
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(Errc::system, "read", errno);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > kMaxWeightsFileBytes)
    return make_error(Errc::oversized, "more than " + std::to_string(kMaxWeightsFileBytes) + " bytes");
  text.resize(got);
  return text;
}

std::optional<WeightsFile::Change> WeightsFile::poll() {
  Signature now;
  struct stat st {};
  if (::lstat(path_.c_str(), &st) != 0) {
    now.missing = true;
  } else {
    now.dev = st.st_dev;
    now.ino = st.st_ino;
    now.size = st.st_size;
    now.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  }
  if (last_ && *last_ == now) return std::nullopt;
  last_ = now;
  Change c;
  auto text = read_trusted_file(path_, ::geteuid());
  if (!text) {
    c.error = text.error().message;
    return c;
  }
  auto entries = parse_weights(*text);
  if (!entries) {
    c.error = entries.error().message;
    return c;
  }
  c.entries = std::move(*entries);
  return c;
}

std::uint32_t weight_for(std::span<const WeightEntry> entries, std::string_view device, std::uint32_t port,
                         int speed_mbps) noexcept {
  const WeightEntry* whole = nullptr;
  for (const WeightEntry& e : entries) {
    if (e.device != device) continue;
    if (e.port == port) return e.weight;
    if (e.port == 0) whole = &e;
  }
  if (whole) return whole->weight;
  return speed_mbps > 0 ? static_cast<std::uint32_t>(speed_mbps) : 1u;
}

namespace {

namespace asio = boost::asio;

void set_weights(std::span<const WeightEntry> entries, std::span<const std::unique_ptr<Device>> devices) {
  for (const auto& d : devices)
    d->stripe_weight.store(weight_for(entries, d->port.device, d->port.port, d->port.speed_mbps), std::memory_order_relaxed);
}

std::string weights_text(std::span<const std::unique_ptr<Device>> devices) {
  std::string s;
  for (const auto& d : devices)
    s += (s.empty() ? "" : ", ") + d->port.id() + " " + std::to_string(d->stripe_weight.load(std::memory_order_relaxed));
  return s;
}

asio::awaitable<void> watch(std::string path, std::span<const std::unique_ptr<Device>> devices) {
  WeightsFile file(std::move(path));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    if (auto change = file.poll()) {
      if (change->entries) {
        set_weights(*change->entries, devices);
        HA_INFO("NET/HA: stripe weights from %s: %s", file.path().c_str(), weights_text(devices).c_str());
      } else {
        HA_WARN("NET/HA: stripe weights file %s refused: %s; the weights in force stay (%s)", file.path().c_str(),
                change->error.c_str(), weights_text(devices).c_str());
      }
    }
    timer.expires_after(std::chrono::milliseconds(kWeightsPollMs));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
    const auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) co_return;  // the reactor stops
  }
}

}  // namespace

void start_stripe_weights(reactor::Reactor& r, const std::string& path, std::span<const std::unique_ptr<Device>> devices) {
  set_weights({}, devices);
  if (path.empty()) return;
  HA_INFO("NET/HA: stripe weights of fused devices' ports from %s (looked at every %d ms; each port weighs its "
          "speed until the file says otherwise)", path.c_str(), kWeightsPollMs);
  r.spawn("stripe weights", watch(path, devices));
}

}  // namespace nccl_ha::plugin
