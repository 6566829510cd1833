//===- error.hpp - how libdcrt and dc-run report fatal errors ---*- C++ -*-===//
//
// An error in a multi-rank job must end every rank, not just the one that saw
// it: fatal() prints what failed and where, then aborts the whole job.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_ERROR_HPP
#define DCRT_ERROR_HPP

namespace dcrt {

/// Prints "<tool>: rank R/W: error: <message>" to stderr and ends the job:
/// MPI_Abort (every rank) while MPI is up, with a watchdog that exits this
/// process if the abort itself hangs; exit status 1 otherwise. Never returns.
[[noreturn]] void fatal(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/// The exit status of a rank that ends because another rank ended first
/// (a lost connection): a launcher names the other rank, whatever order it
/// reaps them in.
constexpr int kPeerEndedExitStatus = 4;

/// fatal(), for an error whose cause is another rank's end: exits with
/// kPeerEndedExitStatus instead of 1.
[[noreturn]] void fatalPeerEnded(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/// Prints "<tool>: rank R/W: warning: <message>" to stderr.
void warn(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Names the program in messages (default "dcrt"); dc-run sets "dc-run".
void setErrorPrefix(const char *tool);

} // namespace dcrt

#endif // DCRT_ERROR_HPP
