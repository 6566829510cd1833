//===- TcpSocket.h - sockets with deadlines for the tcp transport ---------===//
//
// What the rendezvous and the mesh need from the socket API: listen, resolve,
// connect with retries, and read or write whole messages before a deadline.
// Setup errors no rank can recover from (no socket, no listener, a name that
// does not resolve) are fatal here; the rest return false or -1 with the
// reason, for the caller's message that knows which rank it waited for.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPSOCKET_H
#define DCRT_CORE_TCPSOCKET_H

#include <chrono>
#include <string>
#include <sys/socket.h>
#include <vector>

namespace dcrt::detail::tcp {

using Clock = std::chrono::steady_clock;

Clock::time_point deadlineIn(double seconds);
double secondsLeft(Clock::time_point deadline);
/// poll()'s timeout until the deadline, at most `most` ms so that waiting
/// loops look at the clock again.
int pollMillis(Clock::time_point deadline, int most = 1000);

void setNonBlocking(int fd);
/// Collective messages are small headers followed by payloads: no Nagle.
void setNoDelay(int fd);

std::string numericHost(const sockaddr_storage &address, socklen_t length);
bool isLoopback(const sockaddr_storage &address);

/// A listening socket on every interface of `family`, at `port` (0: any);
/// fatal naming `what` it is for when that fails.
int listenOn(int family, int port, const std::string &what);
/// The port a listening socket got.
int boundPort(int fd);

/// The first address of host:port, fatal naming `what` when it does not
/// resolve.
sockaddr_storage resolve(const std::string &host, int port, socklen_t &length,
                         const char *what);

/// Connects to `address`, retrying refused connections (the listener may
/// not be up yet) until the deadline; a blocking socket, or -1 with
/// `lastError` set if the deadline passed.
int connectBefore(const sockaddr_storage &address, socklen_t length,
                  Clock::time_point deadline, std::string &lastError);

/// Reads or writes exactly the bytes asked for on a blocking socket before
/// the deadline; false on a timeout, an error or the end of the stream
/// (`error` says which).
bool readBefore(int fd, std::string &out, size_t bytes,
                Clock::time_point deadline, std::string &error);
bool writeBefore(int fd, const std::string &data, Clock::time_point deadline,
                 std::string &error);

/// "rank 2" or "ranks 2, 5 and 7" (at most 8 named), for messages about
/// the peers a rank waits for.
std::string nameRanks(const std::vector<int> &ranks);

} // namespace dcrt::detail::tcp

#endif // DCRT_CORE_TCPSOCKET_H
