// Observability: standby state changes and the per-comm counters, as NCCL INFO lines and as
// JSON lines in HA_NCCL_STATS_FILE (one object per event; appended by the progress thread so
// the caller never waits for the file system).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "datapath.hpp"
#include "state.hpp"

namespace nccl_ha::plugin {

const char* standby_name(StandbyHealth::State s) noexcept {
  switch (s) {
    case StandbyHealth::connecting: return "connecting";
    case StandbyHealth::up: return "up";
    case StandbyHealth::down: return "down";
    case StandbyHealth::none: return "none";
  }
  return "?";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

void set_standby(CommBase& c, StandbyHealth::State state, const std::string& why, bool said) {
  if (c.standby.state == state && c.standby.why == why) return;
  if (state == StandbyHealth::up && c.standby.state != StandbyHealth::up) c.standby.up_since_ns = now_ns();
  bool loud = false;
  if (state == StandbyHealth::down && !c.standby.lost) {
    c.standby.lost = true;
    loud = !said;
  } else if (state == StandbyHealth::up && c.standby.lost) {
    c.standby.lost = false;
    loud = true;
  }
  c.standby.state = state;
  c.standby.why = why;
  const Device* d = c.devs[c.standby_slot()];
  const char* port = d ? d->port.id().c_str() : "-";
  if (loud && state == StandbyHealth::up)
    HA_WARN("NET/HA: standby %s of %s is %s (%s): protected again", port, c.id.c_str(), standby_name(state), why.c_str());
  else if (loud)
    HA_WARN("NET/HA: standby %s of %s is %s (%s): this connection is NOT protected until a standby is rebuilt", port,
            c.id.c_str(), standby_name(state), why.c_str());
  else
    HA_INFO("NET/HA: standby %s of %s is %s (%s)", port, c.id.c_str(), standby_name(state), why.c_str());
  write_stats(c, "standby", std::string("\"state\":\"") + standby_name(state) + "\",\"why\":" + json_string(why));
}

void write_stats(const CommBase& c, const char* event, const std::string& extra) {
  State* st = state();
  if (!st || st->config.stats_file.empty()) return;
  const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  char head[768];
  std::snprintf(head, sizeof head,
                "{\"event\":\"%s\",\"time_unix_ms\":%lld,\"pid\":%d,\"comm\":\"%p\",\"kind\":\"%s\",\"primary\":\"%s\","
                "\"backup\":\"%s\",\"active\":\"%s\",\"standby\":\"%s\",\"failovers\":%llu,\"replayed\":%llu,"
                "\"duplicates_dropped\":%llu,\"heartbeats_sent\":%llu,\"heartbeat_failures\":%llu,\"messages\":%llu,"
                "\"last_stall_ms\":%.3f,\"failbacks\":%llu,\"reprotections\":%llu,\"reprotect_attempts\":%llu,"
                "\"flush_reads\":[%llu,%llu]",
                event, static_cast<long long>(unix_ms), static_cast<int>(getpid()), static_cast<const void*>(&c),
                c.kind == CommKind::send ? "send" : "recv", c.devs[0]->port.id().c_str(),
                c.devs[1] ? c.devs[1]->port.id().c_str() : "", c.devs[c.active]->port.id().c_str(),
                standby_name(c.standby.state), static_cast<unsigned long long>(c.stats.failovers),
                static_cast<unsigned long long>(c.stats.replayed),
                static_cast<unsigned long long>(c.stats.duplicates_dropped),
                static_cast<unsigned long long>(c.standby.heartbeats),
                static_cast<unsigned long long>(c.standby.failures), static_cast<unsigned long long>(c.stats.messages),
                c.stats.last_stall_ms, static_cast<unsigned long long>(c.stats.failbacks),
                static_cast<unsigned long long>(c.rp.done), static_cast<unsigned long long>(c.rp.attempts),
                static_cast<unsigned long long>(c.stats.flush_reads[0]),
                static_cast<unsigned long long>(c.stats.flush_reads[1]));
  std::string line = head;
  if (!extra.empty()) line += "," + extra;
  line += "}\n";
  st->reactor.post([path = st->config.stats_file, line = std::move(line)] {
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fputs(line.c_str(), f);
      std::fclose(f);
    } else {
      HA_WARN("NET/HA: cannot append to HA_NCCL_STATS_FILE %s", path.c_str());
    }
  });
}

}  // namespace nccl_ha::plugin
