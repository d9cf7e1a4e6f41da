#pragma once
// A value or an error message. The engine reports every failure through this type instead of
// throwing across its boundary, so callers (CLI, GUI, backend) decide how to show it.
#include <string>
#include <utility>
#include <variant>

namespace pipescope {

/// A failure that a person can act on: what is wrong and, where possible, what would work.
struct Error {
  std::string message;

  friend bool operator==(const Error &, const Error &) = default;
};

/// Either a T or an Error. Minimal stand-in for C++23's std::expected.
template <typename T> class Result {
public:
  Result(T value) : state_(std::move(value)) {}     // NOLINT(google-explicit-constructor)
  Result(Error error) : state_(std::move(error)) {} // NOLINT(google-explicit-constructor)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T &value() & { return std::get<0>(state_); }
  const T &value() const & { return std::get<0>(state_); }
  T &&value() && { return std::get<0>(std::move(state_)); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }

  const Error &error() const { return std::get<1>(state_); }

private:
  std::variant<T, Error> state_;
};

/// Result for operations that produce nothing but may fail.
struct Ok {};
using Status = Result<Ok>;

inline Error makeError(std::string message) {
  return Error{std::move(message)};
}

} // namespace pipescope
