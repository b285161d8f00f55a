#include "protocol.hpp"

namespace ha_ping {
namespace {

using nccl_ha::Errc;
using nccl_ha::make_error;
using nccl_ha::net::ByteReader;
using nccl_ha::net::ByteWriter;

constexpr std::size_t kMaxRails = 64;
constexpr std::size_t kMaxSizes = 64;

nccl_ha::Error malformed(const char* what) { return make_error(Errc::bad_length, std::string("malformed ") + what); }

void put_names(ByteWriter& w, const std::vector<std::string>& names) {
  w.u16(static_cast<std::uint16_t>(names.size()));
  for (const auto& n : names) w.str(n);
}

bool get_names(ByteReader& r, std::vector<std::string>& names) {
  std::uint16_t n = 0;
  if (!r.u16(n) || n > kMaxRails) return false;
  names.resize(n);
  for (auto& s : names)
    if (!r.str(s, 256)) return false;
  return true;
}

// A message read from payload p by fields(ByteReader&, T&), false when malformed; no byte may be left over.
template <class T, class Fields>
nccl_ha::Expected<T> read_whole(std::span<const std::uint8_t> p, const char* what, Fields&& fields) {
  ByteReader r(p);
  T m;
  if (!fields(r, m) || r.remaining()) return malformed(what);
  return m;
}

// A message's payload, its fields written by fields(ByteWriter&).
template <class Fields>
std::vector<std::uint8_t> payload(Fields&& fields) {
  std::vector<std::uint8_t> out;
  ByteWriter w(out);
  fields(w);
  return out;
}

}  // namespace

std::span<const std::uint8_t> before_proof(std::span<const std::uint8_t> payload) noexcept {
  return payload.size() < kProofSize ? payload.first(0) : payload.first(payload.size() - kProofSize);
}

std::vector<std::uint8_t> encode(const Challenge& m) {
  return payload([&](ByteWriter& w) {
    w.u16(m.version);
    w.bytes(m.nonce);
  });
}

nccl_ha::Expected<Challenge> decode_challenge(std::span<const std::uint8_t> p) {
  auto c = read_whole<Challenge>(p, "challenge", [](ByteReader& r, Challenge& m) { return r.u16(m.version) && r.bytes(m.nonce); });
  if (c && c->version != kProtocolVersion)
    return make_error(Errc::bad_version, "the server speaks ha-ping protocol version " + std::to_string(c->version) +
                                             ", this client " + std::to_string(kProtocolVersion));
  return c;
}

std::vector<std::uint8_t> encode(const Hello& m) {
  return payload([&](ByteWriter& w) {
    put_names(w, m.rails);
    w.u16(static_cast<std::uint16_t>(m.sizes.size()));
    for (auto s : m.sizes) w.u64(s);
    for (std::uint32_t v : {m.iters, m.bw_iters, m.window, m.timeout_ms, m.duration_ms}) w.u32(v);
    w.u8(m.tclass);
    w.u8(m.sl);
    w.bytes(m.nonce);
    w.bytes(m.proof);
  });
}

nccl_ha::Expected<Hello> decode_hello(std::span<const std::uint8_t> p) {
  ByteReader r(p);
  Hello m;
  std::uint16_t nsizes = 0;
  if (!get_names(r, m.rails) || !r.u16(nsizes) || nsizes == 0 || nsizes > kMaxSizes) return malformed("hello");
  m.sizes.resize(nsizes);
  for (auto& s : m.sizes)
    if (!r.u64(s) || s == 0 || s > kMaxMessageSize) return malformed("hello (sizes)");
  if (!r.u32(m.iters) || !r.u32(m.bw_iters) || !r.u32(m.window) || !r.u32(m.timeout_ms) ||
      !r.u32(m.duration_ms) || !r.u8(m.tclass) || !r.u8(m.sl) || !r.bytes(m.nonce) || !r.bytes(m.proof) ||
      r.remaining())
    return malformed("hello");
  if (m.iters == 0 || m.iters > kMaxIters || m.bw_iters == 0 || m.bw_iters > kMaxIters || m.window == 0 ||
      m.window > 128 || m.timeout_ms == 0 || m.sl > 15 || m.duration_ms > kMaxDurationMs)
    return malformed("hello (parameters)");
  return m;
}

std::vector<std::uint8_t> encode(const HelloAck& m) {
  return payload([&](ByteWriter& w) {
    put_names(w, m.rails);
    w.u32(m.timeout_ms);
    w.bytes(m.proof);
  });
}

nccl_ha::Expected<HelloAck> decode_hello_ack(std::span<const std::uint8_t> p) {
  auto a = read_whole<HelloAck>(p, "hello ack", [](ByteReader& r, HelloAck& m) {
    return get_names(r, m.rails) && r.u32(m.timeout_ms) && r.bytes(m.proof);
  });
  if (a && a->timeout_ms == 0) return malformed("hello ack (timeout 0)");
  return a;
}

std::vector<std::uint8_t> encode(const RailSetup& m) {
  return payload([&](ByteWriter& w) {
    w.u8(static_cast<std::uint8_t>(m.status));
    w.str(m.reason);
    w.bytes(nccl_ha::net::encode_endpoint(m.endpoint));
    w.u64(m.addr);
    w.u32(m.rkey);
    w.u64(m.length);
  });
}

nccl_ha::Expected<RailSetup> decode_rail_setup(std::span<const std::uint8_t> p) {
  std::array<std::uint8_t, nccl_ha::net::kEndpointSize> ep{};
  auto setup = read_whole<RailSetup>(p, "rail setup", [&ep](ByteReader& r, RailSetup& m) {
    std::uint8_t status = 0;
    if (!r.u8(status) || status > 3 || !r.str(m.reason) || !r.bytes(ep) || !r.u64(m.addr) || !r.u32(m.rkey) ||
        !r.u64(m.length))
      return false;
    m.status = static_cast<RailStatus>(status);
    return true;
  });
  if (setup && setup->status == RailStatus::ok) {  // the endpoint only means something on a usable rail
    auto e = nccl_ha::net::decode_endpoint(ep);
    if (!e) return std::move(e).error();
    setup->endpoint = *e;
  }
  return setup;
}

std::vector<std::uint8_t> encode(const PhaseDone& m) {
  return payload([&](ByteWriter& w) {
    w.u8(m.ok ? 1 : 0);
    w.u8(m.port_down ? 1 : 0);
    w.str(m.reason);
  });
}

nccl_ha::Expected<PhaseDone> decode_phase_done(std::span<const std::uint8_t> p) {
  return read_whole<PhaseDone>(p, "phase done", [](ByteReader& r, PhaseDone& m) {
    std::uint8_t ok = 0, down = 0;
    if (!r.u8(ok) || ok > 1 || !r.u8(down) || down > 1 || !r.str(m.reason)) return false;
    m.ok = ok == 1;
    m.port_down = down == 1;
    return true;
  });
}

}  // namespace ha_ping
