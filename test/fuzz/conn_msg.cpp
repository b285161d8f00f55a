// The plugin's connection request and reply (src/plugin/conn_msg.cpp), decoded from any bytes:
// both decoders on every input. Properties: decode never crashes; what decodes re-encodes to
// exactly the input (canonical) and decodes again to the same value; a request never carries a
// service level above 15, nor a zero address.
#include "conn_msg.hpp"
#include "fuzz_common.hpp"

using namespace nccl_ha;
using namespace nccl_ha::plugin;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = fuzz::bytes(data, size);
  if (auto r = decode_request(in)) {
    FUZZ_REQUIRE(size == kRequestSize);
    FUZZ_REQUIRE(r->qos.service_level <= kMaxServiceLevel && r->fifo.addr != 0 && r->ctrl.addr != 0);
    const auto again = encode_request(*r);
    FUZZ_REQUIRE(again.size() == size && std::equal(again.begin(), again.end(), data));
    auto twice = decode_request(again);
    FUZZ_REQUIRE(twice.ok() && *twice == *r);
  } else {
    FUZZ_REQUIRE(!r.error().message.empty());
  }
  if (auto r = decode_reply(in)) {
    FUZZ_REQUIRE(size == kReplySize && r->ctrl.addr != 0);
    const auto again = encode_reply(*r);
    FUZZ_REQUIRE(again.size() == size && std::equal(again.begin(), again.end(), data));
    auto twice = decode_reply(again);
    FUZZ_REQUIRE(twice.ok() && *twice == *r);
  } else {
    FUZZ_REQUIRE(!r.error().message.empty());
  }
  return 0;
}
