#include "engine/json_fields.h"

#include <cmath>

namespace pipescope {

std::string jsonTypeName(const nlohmann::json &value) {
  switch (value.type()) {
  case nlohmann::json::value_t::null: return "null";
  case nlohmann::json::value_t::object: return "an object";
  case nlohmann::json::value_t::array: return "an array";
  case nlohmann::json::value_t::string: return "a string";
  case nlohmann::json::value_t::boolean: return "a boolean";
  case nlohmann::json::value_t::number_integer:
  case nlohmann::json::value_t::number_unsigned: return "an integer";
  case nlohmann::json::value_t::number_float: return "a number";
  default: return "an unsupported value";
  }
}

JsonFields::JsonFields(const nlohmann::json &object, std::string pointer)
    : json_(object), pointer_(std::move(pointer)) {
  if (!json_.is_object())
    error_ = Error{(pointer_.empty() ? std::string("the document") : pointer_) +
                   ": expected an object, got " + jsonTypeName(json_)};
}

void JsonFields::fail(const char *key, const std::string &expected) {
  if (!error_) error_ = Error{pointerTo(key) + ": " + expected};
}

const nlohmann::json *JsonFields::find(const char *key, bool required, const char *type_name) {
  if (error_) return nullptr;
  const auto it = json_.find(key);
  if (it == json_.end() || it->is_null()) {
    if (required) fail(key, std::string("missing; expected ") + type_name);
    return nullptr;
  }
  return &*it;
}

JsonFields &JsonFields::number(const char *key, double &out, double min, double max,
                               bool required) {
  const auto *value = find(key, required, "a number");
  if (!value) return *this;
  if (!value->is_number()) {
    fail(key, "expected a number, got " + jsonTypeName(*value));
    return *this;
  }
  const double v = value->get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    fail(key, "expected a number between " + nlohmann::json(min).dump() + " and " +
                  nlohmann::json(max).dump() + ", got " + value->dump());
    return *this;
  }
  out = v;
  return *this;
}

JsonFields &JsonFields::integer(const char *key, int &out, int min, int max, bool required) {
  const auto *value = find(key, required, "an integer");
  if (!value) return *this;
  const bool integral =
      value->is_number_integer() ||
      (value->is_number_float() && std::floor(value->get<double>()) == value->get<double>());
  if (!integral) {
    fail(key, "expected an integer, got " + jsonTypeName(*value) +
                  (value->is_number() ? " (" + value->dump() + ")" : ""));
    return *this;
  }
  const double v = value->get<double>();
  if (v < min || v > max) {
    fail(key, "expected an integer between " + std::to_string(min) + " and " + std::to_string(max) +
                  ", got " + value->dump());
    return *this;
  }
  out = static_cast<int>(v);
  return *this;
}

JsonFields &JsonFields::boolean(const char *key, bool &out, bool required) {
  const auto *value = find(key, required, "true or false");
  if (!value) return *this;
  if (!value->is_boolean()) {
    fail(key, "expected true or false, got " + jsonTypeName(*value));
    return *this;
  }
  out = value->get<bool>();
  return *this;
}

JsonFields &JsonFields::text(const char *key, std::string &out, bool required) {
  const auto *value = find(key, required, "a string");
  if (!value) return *this;
  if (!value->is_string()) {
    fail(key, "expected a string, got " + jsonTypeName(*value));
    return *this;
  }
  out = value->get<std::string>();
  return *this;
}

const nlohmann::json *JsonFields::object(const char *key, bool required) {
  const auto *value = find(key, required, "an object");
  if (value && !value->is_object()) {
    fail(key, "expected an object, got " + jsonTypeName(*value));
    return nullptr;
  }
  return value;
}

const nlohmann::json *JsonFields::array(const char *key, bool required) {
  const auto *value = find(key, required, "an array");
  if (value && !value->is_array()) {
    fail(key, "expected an array, got " + jsonTypeName(*value));
    return nullptr;
  }
  return value;
}

Status checkFormatAndVersion(const nlohmann::json &json, std::string_view format, int version,
                             int oldest) {
  if (oldest <= 0) oldest = version;
  if (!json.is_object())
    return makeError("expected a JSON object with \"format\": \"" + std::string(format) +
                     "\", got " + jsonTypeName(json));
  const auto f = json.find("format");
  if (f == json.end() || !f->is_string())
    return makeError("/format: missing; expected \"" + std::string(format) + "\"");
  if (f->get<std::string>() != format)
    return makeError("/format: this is a \"" + f->get<std::string>() + "\" file, expected \"" +
                     std::string(format) + "\"");
  const auto v = json.find("version");
  if (v == json.end() || !v->is_number_integer())
    return makeError("/version: missing; expected the integer " + std::to_string(version));
  const auto got = v->get<std::int64_t>();
  if (got > version)
    return makeError("/version: the file is version " + std::to_string(got) +
                     ", newer than this pipescope reads (" + std::to_string(version) +
                     "); update pipescope");
  if (got < oldest)
    return makeError("/version: the file is version " + std::to_string(got) +
                     ", older than this pipescope reads (" + std::to_string(oldest) +
                     "); re-save it with the version that wrote it");
  return Ok{};
}

} // namespace pipescope
