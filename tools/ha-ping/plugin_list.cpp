// ha-ping --list: the nccl-ha plugin's view of this host, without traffic. Loads the plugin with
// the tools' loader (tools/plugin-loader, as ha-net-driver does), calls init (with
// HA_NCCL_DEBUG=1 and a logger that keeps its lines), devices and getProperties of the newest
// API version it exports, and prints the devices together with what the plugin logged about
// them (GID index, standby port, maxComms budget, settings).
#include "plugin_list.hpp"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_ha/version.hpp"
#include "net_plugin.hpp"
#include "report_json.hpp"

namespace ha_ping {
namespace {

struct LogLine {
  int level;
  std::string text;
};
std::mutex g_log_mutex;
std::vector<LogLine> g_log;

void capture(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log.push_back({static_cast<int>(level), buf});
}

struct Device {
  std::string name, pci;
  int port = 0, speed = 0, ptr = 0, max_comms = 0, max_recvs = 0;
  unsigned long long guid = 0;
  float latency = 0;
  std::optional<int> rail_id, plane_id;  // v12 only; unset: NCCL_NET_ID_UNDEF or an older table
};

// One --fuse request: the devices asked for, makeVDevice's answer and, when it made one, the
// device's number and its getProperties.
struct Fused {
  std::vector<int> devs;
  int result = -1;  // ncclResult_t; -1: the table has no makeVDevice
  int index = -1;
  std::optional<Device> device;
  std::vector<int> vdevs;  // its vProps.devs
};

Device device_of(const ha_loader::Properties& p) {
  Device d;
  d.name = p.name;
  d.pci = p.pci_path.value_or("");
  d.port = p.port;
  d.speed = p.speed;
  d.ptr = p.ptr_support;
  d.max_comms = p.max_comms;
  d.max_recvs = p.max_recvs;
  d.guid = static_cast<unsigned long long>(p.guid);
  d.latency = p.latency;
  if (p.rail_id && *p.rail_id != NCCL_NET_ID_UNDEF) d.rail_id = p.rail_id;  // nullopt (an older table) stays so
  if (p.plane_id && *p.plane_id != NCCL_NET_ID_UNDEF) d.plane_id = p.plane_id;
  return d;
}

// init, devices and getProperties, makeVDevice for each --fuse; finalize (v11+) when init
// succeeded. "" or an error; a mandatory slot still NULL after init throws ha_loader::LoadError.
std::string init_and_query(ha_loader::NetPlugin& plugin, std::vector<Device>& out, std::vector<Fused>& fused) {
  if (plugin.init(ha_loader::InitArgs{&capture, nullptr, 0, NCCL_NET_TRAFFIC_CLASS_UNDEF}) != ncclSuccess)
    return "init failed";
  auto& net = plugin.net();
  auto query = [&]() -> std::string {
    int n = 0;
    if (net.devices(&n) != ncclSuccess) return "devices() failed";
    for (int i = 0; i < n; ++i) {
      ha_loader::Properties p;
      if (net.getProperties(i, &p) != ncclSuccess) return "getProperties(" + std::to_string(i) + ") failed";
      out.push_back(device_of(p));
    }
    for (auto& f : fused) {
      if (!net.has_makeVDevice() || out.empty()) continue;  // nothing to fuse without ports
      f.result = net.makeVDevice(f.devs, &f.index);
      if (f.result != ncclSuccess) {
        f.index = -1;
        continue;
      }
      ha_loader::Properties p;
      if (net.getProperties(f.index, &p) != ncclSuccess)
        return "getProperties(" + std::to_string(f.index) + ") of a made virtual device failed";
      f.device = device_of(p);
      f.vdevs = p.vdevs.value_or(std::vector<int>{});
    }
    return "";
  };
  const std::string err = query();
  if (net.has_finalize()) net.finalize();
  return err;
}

std::string exe_dir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// The plugin to load: --plugin, else libnccl-net-ha.so in ../lib next to ha-ping (installed),
// else the build tree's, else by name through LD_LIBRARY_PATH.
std::vector<std::string> candidates(const std::string& given) {
  if (!given.empty()) return {given};
  std::vector<std::string> out;
  if (auto dir = exe_dir(); !dir.empty()) out.push_back(dir + "/../lib/libnccl-net-ha.so");
#ifdef NCCL_HA_PLUGIN_BUILD_PATH
  out.push_back(NCCL_HA_PLUGIN_BUILD_PATH);
#endif
  out.push_back("libnccl-net-ha.so");
  return out;
}

// Text after `key` in the first captured line containing it ("" when none).
std::string after(const std::string& line, const std::string& key) {
  auto pos = line.find(key);
  return pos == std::string::npos ? "" : line.substr(pos + key.size());
}

std::string ptr_text(int ptr) {
  std::string s;
  if (ptr & NCCL_PTR_HOST) s += "HOST";
  if (ptr & NCCL_PTR_CUDA) s += s.empty() ? "CUDA" : "|CUDA";
  if (ptr & NCCL_PTR_DMABUF) s += s.empty() ? "DMABUF" : "|DMABUF";
  return s.empty() ? "none" : s;
}

// The opening members of every --list JSON report (the object is left open).
nccl_ha::net::JsonWriter list_report_head(const std::string& plugin) {
  nccl_ha::net::JsonWriter j;
  j.open('{');
  j.kv("tool", "ha-ping");
  j.kv("version", NCCL_HA_VERSION_STRING);
  j.kv("mode", "list");
  j.kv("plugin", plugin);
  return j;
}

// A --list that ends before the plugin could be asked anything: the JSON report (--json) and the
// message on stderr; exit status 1.
int list_failed(const Options& o, const std::string& path, const std::string& msg) {
  if (o.json) {
    auto j = list_report_head(path);
    j.kv("ok", false);
    j.kv("error", msg);
    j.close('}');
    std::printf("%s\n", j.str().c_str());
  }
  std::fprintf(stderr, "ha-ping: --list: %s\n", msg.c_str());
  return 1;
}

// The first of the candidates that loads, else "" and why not in `error` (a library that loads
// but is no net plugin NCCL would take ends the search: `path` names it).
std::unique_ptr<ha_loader::NetPlugin> load_plugin(const Options& o, std::string& path, std::string& error) {
  std::string errors;
  for (const auto& c : candidates(o.plugin)) {
    if (c.find('/') != std::string::npos && ::access(c.c_str(), F_OK) != 0 && o.plugin.empty()) continue;
    try {
      return ha_loader::NetPlugin::open(c, 0);
    } catch (const ha_loader::LoadError& e) {
      if (e.kind != ha_loader::LoadError::Kind::open) {  // it loaded, but is no net plugin NCCL would take
        path = c;
        error = e.what();
        return nullptr;
      }
      errors += (errors.empty() ? "" : "; ") + e.dl_errors;
    }
  }
  error = "cannot load the plugin (" + (errors.empty() ? std::string("not found") : errors) + ")";
  return nullptr;
}

// What the plugin logged about this host and its ports, by port id ("rxe0:1").
struct PluginNotes {
  static constexpr std::string_view kNoStandby = " has no standby: ";
  std::string settings, gpu, handshake;
  std::string relaxed;  // "on for NCCL's buffers (...)"
  std::map<std::string, std::string> standby, budget, dmabuf;
  std::map<std::size_t, std::string> dev_line;  // "NET/HA: dev N: <port id> ..." by device index

  explicit PluginNotes(const std::vector<LogLine>& log) {
    for (const auto& l : log) read(l.text);
  }
  void read(const std::string& t) {
    if (auto s = after(t, "NET/HA: settings: "); !s.empty()) settings += (settings.empty() ? "" : " ") + s;  // in lines
    else if (t.find("GPU peer memory") != std::string::npos || t.find("GPU peer-memory") != std::string::npos)
      gpu = after(t, "NET/HA: ");
    else if (auto h = after(t, "handshakes on "); !h.empty()) handshake = h;
    else if (auto ro = after(t, "NET/HA: relaxed ordering "); !ro.empty()) relaxed = ro;
    else if (auto db = t.find(": dma-buf "); db != std::string::npos && t.rfind("NET/HA: ", 0) == 0)
      dmabuf[after(t.substr(0, db), "NET/HA: ")] = t.substr(db + 10);
    else if (auto b = after(t, "NET/HA: standby port of "); !b.empty()) {
      auto is = b.find(" is ");
      if (is != std::string::npos) standby[b.substr(0, is)] = b.substr(is + 4);
    } else if (auto nb = t.find(kNoStandby); nb != std::string::npos) {
      standby[after(t.substr(0, nb), "NET/HA: ")] = "none (" + t.substr(nb + kNoStandby.size()) + ")";
    } else if (auto mb = t.find(" maxComms budget: "); mb != std::string::npos) {
      budget[after(t.substr(0, mb), "NET/HA: ")] = t.substr(mb + 18);
    } else if (auto d = after(t, "NET/HA: dev "); !d.empty()) {
      auto colon = d.find(": ");
      if (colon != std::string::npos) dev_line[std::strtoul(d.c_str(), nullptr, 10)] = d.substr(colon + 2);
    }
  }
  static std::string get(const std::map<std::string, std::string>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  }
  std::string line_of(std::size_t i) const {
    auto it = dev_line.find(i);
    return it == dev_line.end() ? std::string() : it->second;
  }
  // The port's own id ("rxe0:1"), the key of the standby and budget lines: from the device's line,
  // as getProperties' port is NCCL's (port number + real port, see init.cpp).
  std::string id_of(std::size_t i, const Device& d) const {
    const std::string l = line_of(i);
    return l.empty() ? d.name + ":" + std::to_string(d.port) : l.substr(0, l.find(' '));
  }
  int gid_of(std::size_t i) const {
    auto g = after(line_of(i), " gid ");
    return g.empty() ? -1 : std::atoi(g.c_str());
  }
};

// What init and the queries found: the devices, the plugin's log and notes, and the verdict.
struct Listing {
  std::string path, table_name;
  int version = 0;
  std::vector<Device> devices;
  std::vector<Fused> fused;
  std::vector<LogLine> log;
  bool ok = false;
  std::string message;  // why not ok
};

void print_json(const Listing& l, const PluginNotes& n) {
  auto j = list_report_head(l.path);
  j.kv("api_version", l.version);
  j.kv("table", l.table_name);
  j.kv("ok", l.ok);
  if (!l.ok) j.kv("error", l.message);
  j.kv("settings", n.settings);
  j.kv("gpu", n.gpu);
  j.kv("handshake", n.handshake);
  j.kv("relaxed_ordering", n.relaxed);
  j.key("devices");
  j.open('[');
  for (std::size_t i = 0; i < l.devices.size(); ++i) {
    const auto& d = l.devices[i];
    const std::string id = n.id_of(i, d);
    j.open('{');
    j.kv("index", static_cast<unsigned long long>(i));
    j.kv("name", d.name);
    j.kv("port", d.port);
    j.kv("id", id);
    j.kv("speed_mbps", d.speed);
    j.kv("rail_id", d.rail_id);
    j.kv("plane_id", d.plane_id);
    j.kv("gid_index", n.gid_of(i));
    j.kv("standby_port", n.get(n.standby, id));
    j.kv("max_comms", d.max_comms);
    j.kv("max_comms_budget", n.get(n.budget, id));
    j.kv("max_recvs", d.max_recvs);
    j.kv("ptr_support", ptr_text(d.ptr));
    j.kv("dmabuf", n.get(n.dmabuf, id));
    j.kv("pci", d.pci);
    j.kv("guid", d.guid);
    j.kv("plugin_line", n.line_of(i));
    j.close('}');
  }
  j.close(']');
  ha_tools::objects(j, "fused", l.fused, [&](const Fused& f) {
    j.kv_list("devs", f.devs);
    j.kv("result", f.result);
    j.kv("index", f.index);
    if (f.device) {
      j.kv("name", f.device->name);
      j.kv("speed_mbps", f.device->speed);
      j.kv("rail_id", f.device->rail_id);
      j.kv("plane_id", f.device->plane_id);
      j.kv_list("vdevs", f.vdevs);
    }
  });
  ha_tools::objects(j, "log", l.log, [&](const LogLine& line) {
    j.kv("level", line.level == NCCL_LOG_WARN ? "WARN" : line.level == NCCL_LOG_INFO ? "INFO" : "TRACE");
    j.kv("text", line.text);
  });
  j.close('}');
  std::printf("%s\n", j.str().c_str());
}

void print_text(const Listing& l, const PluginNotes& n) {
  auto id_text = [](const std::optional<int>& v) { return v ? std::to_string(*v) : std::string("undef"); };
  std::printf("plugin %s (%s, ncclNetPlugin_v%d)\n", l.path.c_str(), l.table_name.c_str(), l.version);
  if (!n.settings.empty()) std::printf("settings: %s\n", n.settings.c_str());
  if (!n.gpu.empty()) std::printf("%s\n", n.gpu.c_str());
  if (!n.handshake.empty()) std::printf("handshakes on %s\n", n.handshake.c_str());
  if (!n.relaxed.empty()) std::printf("relaxed ordering %s\n", n.relaxed.c_str());
  for (std::size_t i = 0; i < l.devices.size(); ++i) {
    const auto& d = l.devices[i];
    const std::string id = n.id_of(i, d);
    const auto b = n.get(n.standby, id), bud = n.get(n.budget, id);
    const int gid = n.gid_of(i);
    std::printf("dev %zu: %s port %d speed %d Mbps railId %s planeId %s gid-index %s standby %s maxComms %d "
                "ptrSupport %s\n",
                i, d.name.c_str(), d.port, d.speed, id_text(d.rail_id).c_str(), id_text(d.plane_id).c_str(),
                gid < 0 ? "?" : std::to_string(gid).c_str(), b.empty() ? "?" : b.c_str(), d.max_comms,
                ptr_text(d.ptr).c_str());
    std::printf("  NCCL: pciPath %s guid 0x%016llx\n", d.pci.empty() ? "-" : d.pci.c_str(), d.guid);
    if (!bud.empty()) std::printf("  maxComms budget: %s\n", bud.c_str());
    if (const auto db = n.get(n.dmabuf, id); !db.empty()) std::printf("  dma-buf: %s\n", db.c_str());
  }
  for (const auto& f : l.fused) {
    std::string devs;
    for (int d : f.devs) devs += (devs.empty() ? "" : ",") + std::to_string(d);
    if (f.result < 0) std::printf("fuse %s: the table has no makeVDevice\n", devs.c_str());
    else if (!f.device) std::printf("fuse %s: not made (result %d)\n", devs.c_str(), f.result);
    else
      std::printf("fuse %s: dev %d: %s speed %d Mbps railId %s planeId %s\n", devs.c_str(), f.index,
                  f.device->name.c_str(), f.device->speed, id_text(f.device->rail_id).c_str(),
                  id_text(f.device->plane_id).c_str());
  }
  for (const auto& line : l.log)
    if (line.level == NCCL_LOG_WARN) std::printf("plugin WARN: %s\n", line.text.c_str());
}

}  // namespace

int run_list(const Options& o) {
  ::setenv("HA_NCCL_DEBUG", "1", 1);  // the plugin logs its INFO lines (settings, standby ports, budgets)
  Listing l;
  std::string load_error;
  std::unique_ptr<ha_loader::NetPlugin> plugin = load_plugin(o, l.path, load_error);
  if (!plugin) return list_failed(o, l.path, load_error);
  plugin->keep_loaded();  // never dlclosed, as before: the plugin's threads may outlive finalize
  l.path = plugin->path();
  l.version = plugin->version();
  l.table_name = plugin->table_name();
  std::string err;
  try {
    for (const auto& devs : o.fuse) {
      Fused f;
      f.devs = devs;
      l.fused.push_back(std::move(f));
    }
    err = init_and_query(*plugin, l.devices, l.fused);
  } catch (const ha_loader::LoadError& e) {  // a mandatory slot init left NULL
    err = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    l.log = g_log;
  }
  l.ok = err.empty() && !l.devices.empty();
  l.message = !err.empty() ? "plugin " + err : l.devices.empty() ? "the plugin has no devices" : "";
  if (!l.ok)  // the plugin's own words on why, when it said something
    for (auto it = l.log.rbegin(); it != l.log.rend(); ++it)
      if (it->level == NCCL_LOG_WARN || it->text.find("no verbs devices") != std::string::npos) {
        auto why = after(it->text, "NET/HA: ");
        l.message += " (plugin: " + (why.empty() ? it->text : why) + ")";
        break;
      }
  const PluginNotes notes(l.log);
  if (o.json) print_json(l, notes);
  else print_text(l, notes);
  if (!l.ok) {
    std::fprintf(stderr, "ha-ping: --list: %s\n", l.message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace ha_ping
