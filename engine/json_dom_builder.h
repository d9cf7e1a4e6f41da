#pragma once
// A JSON document built from nlohmann/json SAX events, for the streaming readers that decode the
// big arrays of a file record by record and build only the rest as a document (trace files,
// PyTorch profiler traces).
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipescope {

// Builds a JSON document from SAX events, as json::parse would (a later duplicate key replaces
// the earlier one).
// nlohmann::json's destructor checks its invariants with assertions, not exceptions, which
// clang-tidy cannot see through.
// NOLINTNEXTLINE(bugprone-exception-escape)
class JsonDomBuilder {
  using json = nlohmann::json;

public:
  void reset() {
    root_ = json();
    stack_.clear();
    member_ = nullptr;
  }
  template <typename Value> void value(Value &&v) { place(json(std::forward<Value>(v))); }
  void open(json container) { stack_.push_back(place(std::move(container))); }
  void key(const std::string &name) { member_ = &(*stack_.back())[name]; }
  void close() { stack_.pop_back(); }
  json &root() { return root_; }

private:
  json *place(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json &parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    *member_ = std::move(v);
    return member_;
  }

  json root_;
  std::vector<json *> stack_;
  json *member_ = nullptr;
};

} // namespace pipescope
