// The connection handle NCCL hands to connect() (src/plugin/setup/handle.cpp): decode_handle on any
// bytes (and on the input padded to the handle's size). Properties: a handle that validates
// names a dialable address (not unspecified, not multicast, a link-local one with its scope),
// its endpoint carries its port, handle_address formats it; nothing crashes, at any alignment.
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "fuzz_common.hpp"
#include "setup/handle.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

namespace {
void check(std::span<const std::uint8_t> b) {
  auto h = decode_handle(b);
  if (!h) {
    FUZZ_REQUIRE(!h.error().message.empty());
    return;
  }
  FUZZ_REQUIRE(validate_handle(*h).ok());
  FUZZ_REQUIRE(h->magic == kHandleMagic && h->version == kHandleVersion && h->length == sizeof(Handle));
  FUZZ_REQUIRE(h->port != 0 && h->token != 0 && (h->family == AF_INET || h->family == AF_INET6));
  FUZZ_REQUIRE(h->members >= 1 && h->members <= kMaxVDeviceMembers);
  const auto ep = handle_endpoint(*h);
  FUZZ_REQUIRE(ep.port() == h->port);
  FUZZ_REQUIRE(!ep.address().is_unspecified() && !ep.address().is_multicast());
  if (ep.address().is_v6() && ep.address().to_v6().is_link_local()) FUZZ_REQUIRE(h->scope_id != 0);
  const std::string a = handle_address(*h);
  FUZZ_REQUIRE(a.size() > 2 && a.back() != ':');
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check(fuzz::bytes(data, size));
  // NCCL's buffer is always NCCL_NET_HANDLE_MAXSIZE bytes: also the input padded (or cut) to
  // that, at an odd address.
  std::vector<std::uint8_t> buf(sizeof(Handle) + 1, 0);
  std::memcpy(buf.data() + 1, data, std::min(size, sizeof(Handle)));
  check(std::span<const std::uint8_t>(buf).subspan(1));
  return 0;
}
