// "host[:port]" (src/net/handshake.cpp parse_host_port, ha-ping's peer argument). Input: the spec.
// Properties: a port is a whole decimal in 1..65535 (else the default), a host is never empty,
// exactly one ':' splits; numeric hosts go through asio's address parser (no name lookups here).
#include <boost/asio/ip/address.hpp>

#include "fuzz_common.hpp"
#include "nccl_ha/net/handshake.hpp"

using namespace nccl_ha;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string spec(fuzz::text(data, size));
  auto hp = net::parse_host_port(spec, 4000);
  if (!hp) {
    FUZZ_REQUIRE(hp.error().code == Errc::invalid_argument);
    return 0;
  }
  FUZZ_REQUIRE(!hp->host.empty() && hp->port >= 1);
  const auto colons = std::count(spec.begin(), spec.end(), ':');
  if (colons == 1) {
    FUZZ_REQUIRE(hp->host == spec.substr(0, spec.find(':')));
    FUZZ_REQUIRE(std::to_string(hp->port) == spec.substr(spec.find(':') + 1) || spec[spec.find(':') + 1] == '0' ||
                 spec[spec.find(':') + 1] == '+');
  } else {
    FUZZ_REQUIRE(hp->host == spec && hp->port == 4000);
  }
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(hp->host, ec);
  return 0;
}
