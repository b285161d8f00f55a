// The shapes both tools' JSON reports (ha-net-driver --json, ha-ping --json and --list --json)
// repeat, on top of the one JSON writer (nccl_ha/net/json.hpp): a member holding an object, the
// same or null for a part that did not run, a member holding an array of objects (an array of
// plain values is JsonWriter::kv_list). Each takes the code that writes the inside, so the
// report code says only what goes in.
#pragma once

#include <string_view>

#include "nccl_ha/net/json.hpp"

namespace ha_tools {

using nccl_ha::net::JsonWriter;

// "key":{...}, the members written by members().
template <class Members>
void object(JsonWriter& j, std::string_view key, Members&& members) {
  j.key(key);
  j.open('{');
  members();
  j.close('}');
}

// {...} when `present`, else null: a value (after key(), or an array element) of a part that may
// not have run.
template <class Members>
void object_value(JsonWriter& j, bool present, Members&& members) {
  if (!present) {
    j.null();
    return;
  }
  j.open('{');
  members();
  j.close('}');
}

// "key":{...} when `present`, else "key":null.
template <class Members>
void object_or_null(JsonWriter& j, std::string_view key, bool present, Members&& members) {
  j.key(key);
  object_value(j, present, members);
}

// "key":[...], each element written by element(item).
template <class Range, class Element>
void array(JsonWriter& j, std::string_view key, const Range& items, Element&& element) {
  j.key(key);
  j.open('[');
  for (const auto& item : items) element(item);
  j.close(']');
}

// "key":[{...},...], the members of each item's object written by members(item).
template <class Range, class Members>
void objects(JsonWriter& j, std::string_view key, const Range& items, Members&& members) {
  array(j, key, items, [&](const auto& item) {
    j.open('{');
    members(item);
    j.close('}');
  });
}

// "k1":v1,"k2":v2,...: a flat run of members given as key, value, key, value... (a struct's plain
// fields, in the order the report lists them).
inline void members(JsonWriter&) {}
template <class V, class... Rest>
void members(JsonWriter& j, std::string_view key, const V& value, const Rest&... rest) {
  j.kv(key, value);
  members(j, rest...);
}

}  // namespace ha_tools
