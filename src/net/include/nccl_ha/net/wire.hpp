// The nccl-ha wire format for out-of-band messages (handshakes, ha-ping control).
//
// Every message is a frame: a fixed 24-byte little-endian header followed by `length` payload
// bytes.
//
//   offset size field
//        0    4 magic    0x4148434E ("NCHA" on the wire)
//        4    2 version  kWireVersion
//        6    2 type     MsgType (values >= kAppTypeBase belong to the application)
//        8    4 length   payload bytes, <= the reader's limit (kMaxPayload by default)
//       12    4 flags    reserved, must be 0
//       16    8 token    the listener's random token; a frame with another token is rejected
//
// Decoding never trusts the peer: truncation, oversize, bad magic/version/token/type/length all
// yield an Error, never a crash or an allocation the peer chose.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "nccl_ha/net/qp.hpp"
#include "nccl_ha/reactor/expected.hpp"

namespace nccl_ha::net {

constexpr std::uint32_t kWireMagic = 0x4148434Eu;
constexpr std::uint16_t kWireVersion = 1;
constexpr std::size_t kHeaderSize = 24;
constexpr std::size_t kMaxPayload = 4096;
// 30 bytes of address, ECE flag, QP count and split flag, ECE (3 x u32), 7 more QP numbers (u32)
constexpr std::size_t kEndpointSize = 72;

enum class MsgType : std::uint16_t {
  endpoint = 1,  // payload: Endpoint (kEndpointSize bytes)
  error = 2,     // payload: UTF-8 reason
};
constexpr std::uint16_t kAppTypeBase = 0x100;
// As a reader's expected token: any token but 0 (a service that routes frames by their token).
constexpr std::uint64_t kAnyToken = 0;

struct FrameHeader {
  std::uint16_t type = 0;
  std::uint32_t length = 0;
  std::uint64_t token = 0;
};

struct Frame {
  std::uint16_t type = 0;
  std::uint64_t token = 0;
  std::vector<std::uint8_t> payload;
};

// Bounds-checked little-endian writer/reader. A read that fails consumes nothing.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void f64(double v) { std::uint64_t u; std::memcpy(&u, &v, 8); u64(u); }
  void bytes(std::span<const std::uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void str(const std::string& s);  // u16 length + bytes

 private:
  void put(std::uint64_t v, int n) { for (int i = 0; i < n; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i))); }
  std::vector<std::uint8_t>& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> in) : in_(in) {}
  bool u8(std::uint8_t& v);
  bool u16(std::uint16_t& v);
  bool u32(std::uint32_t& v);
  bool u64(std::uint64_t& v);
  bool f64(double& v);
  bool bytes(std::span<std::uint8_t> out);
  bool str(std::string& s, std::size_t max_len = 1024);
  std::size_t remaining() const noexcept { return in_.size() - pos_; }

 private:
  bool get(std::uint64_t& v, std::size_t n);
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

std::vector<std::uint8_t> encode_frame(std::uint16_t type, std::uint64_t token, std::span<const std::uint8_t> payload);

// Validates a header (exactly kHeaderSize bytes). `expected_token` must match.
Expected<FrameHeader> decode_header(std::span<const std::uint8_t> bytes, std::uint64_t expected_token,
                                    std::size_t max_payload = kMaxPayload);

// Decodes one whole frame; `bytes` must be exactly header + payload.
Expected<Frame> decode_frame(std::span<const std::uint8_t> bytes, std::uint64_t expected_token,
                             std::size_t max_payload = kMaxPayload);

std::vector<std::uint8_t> encode_endpoint(const Endpoint& ep);
// Exactly kEndpointSize bytes; validates every field's range.
Expected<Endpoint> decode_endpoint(std::span<const std::uint8_t> payload);

// 64 random bits from the kernel (getrandom); never 0.
std::uint64_t random_token();

}  // namespace nccl_ha::net
