#pragma once
// JSON text for records streamed one by one (traces, Chrome traces, simulate --json --ops),
// without building an nlohmann::json per record. Numbers read back as the same values
// nlohmann/json writes: integers as integers, doubles in shortest round-trip form with a ".0"
// where they would otherwise look like integers, non-finite doubles as null (as nlohmann does).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace pipescope::json_text {

template <typename Integer>
requires std::is_integral_v<Integer>
inline void appendNumber(std::string &out, Integer value) {
  char buffer[24];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  out.append(buffer, end);
}

inline void appendNumber(std::string &out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  const std::string_view text(buffer, static_cast<std::size_t>(end - buffer));
  out += text;
  if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

inline void appendString(std::string &out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        out += escaped;
      } else {
        out += c;
      }
    }
  }
  out += '"';
}

/// `"name":` — every key of a streamed record is a plain identifier.
inline void appendKey(std::string &out, std::string_view name) {
  out += '"';
  out += name;
  out += "\":";
}

template <typename Value>
inline void appendField(std::string &out, std::string_view name, Value value) {
  appendKey(out, name);
  if constexpr (std::is_same_v<Value, bool>)
    out += value ? "true" : "false";
  else if constexpr (std::is_convertible_v<Value, std::string_view>)
    appendString(out, value);
  else
    appendNumber(out, value);
}

/// `"a":1,"b":"x",...`: several fields of a record, comma-separated (no comma before or after),
/// so a record's fields read as one list instead of alternating appends and commas.
template <typename Value, typename... Rest>
inline void appendFields(std::string &out, std::string_view name, Value value, Rest... rest) {
  appendField(out, name, value);
  if constexpr (sizeof...(rest) > 0) {
    out += ',';
    appendFields(out, rest...);
  }
}

} // namespace pipescope::json_text
