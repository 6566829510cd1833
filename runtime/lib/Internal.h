//===- Internal.h - libdcrt's shared internals ----------------------------===//
#ifndef DCRT_LIB_INTERNAL_H
#define DCRT_LIB_INTERNAL_H

namespace dcrt::detail {

/// Lets error messages name the rank once dcrt_init knows it.
void setErrorRank(int rank, int worldSize);

} // namespace dcrt::detail

#endif // DCRT_LIB_INTERNAL_H
