//===- HostAccess.h - host code using the artifact's buffers --*- C++ -*-===//
//-*-===//
//
// The buffers the artifact reads and writes are device memory (host memory
// on the host backend, where host code uses them in place). Elsewhere host
// code fills and reads them through a host staging copy and dcrt::copy.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_HOSTACCESS_H
#define DC_RUN_HOSTACCESS_H

#include "dcrt/core.hpp"

#include <cstdint>

namespace dcrun {

/// True when host code may use `buffer` in place: host memory, or device
/// memory on the host backend.
inline bool isHostAddressable(const dcrt::Buffer &buffer) {
  return buffer.kind() == dcrt::MemoryKind::Host || dcrt::deviceIsHost();
}

/// Calls `write(void *host)` to produce the first `bytes` of `buffer`, in
/// place or in a zeroed staging copy that is then copied over.
template <typename Write>
void writeFromHost(dcrt::Buffer &buffer, int64_t bytes, Write write) {
  if (isHostAddressable(buffer)) {
    write(buffer.data());
    return;
  }
  dcrt::AlignedBuffer staging(bytes, "a host staging copy");
  write(staging.data());
  dcrt::copy(buffer.data(), staging.data(), bytes);
}

/// Calls `read(const void *host)` with the first `bytes` of `buffer`, in
/// place or from a staging copy.
template <typename Read>
void readToHost(const dcrt::Buffer &buffer, int64_t bytes, Read read) {
  if (isHostAddressable(buffer)) {
    read(static_cast<const void *>(buffer.data()));
    return;
  }
  dcrt::AlignedBuffer staging(bytes, "a host staging copy", /*zeroed=*/false);
  dcrt::copy(staging.data(), buffer.data(), bytes);
  read(static_cast<const void *>(staging.data()));
}

} // namespace dcrun

#endif // DC_RUN_HOSTACCESS_H
