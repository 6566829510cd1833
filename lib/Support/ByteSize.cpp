//===- ByteSize.cpp - byte sizes in pass options and messages -------------===//
#include "dc/Support/ByteSize.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

using namespace llvm;

std::optional<int64_t> dc::parseByteSize(StringRef text) {
  text = text.trim();
  size_t unitAt = text.find_if(
      [](char c) { return std::isalpha(c) && c != 'e' && c != 'E'; });
  StringRef number = text.take_front(unitAt).trim();
  StringRef unit =
      unitAt == StringRef::npos ? "" : text.drop_front(unitAt).trim();
  double scale = llvm::StringSwitch<double>(unit)
                     .Cases({"", "B"}, 1.0)
                     .Case("KB", 1e3)
                     .Case("MB", 1e6)
                     .Case("GB", 1e9)
                     .Case("TB", 1e12)
                     .Case("KiB", 1024.0)
                     .Case("MiB", 1024.0 * 1024)
                     .Case("GiB", 1024.0 * 1024 * 1024)
                     .Case("TiB", 1024.0 * 1024 * 1024 * 1024)
                     .Default(-1);
  if (scale < 0 || number.empty())
    return std::nullopt;
  std::string digits = number.str();
  char *end = nullptr;
  double value = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size() || !std::isfinite(value) ||
      value < 0)
    return std::nullopt;
  // Past 2^63 B (8 EiB) the count would overflow int64_t.
  double bytes = std::round(value * scale);
  if (!(bytes < 0x1p63))
    return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::string dc::formatBytes(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  double value = static_cast<double>(bytes);
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(value) >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.2f", value) << " " << units[unit] << " (" << bytes
       << " B)";
  return text;
}
