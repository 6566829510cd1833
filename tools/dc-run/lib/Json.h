//===- Json.h - a small JSON reader -----------------------------*- C++ -*-===//
//
// libdcrt must not depend on LLVM, yet it reads safetensors headers, and
// dc-run reads the artifact's manifest: this is the one small parser both use.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_JSON_H
#define DC_RUN_JSON_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dcrun::json {

class Value {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  /// Set when the literal was an integer that fits (offsets need all 64 bits).
  std::optional<int64_t> integer;
  std::string string;
  std::vector<Value> array;
  /// Members in file order.
  std::vector<std::pair<std::string, Value>> object;

  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
  bool isString() const { return kind == Kind::String; }
  bool isNumber() const { return kind == Kind::Number; }
  /// The member `key` of an object, or null if absent or not an object.
  const Value *get(std::string_view key) const;
};

/// Parses one JSON document. On failure returns nullopt and sets `error` to
/// "offset N: <what was expected>".
std::optional<Value> parse(std::string_view text, std::string &error);

/// `text` as a JSON string literal, quotes included.
std::string quote(std::string_view text);

} // namespace dcrun::json

#endif // DC_RUN_JSON_H
