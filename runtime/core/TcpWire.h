//===- TcpWire.h - the byte layout of the tcp transport's messages --------===//
//
// Every message of the rendezvous, the mesh and the collectives is made of
// little-endian integers, so that ranks on hosts of any byte order agree.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPWIRE_H
#define DCRT_CORE_TCPWIRE_H

#include <cstdint>
#include <string>

namespace dcrt::detail::tcp {

/// Opens every hello and address table: a connection without it is no rank
/// of ours (a port scan, a stray client).
constexpr uint32_t kMagic = 0x54524344; // "DCRT"
/// How long a new connection may take to send its hello.
constexpr double kHelloSeconds = 10;

inline void put32(std::string &out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
}

inline void put64(std::string &out, uint64_t value) {
  put32(out, static_cast<uint32_t>(value));
  put32(out, static_cast<uint32_t>(value >> 32));
}

inline uint32_t get32(const char *in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value |= uint32_t(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

inline uint64_t get64(const char *in) {
  return get32(in) | uint64_t(get32(in + 4)) << 32;
}

} // namespace dcrt::detail::tcp

#endif // DCRT_CORE_TCPWIRE_H
