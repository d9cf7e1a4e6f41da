#pragma once
// Reading typed fields out of a JSON object with one clear error naming the field's JSON pointer
// and what was expected. The first error sticks; later reads do nothing.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/result.h"

namespace pipescope {

class JsonFields {
public:
  /// `pointer` is where `object` sits in the document, e.g. "/costs" ("" for the root).
  JsonFields(const nlohmann::json &object, std::string pointer);

  /// Each reader leaves `out` unchanged when the key is absent and not required.
  JsonFields &number(const char *key, double &out, double min, double max, bool required = false);
  JsonFields &integer(const char *key, int &out, int min, int max, bool required = false);
  JsonFields &boolean(const char *key, bool &out, bool required = false);
  JsonFields &text(const char *key, std::string &out, bool required = false);

  /// The sub-object or array at key (nullptr when absent or null), or an error if another type.
  const nlohmann::json *object(const char *key, bool required = false);
  const nlohmann::json *array(const char *key, bool required = false);

  std::string pointerTo(const char *key) const { return pointer_ + "/" + key; }
  bool ok() const { return !error_.has_value(); }
  const Error &error() const { return *error_; }
  /// Records an error for a key (keeps only the first).
  void fail(const char *key, const std::string &expected);

private:
  const nlohmann::json *find(const char *key, bool required, const char *type_name);

  const nlohmann::json &json_;
  std::string pointer_;
  std::optional<Error> error_;
};

/// The JSON type name used in messages ("a number", "a string", ...).
std::string jsonTypeName(const nlohmann::json &value);

/// Checks "format" and "version": the error distinguishes a different file kind, an older and a
/// newer version (as Tracy does for its trace files).
/// Versions from `oldest` (default: only `version`) up to `version` are read.
Status checkFormatAndVersion(const nlohmann::json &json, std::string_view format, int version,
                             int oldest = 0);

} // namespace pipescope
