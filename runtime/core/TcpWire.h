//===- TcpWire.h - the byte layout of the tcp transport's messages --------===//
//
// Every message of the rendezvous, the mesh and the collectives is made of
// little-endian integers, so that ranks on hosts of any byte order agree.
// The parsers here take bytes, not sockets: whatever arrives on a port is
// judged by the same code the fuzzer (fuzz/FuzzTcpFrames.cpp) and the unit
// tests run, and every length read from the wire is bounded here before
// anything is allocated for it.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPWIRE_H
#define DCRT_CORE_TCPWIRE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcrt::detail {

/// One entry of the address table rank 0 sends: where a rank's data
/// listener is.
struct PeerAddress {
  std::string host; // numeric address or a name getaddrinfo resolves
  int port = 0;
  bool operator==(const PeerAddress &other) const {
    return host == other.host && port == other.port;
  }
};

namespace tcp {

/// Opens every hello and address table: a connection without it is no rank
/// of ours (a port scan, a stray client).
constexpr uint32_t kMagic = 0x54524344; // "DCRT"
/// Raised when the rendezvous hello changes, so that ranks of different
/// libdcrt builds fail with a message instead of misreading each other.
constexpr uint32_t kVersion = 2;
/// How long a new connection may take to send its hello.
constexpr double kHelloSeconds = 10;
/// The longest job token (DCRT_TCP_TOKEN) a hello may carry.
constexpr size_t kMaxTokenBytes = 256;
/// The longest host name in an address table (a DNS name has at most 253
/// characters; a numeric address far fewer).
constexpr size_t kMaxHostBytes = 255;
/// The longest reason rank 0 gives a connection it refuses.
constexpr size_t kMaxRefusalBytes = 4096;

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

//===----------------------------------------------------------------------===//
// The rendezvous: a rank's hello to rank 0, rank 0's reply
//===----------------------------------------------------------------------===//

/// What a rank tells rank 0. On the wire: magic, version, rank, world
/// size, data port, token length, token.
struct Hello {
  uint32_t version = kVersion;
  uint32_t rank = 0, worldSize = 0, dataPort = 0;
  std::string token; // DCRT_TCP_TOKEN, empty without one
};
constexpr size_t kHelloHeaderBytes = 24;
std::string encodeHello(const Hello &hello);

/// What the first bytes of a connection to the rendezvous port say so far.
enum class HelloState {
  Partial,   // a prefix of a hello: `more` bytes are still to come
  Whole,     // a hello (of another version: only `version` is read)
  Foreign,   // not opened by the magic: no dcrt rank
  Malformed, // the magic, then something no hello holds (`error` says what)
};
/// Judges `bytes`, all that a connection sent so far; the rendezvous reads
/// at most `more` further bytes before asking again, so that a connection
/// never gets to send more than a hello.
HelloState parseHello(std::string_view bytes, Hello &hello, size_t &more,
                      std::string &error);

/// Rank 0's reply: status (0 accepted, 1 refused), body length, body (the
/// address table, or why not).
constexpr size_t kReplyHeaderBytes = 8;
std::string encodeReply(bool accepted, const std::string &body);
/// Reads a reply header; false, with `error` set, when its status is
/// unknown or its body longer than an address table of `worldSize` ranks
/// (accepted) or kMaxRefusalBytes (refused) can be.
bool parseReplyHeader(std::string_view header, int worldSize, bool &accepted,
                      size_t &bodyBytes, std::string &error);
/// The longest address table of `worldSize` ranks.
size_t maxAddressTableBytes(int worldSize);
/// `text` with every byte that is not printable ASCII as '?': what a peer
/// sent may be quoted in a message.
std::string printable(std::string_view text);

/// The address table: magic, mesh token, count, then each rank's data port,
/// host length and host.
std::string encodeAddressTable(uint64_t token,
                               const std::vector<PeerAddress> &table);
/// False, with `error` set, when `bytes` is not a whole table.
bool decodeAddressTable(std::string_view bytes, uint64_t &token,
                        std::vector<PeerAddress> &table, std::string &error);

//===----------------------------------------------------------------------===//
// The mesh and the collectives
//===----------------------------------------------------------------------===//

/// Opens each mesh connection: magic, rank, mesh token.
constexpr size_t kMeshHelloBytes = 16;
std::string encodeMeshHello(uint32_t rank, uint64_t token);
/// False, with `error` set, when `bytes` is not a mesh hello opened with
/// `token`.
bool parseMeshHello(std::string_view bytes, uint64_t token, uint32_t &rank,
                    std::string &error);

/// Heads every collective message: kind, sequence number, payload bytes. A
/// receiver knows how many bytes it expects and takes no other count.
struct FrameHeader {
  uint32_t kind = 0, sequence = 0;
  uint64_t bytes = 0;
  bool operator==(const FrameHeader &other) const {
    return kind == other.kind && sequence == other.sequence &&
           bytes == other.bytes;
  }
};
constexpr size_t kFrameHeaderBytes = 16;
void encodeFrameHeader(const FrameHeader &header, char out[kFrameHeaderBytes]);
FrameHeader decodeFrameHeader(const char in[kFrameHeaderBytes]);

} // namespace tcp
} // namespace dcrt::detail

#endif // DCRT_CORE_TCPWIRE_H
