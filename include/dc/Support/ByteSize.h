//===- ByteSize.h - byte sizes in pass options and messages -----*- C++ -*-===//
#ifndef DC_SUPPORT_BYTESIZE_H
#define DC_SUPPORT_BYTESIZE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dc {

/// Parses a byte size: a plain or scientific number of bytes ("2.5e9"), with
/// an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB). Nothing for
/// text that is not one, or a size of 2^63 bytes (8 EiB) or more.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

/// "1.50 GiB (1610612736 B)"-style text for diagnostics and reports.
std::string formatBytes(int64_t bytes);

} // namespace dc

#endif // DC_SUPPORT_BYTESIZE_H
