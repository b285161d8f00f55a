// Endpoints (net/wire.cpp decode_endpoint): every field range-checked; what decodes re-encodes to
// the same 32 bytes.
#include "fuzz_common.hpp"
#include "nccl_ha/net/wire.hpp"

using namespace nccl_ha;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto ep = net::decode_endpoint(fuzz::bytes(data, size));
  if (!ep) {
    FUZZ_REQUIRE(!ep.error().message.empty());
    return 0;
  }
  FUZZ_REQUIRE(size == net::kEndpointSize);
  FUZZ_REQUIRE(ep->qpn != 0 && ep->qpn <= 0xffffffu && ep->psn <= 0xffffffu && ep->port != 0);
  FUZZ_REQUIRE(ep->mtu >= IBV_MTU_256 && ep->mtu <= IBV_MTU_4096);
  const auto again = net::encode_endpoint(*ep);
  FUZZ_REQUIRE(again.size() == size && std::equal(again.begin(), again.end(), data));
  return 0;
}
