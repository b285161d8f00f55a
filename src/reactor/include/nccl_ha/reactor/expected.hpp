// Errors as values: every fallible operation in nccl-ha returns Expected<T> (or Status).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace nccl_ha {

enum class Errc {
  invalid_argument,  // caller passed something malformed (bad handle, bad env value, ...)
  truncated,         // a message ended before its declared length
  oversized,         // a message claims more bytes than the protocol allows
  bad_magic,
  bad_version,
  bad_token,
  bad_type,
  bad_length,
  not_found,         // no such device / port / GID
  verbs,             // an ibverbs call failed
  system,            // a libc / socket call failed
  timeout,
  closed,            // peer closed the connection or the object was shut down
  unsupported,
  peer_error,        // the peer reported a failure
};

const char* to_string(Errc e) noexcept;

struct Error {
  Errc code;
  std::string message;
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { assert(!ok()); return std::get<1>(v_); }
  Error&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : err_(std::move(error)), ok_(false) {}
  bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const Error& error() const& { assert(!ok_); return err_; }
  Error&& error() && { assert(!ok_); return std::move(err_); }

 private:
  Error err_{Errc::invalid_argument, {}};
  bool ok_ = true;
};

using Status = Expected<void>;

inline Error make_error(Errc code, std::string message) { return Error{code, std::move(message)}; }

// "what failed: strerror(err)" for errno-style failures.
Error errno_error(Errc code, const std::string& what, int err);

}  // namespace nccl_ha
