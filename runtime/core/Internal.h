//===- Internal.h - libdcrt's shared internals ----------------------------===//
#ifndef DCRT_CORE_INTERNAL_H
#define DCRT_CORE_INTERNAL_H

namespace dcrt::detail {

/// Lets error messages name the rank once dcrt_init knows it.
void setErrorRank(int rank, int worldSize);

/// Called by fatal() before it aborts the job: a device backend aborts its
/// communicators here so that peers blocked in a collective return. A hook
/// that throws ends fatal() with that exception (and re-arms it): how a
/// fuzzer keeps running after an input is rejected.
void setAbortHook(void (*hook)());

/// Restarts nowNs() at zero (right after the barrier of dcrt_init, so that
/// the ranks' clocks roughly agree).
void resetClock();

} // namespace dcrt::detail

#endif // DCRT_CORE_INTERNAL_H
