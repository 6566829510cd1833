//===- FuzzTcpFrames.cpp - libFuzzer target: the tcp transport's parsers --===//
//
// Any bytes, taken as what a connection sends the rendezvous, what a rank
// reads back from rank 0, what opens a mesh connection and a collective's
// frame header, are accepted or refused with a reason by the parsers of
// runtime/core/TcpWire.h, which read nothing outside them and allocate
// only what their bounds allow. What a parser accepts encodes back to the
// same bytes, and reading a hello as the rendezvous does (only as many
// bytes as it asks for) reaches the verdict the whole input gets.
//
//===----------------------------------------------------------------------===//
#include "TcpWire.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace dcrt::detail;
using namespace dcrt::detail::tcp;

namespace {
/// The world size a rank reading rank 0's reply has here.
constexpr int kWorldSize = 3;

void check(bool holds, const char *what) {
  if (!holds) {
    std::fprintf(stderr, "dc-fuzz-tcp: %s\n", what);
    std::abort();
  }
}

void checkHello(const std::string &bytes) {
  Hello hello;
  size_t more = 0;
  std::string error;
  HelloState state = parseHello(bytes, hello, more, error);
  check((state == HelloState::Partial) == (more > 0),
        "a partial hello asks for more bytes, nothing else does");
  check(more <= kHelloHeaderBytes + kMaxTokenBytes,
        "a hello asks for more bytes than one may hold");
  check(state != HelloState::Malformed || !error.empty(),
        "a malformed hello says why");
  if (state == HelloState::Whole && hello.version == kVersion)
    check(encodeHello(hello) == bytes, "a hello encodes back to its bytes");

  // As the rendezvous reads: never more than the parser asks for.
  std::string seen;
  Hello read;
  HelloState reading;
  for (;;) {
    reading = parseHello(seen, read, more, error);
    if (reading != HelloState::Partial || seen.size() == bytes.size())
      break;
    size_t take = std::min(more, bytes.size() - seen.size());
    seen.append(bytes, seen.size(), take);
  }
  Hello again;
  check(parseHello(seen, again, more, error) == reading,
        "the same bytes get the same verdict");
  if (seen.size() == bytes.size())
    check(reading == state, "read in pieces, a hello gets the same verdict");
  else
    check(state != HelloState::Partial && reading != HelloState::Partial &&
              (reading == HelloState::Whole || reading == state),
          "the rendezvous stops reading only at the input's verdict");
}

void checkReply(const std::string &bytes) {
  if (bytes.size() < kReplyHeaderBytes)
    return;
  bool accepted = false;
  size_t bodyBytes = 0;
  std::string error;
  if (!parseReplyHeader(bytes.substr(0, kReplyHeaderBytes), kWorldSize,
                        accepted, bodyBytes, error)) {
    check(!error.empty(), "a refused reply header says why");
    return;
  }
  check(bodyBytes <=
            (accepted ? maxAddressTableBytes(kWorldSize) : kMaxRefusalBytes),
        "a reply's body is bounded before it is read");
  std::string body = bytes.substr(kReplyHeaderBytes, bodyBytes);
  if (!accepted) {
    std::string text = printable(body);
    check(text.size() == body.size(), "printable keeps the length");
    for (char c : text)
      check(c >= 0x20 && c <= 0x7e, "printable leaves only printable text");
    return;
  }
  uint64_t token = 0;
  std::vector<PeerAddress> table;
  if (decodeAddressTable(body, token, table, error))
    check(table.size() * 9 + 16 <= body.size(), "a table fits its bytes");
}

void checkAddressTable(const std::string &bytes) {
  uint64_t token = 0;
  std::vector<PeerAddress> table;
  std::string error;
  if (!decodeAddressTable(bytes, token, table, error)) {
    check(!error.empty(), "a refused table says why");
    return;
  }
  for (const PeerAddress &entry : table)
    check(entry.port >= 1 && entry.port <= 65535 && !entry.host.empty() &&
              entry.host.size() <= kMaxHostBytes,
          "a table's entries are in range");
  check(encodeAddressTable(token, table) == bytes,
        "a table encodes back to its bytes");
}

void checkMesh(const std::string &bytes) {
  // Half the time the token the hello carries, else another one.
  uint64_t token =
      bytes.size() >= kMeshHelloBytes ? get64(bytes.data() + 8) : 0;
  if (!bytes.empty() && (bytes.back() & 1))
    token ^= 1;
  uint32_t rank = 0;
  std::string error;
  if (parseMeshHello(bytes, token, rank, error))
    check(encodeMeshHello(rank, token) == bytes,
          "a mesh hello encodes back to its bytes");
  else
    check(!error.empty(), "a refused mesh hello says why");
  if (bytes.size() >= kFrameHeaderBytes) {
    char out[kFrameHeaderBytes];
    encodeFrameHeader(decodeFrameHeader(bytes.data()), out);
    check(std::string(out, kFrameHeaderBytes) ==
              bytes.substr(0, kFrameHeaderBytes),
          "a frame header encodes back to its bytes");
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  checkHello(bytes);
  checkReply(bytes);
  checkAddressTable(bytes);
  checkMesh(bytes);
  return 0;
}
