#include "nccl_ha/net/wire.hpp"

#include <sys/random.h>

#include <cstdio>

namespace nccl_ha::net {
namespace {

// The endpoint's byte after the ECE flag: its QP count - 1 in the low bits, its split flag on top.
constexpr std::uint8_t kQpCountMask = 0x07;
constexpr std::uint8_t kSplitBit = 0x80;
static_assert(kMaxEndpointQps - 1 == kQpCountMask);

}  // namespace

void ByteWriter::str(const std::string& s) {
  const std::size_t n = std::min<std::size_t>(s.size(), 0xffff);  // the prefix must match the bytes
  u16(static_cast<std::uint16_t>(n));
  out_.insert(out_.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
}

bool ByteReader::get(std::uint64_t& v, std::size_t n) {
  if (remaining() < n) return false;
  v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(in_[pos_ + i]) << (8 * i);
  pos_ += n;
  return true;
}
bool ByteReader::u8(std::uint8_t& v) { std::uint64_t x; if (!get(x, 1)) return false; v = static_cast<std::uint8_t>(x); return true; }
bool ByteReader::u16(std::uint16_t& v) { std::uint64_t x; if (!get(x, 2)) return false; v = static_cast<std::uint16_t>(x); return true; }
bool ByteReader::u32(std::uint32_t& v) { std::uint64_t x; if (!get(x, 4)) return false; v = static_cast<std::uint32_t>(x); return true; }
bool ByteReader::u64(std::uint64_t& v) { return get(v, 8); }
bool ByteReader::f64(double& v) { std::uint64_t x; if (!get(x, 8)) return false; std::memcpy(&v, &x, 8); return true; }
bool ByteReader::bytes(std::span<std::uint8_t> out) {
  if (remaining() < out.size()) return false;
  std::memcpy(out.data(), in_.data() + pos_, out.size());
  pos_ += out.size();
  return true;
}
bool ByteReader::str(std::string& s, std::size_t max_len) {
  const std::size_t start = pos_;
  std::uint16_t n;
  if (!u16(n)) return false;
  if (n > max_len || remaining() < n) {
    pos_ = start;  // a failed read consumes nothing
    return false;
  }
  s.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
  pos_ += n;
  return true;
}

std::vector<std::uint8_t> encode_frame(std::uint16_t type, std::uint64_t token, std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t> out;
  out.reserve(kHeaderSize + payload.size());
  ByteWriter w(out);
  w.u32(kWireMagic);
  w.u16(kWireVersion);
  w.u16(type);
  w.u32(static_cast<std::uint32_t>(payload.size()));
  w.u32(0);
  w.u64(token);
  w.bytes(payload);
  return out;
}

Expected<FrameHeader> decode_header(std::span<const std::uint8_t> bytes, std::uint64_t expected_token,
                                    std::size_t max_payload) {
  if (bytes.size() < kHeaderSize)
    return make_error(Errc::truncated, "frame header truncated: " + std::to_string(bytes.size()) + " of " +
                                           std::to_string(kHeaderSize) + " bytes");
  ByteReader r(bytes.first(kHeaderSize));
  std::uint32_t magic = 0, length = 0, flags = 0;
  std::uint16_t version = 0, type = 0;
  std::uint64_t token = 0;
  r.u32(magic); r.u16(version); r.u16(type); r.u32(length); r.u32(flags); r.u64(token);
  if (magic != kWireMagic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad magic 0x%08x (expected 0x%08x)", magic, kWireMagic);
    return make_error(Errc::bad_magic, buf);
  }
  if (version != kWireVersion)
    return make_error(Errc::bad_version, "unsupported wire version " + std::to_string(version) + " (this side speaks " +
                                             std::to_string(kWireVersion) + ")");
  if (flags != 0) return make_error(Errc::bad_length, "reserved header field is not zero");
  if (type == 0) return make_error(Errc::bad_type, "message type 0");
  if (length > max_payload)
    return make_error(Errc::oversized, "payload of " + std::to_string(length) + " bytes exceeds the limit of " +
                                           std::to_string(max_payload));
  if (expected_token == kAnyToken ? token == 0 : token != expected_token) return make_error(Errc::bad_token, "token mismatch: the peer is not the one this handle was given to");
  return FrameHeader{type, length, token};
}

Expected<Frame> decode_frame(std::span<const std::uint8_t> bytes, std::uint64_t expected_token, std::size_t max_payload) {
  auto h = decode_header(bytes, expected_token, max_payload);
  if (!h) return std::move(h).error();
  const std::size_t want = kHeaderSize + h->length;
  if (bytes.size() < want)
    return make_error(Errc::truncated, "frame truncated: " + std::to_string(bytes.size()) + " of " + std::to_string(want) + " bytes");
  if (bytes.size() > want)
    return make_error(Errc::bad_length, std::to_string(bytes.size() - want) + " trailing bytes after the frame");
  Frame f;
  f.type = h->type;
  f.token = h->token;
  f.payload.assign(bytes.begin() + kHeaderSize, bytes.end());
  return f;
}

std::vector<std::uint8_t> encode_endpoint(const Endpoint& ep) {
  std::vector<std::uint8_t> out;
  out.reserve(kEndpointSize);
  ByteWriter w(out);
  w.u32(ep.qpn);
  w.u32(ep.psn);
  w.bytes(ep.gid.raw);
  w.u16(ep.lid);
  w.u8(ep.port);
  w.u8(ep.gid_index);
  w.u8(ep.link_layer);
  w.u8(ep.mtu);
  w.u8(ep.ece.supported ? 1 : 0);
  w.u8(static_cast<std::uint8_t>(((ep.qpns - 1) & kQpCountMask) | (ep.split ? kSplitBit : 0)));
  w.u32(ep.ece.vendor_id);
  w.u32(ep.ece.options);
  w.u32(ep.ece.comp_mask);
  for (std::uint32_t q : ep.more_qpn) w.u32(q);
  return out;
}

Expected<Endpoint> decode_endpoint(std::span<const std::uint8_t> payload) {
  if (payload.size() < kEndpointSize)
    return make_error(Errc::truncated, "endpoint truncated: " + std::to_string(payload.size()) + " of " +
                                           std::to_string(kEndpointSize) + " bytes");
  if (payload.size() > kEndpointSize)
    return make_error(Errc::bad_length, "endpoint of " + std::to_string(payload.size()) + " bytes (expected " +
                                            std::to_string(kEndpointSize) + ")");
  ByteReader r(payload);
  Endpoint ep;
  std::uint8_t ece = 0, qps = 0;
  r.u32(ep.qpn); r.u32(ep.psn); r.bytes(ep.gid.raw); r.u16(ep.lid);
  r.u8(ep.port); r.u8(ep.gid_index); r.u8(ep.link_layer); r.u8(ep.mtu); r.u8(ece); r.u8(qps);
  r.u32(ep.ece.vendor_id); r.u32(ep.ece.options); r.u32(ep.ece.comp_mask);
  for (std::uint32_t& q : ep.more_qpn) r.u32(q);
  if (ep.qpn == 0 || ep.qpn > 0xffffffu) return make_error(Errc::invalid_argument, "endpoint: QP number out of range");
  if (ep.psn > 0xffffffu) return make_error(Errc::invalid_argument, "endpoint: PSN out of range");
  if (ep.port == 0) return make_error(Errc::invalid_argument, "endpoint: port 0");
  if (ep.mtu < IBV_MTU_256 || ep.mtu > IBV_MTU_4096) return make_error(Errc::invalid_argument, "endpoint: bad MTU code " + std::to_string(ep.mtu));
  if (ep.link_layer > IBV_LINK_LAYER_ETHERNET) return make_error(Errc::invalid_argument, "endpoint: bad link layer");
  if (qps & ~(kQpCountMask | kSplitBit)) return make_error(Errc::invalid_argument, "endpoint: reserved bits of the QP count set");
  ep.qpns = static_cast<std::uint8_t>((qps & kQpCountMask) + 1);
  ep.split = (qps & kSplitBit) != 0;
  for (int i = 1; i < kMaxEndpointQps; ++i) {
    const std::uint32_t q = ep.more_qpn[static_cast<std::size_t>(i - 1)];
    if (i < ep.qpns && (q == 0 || q > 0xffffffu))
      return make_error(Errc::invalid_argument, "endpoint: QP number " + std::to_string(i) + " out of range");
    if (i >= ep.qpns && q != 0)
      return make_error(Errc::invalid_argument, "endpoint: QP number " + std::to_string(i) + " beyond its " +
                                                    std::to_string(ep.qpns) + " QPs");
  }
  if (ece > 1) return make_error(Errc::invalid_argument, "endpoint: bad ECE flag " + std::to_string(ece));
  ep.ece.supported = ece == 1;
  if (!ep.ece.supported && (ep.ece.vendor_id != 0 || ep.ece.options != 0 || ep.ece.comp_mask != 0))
    return make_error(Errc::invalid_argument, "endpoint: ECE fields without ECE");
  return ep;
}

std::uint64_t random_token() {
  std::uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != sizeof v) v = 0;
  }
  return v;
}

}  // namespace nccl_ha::net
