// One JSON writer for every JSON nccl-ha emits: the plugin's stats records, ha-ping's report and
// ha-net-driver's report. It appends to a std::string (the caller decides where the text goes:
// a file, a stats line appended off the data path by a worker, stdout) and handles commas,
// nesting and string escaping; numbers are written by type (doubles with 3 decimals).
//
//   JsonWriter j;
//   j.open('{'); j.kv("tool", "ha-ping"); j.key("rails"); j.open('['); ... j.close(']'); j.close('}');
//   std::fputs(j.str().c_str(), f);
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace nccl_ha::net {

class JsonWriter {
 public:
  JsonWriter() = default;
  void reserve(std::size_t n) { out_.reserve(n); }

  void open(char c) {
    sep();
    out_ += c;
    first_ = true;
  }
  void close(char c) {
    out_ += c;
    first_ = false;
  }
  void key(std::string_view k) {
    sep();
    quoted(k);
    out_ += ':';
    first_ = true;  // the value that follows needs no comma
  }
  void str(std::string_view s) {
    sep();
    quoted(s);
  }
  void num(double v) {
    sep();
    if (!std::isfinite(v)) {  // JSON has no NaN / inf
      out_ += "null";
      return;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    out_ += buf;
  }
  void num(std::uint64_t v) {
    sep();
    out_ += std::to_string(v);
  }
  void num(std::int64_t v) {
    sep();
    out_ += std::to_string(v);
  }
  void num(int v) { num(static_cast<std::int64_t>(v)); }
  void num(unsigned v) { num(static_cast<std::uint64_t>(v)); }
  void boolean(bool b) {
    sep();
    out_ += b ? "true" : "false";
  }
  void null() {
    sep();
    out_ += "null";
  }
  // Pre-formatted JSON (a value written by another JsonWriter, for instance).
  void raw(std::string_view json) {
    sep();
    out_ += json;
  }
  template <class T>
  void kv(std::string_view k, const T& v) {
    key(k);
    put(v);
  }
  template <class T>
  void kv(std::string_view k, const std::optional<T>& v) {
    key(k);
    if (v) put(*v);
    else null();
  }

  // "k": [v, ...] from any range of values put() takes.
  template <class Range>
  void kv_list(std::string_view k, const Range& values) {
    key(k);
    open('[');
    for (const auto& v : values) put(v);
    close(']');
  }

  const std::string& str() const noexcept { return out_; }
  std::string take() noexcept { return std::move(out_); }

  // `s` as a JSON string literal, quotes included.
  static std::string quote(std::string_view s) {
    JsonWriter j;
    j.str(s);
    return j.take();
  }

 private:
  void put(const std::string& s) { str(s); }
  void put(std::string_view s) { str(s); }
  void put(const char* s) { str(s ? std::string_view(s) : std::string_view()); }
  void put(bool b) { boolean(b); }
  void put(double v) { num(v); }
  void put(float v) { num(static_cast<double>(v)); }
  void put(int v) { num(v); }
  void put(unsigned v) { num(v); }
  void put(long v) { num(static_cast<std::int64_t>(v)); }
  void put(long long v) { num(static_cast<std::int64_t>(v)); }
  void put(unsigned long v) { num(static_cast<std::uint64_t>(v)); }
  void put(unsigned long long v) { num(static_cast<std::uint64_t>(v)); }
  void sep() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  void quoted(std::string_view s) {
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += ch;
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out_ += buf;
      } else {
        out_ += ch;
      }
    }
    out_ += '"';
  }

  std::string out_;
  bool first_ = true;
};

}  // namespace nccl_ha::net
