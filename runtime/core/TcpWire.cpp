//===- TcpWire.cpp - the byte layout of the tcp transport's messages ------===//
#include "TcpWire.h"

#include <algorithm>

using namespace dcrt::detail;
using namespace dcrt::detail::tcp;

namespace {
std::string bytesText(size_t bytes) {
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}
} // namespace

std::string dcrt::detail::tcp::encodeHello(const Hello &hello) {
  std::string out;
  put32(out, kMagic);
  put32(out, hello.version);
  put32(out, hello.rank);
  put32(out, hello.worldSize);
  put32(out, hello.dataPort);
  put32(out, static_cast<uint32_t>(hello.token.size()));
  out += hello.token;
  return out;
}

HelloState dcrt::detail::tcp::parseHello(std::string_view bytes, Hello &hello,
                                         size_t &more, std::string &error) {
  more = 0;
  // A stranger is known by its first byte that differs from the magic.
  std::string magic;
  put32(magic, kMagic);
  size_t known = std::min<size_t>(bytes.size(), 4);
  if (bytes.substr(0, known) != std::string_view(magic).substr(0, known))
    return HelloState::Foreign;
  if (bytes.size() < 8) {
    more = 8 - bytes.size();
    return HelloState::Partial;
  }
  hello.version = get32(bytes.data() + 4);
  // Another version's layout is unknown past its version: enough to tell
  // that rank why it is refused.
  if (hello.version != kVersion)
    return HelloState::Whole;
  if (bytes.size() < kHelloHeaderBytes) {
    more = kHelloHeaderBytes - bytes.size();
    return HelloState::Partial;
  }
  hello.rank = get32(bytes.data() + 8);
  hello.worldSize = get32(bytes.data() + 12);
  hello.dataPort = get32(bytes.data() + 16);
  uint32_t tokenBytes = get32(bytes.data() + 20);
  if (tokenBytes > kMaxTokenBytes) {
    error = "a hello announcing a token of " + bytesText(tokenBytes) +
            " (at most " + std::to_string(kMaxTokenBytes) + ")";
    return HelloState::Malformed;
  }
  if (hello.dataPort < 1 || hello.dataPort > 65535) {
    error = "a hello with data port " + std::to_string(hello.dataPort);
    return HelloState::Malformed;
  }
  size_t whole = kHelloHeaderBytes + tokenBytes;
  if (bytes.size() < whole) {
    more = whole - bytes.size();
    return HelloState::Partial;
  }
  if (bytes.size() > whole) {
    error = bytesText(bytes.size() - whole) + " after the hello";
    return HelloState::Malformed;
  }
  hello.token = std::string(bytes.substr(kHelloHeaderBytes));
  return HelloState::Whole;
}

std::string dcrt::detail::tcp::encodeReply(bool accepted,
                                           const std::string &body) {
  std::string out;
  put32(out, accepted ? 0 : 1);
  put32(out, static_cast<uint32_t>(body.size()));
  out += body;
  return out;
}

size_t dcrt::detail::tcp::maxAddressTableBytes(int worldSize) {
  return 16 + static_cast<size_t>(std::max(worldSize, 0)) * (8 + kMaxHostBytes);
}

bool dcrt::detail::tcp::parseReplyHeader(std::string_view header, int worldSize,
                                         bool &accepted, size_t &bodyBytes,
                                         std::string &error) {
  if (header.size() != kReplyHeaderBytes) {
    error = "a reply header of " + bytesText(header.size()) + " (" +
            std::to_string(kReplyHeaderBytes) + " expected)";
    return false;
  }
  uint32_t status = get32(header.data());
  bodyBytes = get32(header.data() + 4);
  if (status > 1) {
    error = "an answer that is no dcrt reply (status " +
            std::to_string(status) + ")";
    return false;
  }
  accepted = status == 0;
  size_t limit = accepted ? maxAddressTableBytes(worldSize) : kMaxRefusalBytes;
  if (bodyBytes > limit) {
    error = "a reply announcing " + bytesText(bodyBytes) + ", more than " +
            (accepted
                 ? "an address table of " + std::to_string(worldSize) + " ranks"
                 : std::string("a refusal")) +
            " can hold (" + std::to_string(limit) + ")";
    return false;
  }
  return true;
}

std::string dcrt::detail::tcp::printable(std::string_view text) {
  std::string out(text);
  for (char &c : out)
    if (c < 0x20 || c > 0x7e)
      c = '?';
  return out;
}

std::string
dcrt::detail::tcp::encodeAddressTable(uint64_t token,
                                      const std::vector<PeerAddress> &table) {
  std::string out;
  put32(out, kMagic);
  put64(out, token);
  put32(out, static_cast<uint32_t>(table.size()));
  for (const PeerAddress &entry : table) {
    put32(out, static_cast<uint32_t>(entry.port));
    put32(out, static_cast<uint32_t>(entry.host.size()));
    out += entry.host;
  }
  return out;
}

bool dcrt::detail::tcp::decodeAddressTable(std::string_view bytes,
                                           uint64_t &token,
                                           std::vector<PeerAddress> &table,
                                           std::string &error) {
  table.clear();
  size_t at = 16;
  if (bytes.size() < at || get32(bytes.data()) != kMagic) {
    error = "no table header";
    return false;
  }
  token = get64(bytes.data() + 4);
  uint32_t count = get32(bytes.data() + 12);
  // Each entry takes at least 9 bytes: a count the bytes cannot hold is
  // refused before anything is reserved for it.
  if (count > (bytes.size() - at) / 9) {
    error = "a table of " + std::to_string(count) + " entries in " +
            bytesText(bytes.size());
    return false;
  }
  table.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (bytes.size() - at < 8) {
      error = "entry " + std::to_string(i) + " of " + std::to_string(count) +
              " is cut short";
      return false;
    }
    PeerAddress entry;
    uint32_t port = get32(bytes.data() + at);
    uint32_t length = get32(bytes.data() + at + 4);
    at += 8;
    if (port < 1 || port > 65535) {
      error =
          "entry " + std::to_string(i) + " has port " + std::to_string(port);
      return false;
    }
    if (length == 0 || length > kMaxHostBytes) {
      error = "entry " + std::to_string(i) + " has a host of " +
              bytesText(length) + " (1 to " + std::to_string(kMaxHostBytes) +
              ")";
      return false;
    }
    if (bytes.size() - at < length) {
      error = "entry " + std::to_string(i) + " of " + std::to_string(count) +
              " is cut short";
      return false;
    }
    entry.port = static_cast<int>(port);
    entry.host = std::string(bytes.substr(at, length));
    at += length;
    table.push_back(entry);
  }
  if (at != bytes.size()) {
    error = bytesText(bytes.size() - at) + " after the table";
    return false;
  }
  return true;
}

std::string dcrt::detail::tcp::encodeMeshHello(uint32_t rank, uint64_t token) {
  std::string out;
  put32(out, kMagic);
  put32(out, rank);
  put64(out, token);
  return out;
}

bool dcrt::detail::tcp::parseMeshHello(std::string_view bytes, uint64_t token,
                                       uint32_t &rank, std::string &error) {
  if (bytes.size() != kMeshHelloBytes) {
    error = "a mesh hello of " + bytesText(bytes.size()) + " (" +
            std::to_string(kMeshHelloBytes) + " expected)";
    return false;
  }
  if (get32(bytes.data()) != kMagic) {
    error = "no dcrt mesh hello";
    return false;
  }
  if (get64(bytes.data() + 8) != token) {
    error = "a mesh hello without this job's token";
    return false;
  }
  rank = get32(bytes.data() + 4);
  return true;
}

void dcrt::detail::tcp::encodeFrameHeader(const FrameHeader &header,
                                          char out[kFrameHeaderBytes]) {
  std::string bytes;
  put32(bytes, header.kind);
  put32(bytes, header.sequence);
  put64(bytes, header.bytes);
  std::copy(bytes.begin(), bytes.end(), out);
}

FrameHeader
dcrt::detail::tcp::decodeFrameHeader(const char in[kFrameHeaderBytes]) {
  FrameHeader header;
  header.kind = get32(in);
  header.sequence = get32(in + 4);
  header.bytes = get64(in + 8);
  return header;
}
