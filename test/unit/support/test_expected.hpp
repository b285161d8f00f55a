// Light helpers for tests on Expected<T> (no asio: cheap to include).
#pragma once

#include <string>

#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::test {

// The error message of `e`, or "" when it holds a value. For failure messages: Boost.Test
// evaluates message operands even when the check passes, and error() on a value is invalid.
template <class T>
std::string err_msg(const Expected<T>& e) {
  return e.ok() ? std::string() : e.error().message;
}

}  // namespace nccl_ha::test
