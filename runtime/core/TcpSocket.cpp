//===- TcpSocket.cpp - sockets with deadlines for the tcp transport -------===//
#include "TcpSocket.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <thread>
#include <unistd.h>

using namespace dcrt;
using namespace dcrt::detail::tcp;

Clock::time_point dcrt::detail::tcp::deadlineIn(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

double dcrt::detail::tcp::secondsLeft(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

int dcrt::detail::tcp::pollMillis(Clock::time_point deadline, int most) {
  double left = secondsLeft(deadline);
  return left <= 0 ? 0
                   : static_cast<int>(std::min<double>(most, left * 1e3) + 1);
}

void dcrt::detail::tcp::setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    fatal("tcp transport: fcntl failed: %s", std::strerror(errno));
}

void dcrt::detail::tcp::setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string dcrt::detail::tcp::numericHost(const sockaddr_storage &address,
                                           socklen_t length) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr *>(&address), length, host,
                  sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0)
    return "?";
  return host;
}

bool dcrt::detail::tcp::isLoopback(const sockaddr_storage &address) {
  if (address.ss_family == AF_INET6) {
    const auto &in6 = reinterpret_cast<const sockaddr_in6 &>(address);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr))
      return in6.sin6_addr.s6_addr[12] == 127;
    return IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr);
  }
  const auto &in = reinterpret_cast<const sockaddr_in &>(address);
  return (ntohl(in.sin_addr.s_addr) >> 24) == 127;
}

namespace {
int portOf(const sockaddr_storage &address) {
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6 &>(address).sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in &>(address).sin_port);
}
} // namespace

int dcrt::detail::tcp::listenOn(int family, int port, const std::string &what) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    fatal("tcp transport: cannot create a socket: %s", std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage address = {};
  socklen_t length;
  if (family == AF_INET6) {
    auto &in6 = reinterpret_cast<sockaddr_in6 &>(address);
    in6.sin6_family = AF_INET6;
    in6.sin6_addr = in6addr_any;
    in6.sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof(in6);
  } else {
    auto &in = reinterpret_cast<sockaddr_in &>(address);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_ANY);
    in.sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof(in);
  }
  if (bind(fd, reinterpret_cast<sockaddr *>(&address), length) != 0 ||
      listen(fd, SOMAXCONN) != 0)
    fatal("tcp transport: cannot listen on port %d for %s: %s", port,
          what.c_str(), std::strerror(errno));
  return fd;
}

int dcrt::detail::tcp::boundPort(int fd) {
  sockaddr_storage address = {};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length);
  return portOf(address);
}

sockaddr_storage dcrt::detail::tcp::resolve(const std::string &host, int port,
                                            socklen_t &length,
                                            const char *what) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || !found)
    fatal("tcp transport: cannot resolve %s '%s': %s", what, host.c_str(),
          gai_strerror(rc));
  sockaddr_storage address = {};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  length = found->ai_addrlen;
  freeaddrinfo(found);
  return address;
}

int dcrt::detail::tcp::connectBefore(const sockaddr_storage &address,
                                     socklen_t length,
                                     Clock::time_point deadline,
                                     std::string &lastError) {
  for (;;) {
    int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      fatal("tcp transport: cannot create a socket: %s", std::strerror(errno));
    // Nonblocking while connecting, so that the deadline bounds each try.
    setNonBlocking(fd);
    int rc = connect(fd, reinterpret_cast<const sockaddr *>(&address), length);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd entry = {fd, POLLOUT, 0};
      if (poll(&entry, 1, pollMillis(deadline)) == 1) {
        int error = 0;
        socklen_t size = sizeof(error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
        rc = error ? -1 : 0;
        errno = error;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      int flags = fcntl(fd, F_GETFL);
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      return fd;
    }
    lastError = std::strerror(errno);
    close(fd);
    if (secondsLeft(deadline) <= 0)
      return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {
/// readBefore() and writeBefore(): `reading` picks the direction.
bool transferBefore(int fd, char *data, size_t bytes, bool reading,
                    Clock::time_point deadline, std::string &error) {
  size_t done = 0;
  while (done < bytes) {
    pollfd entry = {fd, static_cast<short>(reading ? POLLIN : POLLOUT), 0};
    int ready = poll(&entry, 1, pollMillis(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready == 0) {
      if (secondsLeft(deadline) > 0)
        continue;
      error = "timed out";
      return false;
    }
    ssize_t n = reading ? recv(fd, data + done, bytes - done, 0)
                        : send(fd, data + done, bytes - done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      error = n == 0 ? "the connection was closed" : std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}
} // namespace

bool dcrt::detail::tcp::readBefore(int fd, std::string &out, size_t bytes,
                                   Clock::time_point deadline,
                                   std::string &error) {
  out.assign(bytes, '\0');
  return transferBefore(fd, out.data(), bytes, true, deadline, error);
}

bool dcrt::detail::tcp::writeBefore(int fd, const std::string &data,
                                    Clock::time_point deadline,
                                    std::string &error) {
  return transferBefore(fd, const_cast<char *>(data.data()), data.size(), false,
                        deadline, error);
}

std::string dcrt::detail::tcp::nameRanks(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) {
    if (i > 0)
      text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > 8)
    text += " and " + std::to_string(ranks.size() - 8) + " more";
  return text;
}
