#include "nccl_ha/net/device_filter.hpp"

#include "nccl_ha/net/env.hpp"
#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::net {

namespace {

// The fields of "dev:port:rail:plane" (at most four; the missing ones are "").
std::vector<std::string> split_fields(const std::string& item) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t colon; (colon = item.find(':', start)) != std::string::npos; start = colon + 1)
    out.push_back(item.substr(start, colon - start));
  out.push_back(item.substr(start));
  return out;
}

// An optional field: "" is unset, else an integer in [min, max].
template <class T>
bool parse_field(const std::string& text, long min, long max, std::optional<T>& out) {
  if (text.empty()) return true;
  auto v = parse_int(text);
  if (!v || *v < min || *v > max) return false;
  out = static_cast<T>(*v);
  return true;
}

}  // namespace

Expected<DeviceFilter::Entry> DeviceFilter::parse_entry(const std::string& item) {
  auto bad = [&item](const std::string& what) {
    return make_error(Errc::invalid_argument, "device filter entry '" + item + "' " + what);
  };
  const auto fields = split_fields(item);
  if (fields.size() > 4) return bad("has more than dev:port:rail:plane");
  Entry e;
  e.name = fields[0];
  if (e.name.empty()) return bad("has no device name");
  if (e.name.find_first_of("^= \t") != std::string::npos) return bad("has a bad device name");
  const std::string none;
  auto field = [&](std::size_t i) -> const std::string& { return i < fields.size() ? fields[i] : none; };
  if (!parse_field(field(1), 1, 255, e.port)) return bad("has a bad port (expected 1..255)");
  if (!parse_field(field(2), 0, kMaxRail, e.rail)) return bad("has a bad rail (expected 0.." + std::to_string(kMaxRail) + ")");
  if (!parse_field(field(3), 0, kMaxPlane, e.plane))
    return bad("has a bad plane (expected 0.." + std::to_string(kMaxPlane) + ")");
  return e;
}

Expected<DeviceFilter> DeviceFilter::parse(const std::string& raw) {
  DeviceFilter f;
  std::string spec = raw;
  // Leading modifiers, in either order: '^' (exclude) and '=' (exact).
  for (int i = 0; i < 2 && !spec.empty(); ++i) {
    if (spec[0] == '^' && !f.exclude_) {
      f.exclude_ = true;
      spec.erase(0, 1);
    } else if (spec[0] == '=' && !f.exact_) {
      f.exact_ = true;
      spec.erase(0, 1);
    }
  }
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {  // an empty entry (a trailing or doubled comma) is skipped, as NCCL does
      auto e = parse_entry(item);
      if (!e) return e.error();
      f.entries_.push_back(std::move(e).value());
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (f.entries_.empty() && (f.exclude_ || f.exact_))
    return make_error(Errc::invalid_argument, "device filter '" + raw + "' names no device");
  return f;
}

DeviceFilter DeviceFilter::from_env() { return from_lookup(process_env()); }

DeviceFilter DeviceFilter::from_lookup(const EnvLookup& env) {
  const char* which = nullptr;
  auto spec = env_string(env, {"HA_NCCL_IB_HCA", "NCCL_IB_HCA"}, &which);
  if (!spec) return {};
  auto f = parse(*spec);
  if (!f) {
    HA_WARN("NET/HA: ignoring %s='%s': %s; using every device", which, spec->c_str(), f.error().message.c_str());
    return {};
  }
  return std::move(f).value();
}

const DeviceFilter::Entry* DeviceFilter::first_match(const std::string& device, std::uint32_t port) const {
  for (const auto& e : entries_) {
    const bool name_ok = exact_ ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (name_ok && (!e.port || *e.port == port)) return &e;
  }
  return nullptr;
}

bool DeviceFilter::matches(const std::string& device, std::uint32_t port) const {
  if (entries_.empty()) return true;
  const bool hit = first_match(device, port) != nullptr;
  return exclude_ ? !hit : hit;
}

const DeviceFilter::Entry* DeviceFilter::selecting_entry(const std::string& device, std::uint32_t port) const {
  return exclude_ ? nullptr : first_match(device, port);
}

}  // namespace nccl_ha::net
