//===- Descriptor.h - reading the library calls' descriptors --------------===//
//
// What the descriptor checks of dcrt's library calls (core/Moe.cpp,
// core/AdamW.cpp, core/Matmul.cpp, core/Attention.cpp) share: the dtype
// names of their messages, and reading a versioned descriptor.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_DESCRIPTOR_H
#define DCRT_CORE_DESCRIPTOR_H

#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace dcrt::detail {

/// A descriptor's dtype field for a message: its name, or "<unknown
/// dtype>" for a code no tensor has.
inline const char *descriptorDTypeName(int64_t dtype) {
  return dtype >= 0 && dtype <= DCRT_I64
             ? dtypeName(static_cast<int32_t>(dtype))
             : "<unknown dtype>";
}

/// The caller's descriptor: only its struct_size bytes are read (a later
/// version's fields stay zero for an older caller); fatal when `desc` is
/// null or struct_size is below the first version's.
template <typename Desc>
Desc readDescriptor(const Desc *desc, int64_t firstSize, const char *caller) {
  if (!desc)
    fatal("%s: null descriptor", caller);
  Desc d{};
  std::memcpy(&d, desc, sizeof(int64_t)); // struct_size
  if (d.struct_size < firstSize) {
    fatal("%s: bad descriptor: struct_size %lld, must be at least %lld "
          "(sizeof the first version)",
          caller, static_cast<long long>(d.struct_size),
          static_cast<long long>(firstSize));
  }
  std::memcpy(
      &d, desc,
      std::min<size_t>(static_cast<size_t>(d.struct_size), sizeof(Desc)));
  return d;
}

} // namespace dcrt::detail

#endif // DCRT_CORE_DESCRIPTOR_H
