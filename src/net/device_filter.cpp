#include "nccl_ha/net/device_filter.hpp"

#include "nccl_ha/net/env.hpp"
#include "nccl_ha/reactor/log.hpp"

namespace nccl_ha::net {

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
  if (spec.empty()) {
    if (f.exclude_ || f.exact_) return make_error(Errc::invalid_argument, "device filter '" + raw + "' names no device");
    return f;
  }
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) return make_error(Errc::invalid_argument, "device filter '" + raw + "' has an empty entry");
    Entry e;
    std::size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (e.name.empty()) return make_error(Errc::invalid_argument, "device filter entry '" + item + "' has no device name");
    if (e.name.find_first_of("^= \t") != std::string::npos)
      return make_error(Errc::invalid_argument, "device filter entry '" + item + "' has a bad device name");
    if (colon != std::string::npos) {
      auto port = parse_int(item.substr(colon + 1));
      if (!port || *port < 1 || *port > 255)
        return make_error(Errc::invalid_argument, "device filter entry '" + item + "' has a bad port (expected 1..255)");
      e.port = static_cast<std::uint32_t>(*port);
    }
    f.entries_.push_back(std::move(e));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
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

bool DeviceFilter::matches(const std::string& device, std::uint32_t port) const {
  if (entries_.empty()) return true;
  bool hit = false;
  for (const auto& e : entries_) {
    bool name_ok = exact_ ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (name_ok && (!e.port || *e.port == port)) {
      hit = true;
      break;
    }
  }
  return exclude_ ? !hit : hit;
}

}  // namespace nccl_ha::net
