//===- ParseJson.h - JSON documents with errors that say where --*- C++ -*-===//
#ifndef DC_RUN_PARSEJSON_H
#define DC_RUN_PARSEJSON_H

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace dcrun {

/// Parses one JSON document. On failure returns nullopt and sets `error` to
/// "offset N: <what was wrong>" (nlohmann's reason, without its line and
/// column prefix: manifests and headers are one line).
inline std::optional<nlohmann::json> parseJson(std::string_view text,
                                               std::string &error) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &failure) {
    std::string reason = failure.what();
    size_t position = reason.find("parse error");
    position = reason.find(": ", position);
    if (position != std::string::npos)
      reason = reason.substr(position + 2);
    error = "offset " + std::to_string(failure.byte) + ": " + reason;
    return std::nullopt;
  } catch (const nlohmann::json::exception &failure) {
    // Not a syntax error: a number too large for a double ("1e352"), found
    // by dc-fuzz-manifest; it ended dc-run with an uncaught exception.
    error = failure.what();
    return std::nullopt;
  }
}

} // namespace dcrun

#endif // DC_RUN_PARSEJSON_H
