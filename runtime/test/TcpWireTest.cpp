//===- TcpWireTest.cpp - the tcp transport's parsers on bad bytes ---------===//
//
// What arrives on a rendezvous or mesh port, and what a rank reads back from
// rank 0, goes through the parsers of TcpWire.h: each must take its own
// encoding back, refuse every truncation with a reason, and refuse a length
// it cannot hold before anything is read or allocated for it.
//
//===----------------------------------------------------------------------===//
#include "TcpWire.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace dcrt::detail;
using namespace dcrt::detail::tcp;

namespace {
Hello sampleHello() {
  Hello hello;
  hello.rank = 3;
  hello.worldSize = 8;
  hello.dataPort = 40123;
  hello.token = "0123456789abcdef0123456789abcdef";
  return hello;
}

/// Feeds `bytes` to parseHello as the rendezvous reads a connection: only
/// as many bytes as it asks for each time. Returns the final state and how
/// many bytes it took.
HelloState feed(const std::string &bytes, Hello &hello, size_t &taken,
                std::string &error) {
  std::string seen;
  size_t more = 0;
  for (;;) {
    HelloState state = parseHello(seen, hello, more, error);
    taken = seen.size();
    if (state != HelloState::Partial)
      return state;
    EXPECT_GT(more, 0u);
    if (seen.size() == bytes.size())
      return state;
    // One byte at a time: a sender may split its hello anywhere.
    seen.push_back(bytes[seen.size()]);
  }
}
} // namespace

//===----------------------------------------------------------------------===//
// The rendezvous hello
//===----------------------------------------------------------------------===//

TEST(TcpHello, RoundTrips) {
  Hello sent = sampleHello();
  std::string bytes = encodeHello(sent);
  EXPECT_EQ(bytes.size(), kHelloHeaderBytes + sent.token.size());
  Hello got;
  size_t more = 1;
  std::string error;
  ASSERT_EQ(parseHello(bytes, got, more, error), HelloState::Whole) << error;
  EXPECT_EQ(more, 0u);
  EXPECT_EQ(got.version, kVersion);
  EXPECT_EQ(got.rank, 3u);
  EXPECT_EQ(got.worldSize, 8u);
  EXPECT_EQ(got.dataPort, 40123u);
  EXPECT_EQ(got.token, sent.token);
  // Read as the rendezvous reads it, byte by byte: the same hello, and
  // not one byte more than it holds.
  size_t taken = 0;
  ASSERT_EQ(feed(bytes + "trailing", got, taken, error), HelloState::Whole);
  EXPECT_EQ(taken, bytes.size());
  EXPECT_EQ(got.token, sent.token);
}

TEST(TcpHello, EveryTruncationAsksForTheRest) {
  std::string bytes = encodeHello(sampleHello());
  for (size_t length = 0; length < bytes.size(); ++length) {
    Hello hello;
    size_t more = 0;
    std::string error;
    EXPECT_EQ(parseHello(bytes.substr(0, length), hello, more, error),
              HelloState::Partial)
        << "a prefix of " << length << " bytes";
    // Never more than the hello still lacks.
    EXPECT_GE(more, 1u);
    EXPECT_LE(length + more, bytes.size()) << "a prefix of " << length;
  }
}

TEST(TcpHello, AStrangerIsKnownByItsFirstByte) {
  Hello hello;
  size_t more = 0;
  std::string error;
  EXPECT_EQ(parseHello("G", hello, more, error), HelloState::Foreign);
  EXPECT_EQ(parseHello("GET / HTTP/1.0\r\n\r\n", hello, more, error),
            HelloState::Foreign);
  std::string magic = encodeHello(sampleHello()).substr(0, 4);
  magic[3] ^= 0x40;
  EXPECT_EQ(parseHello(magic, hello, more, error), HelloState::Foreign);
}

TEST(TcpHello, AnOversizedTokenIsRefusedBeforeItArrives) {
  // The header alone announces 4 GiB of token: refused with no byte of
  // it read (the rendezvous would otherwise wait for, or hold, them).
  std::string header = encodeHello(sampleHello()).substr(0, 20);
  put32(header, 0xffffffffu);
  Hello hello;
  size_t more = 0;
  std::string error;
  EXPECT_EQ(parseHello(header, hello, more, error), HelloState::Malformed);
  EXPECT_EQ(more, 0u);
  EXPECT_NE(error.find("a token of 4294967295 bytes (at most 256)"),
            std::string::npos)
      << error;
  // The longest token allowed is a hello.
  Hello longest = sampleHello();
  longest.token.assign(kMaxTokenBytes, 'k');
  EXPECT_EQ(parseHello(encodeHello(longest), hello, more, error),
            HelloState::Whole)
      << error;
  longest.token.push_back('k');
  EXPECT_EQ(parseHello(encodeHello(longest), hello, more, error),
            HelloState::Malformed);
}

TEST(TcpHello, RejectsBytesAfterItAndABadPort) {
  Hello hello;
  size_t more = 0;
  std::string error;
  std::string bytes = encodeHello(sampleHello());
  EXPECT_EQ(parseHello(bytes + "xy", hello, more, error),
            HelloState::Malformed);
  EXPECT_NE(error.find("2 bytes after the hello"), std::string::npos) << error;
  for (uint32_t port : {0u, 65536u}) {
    Hello bad = sampleHello();
    bad.dataPort = port;
    EXPECT_EQ(parseHello(encodeHello(bad), hello, more, error),
              HelloState::Malformed)
        << port;
    EXPECT_NE(error.find("data port " + std::to_string(port)),
              std::string::npos)
        << error;
  }
}

TEST(TcpHello, AnotherVersionIsWholeAfterItsVersion) {
  // A rank of another libdcrt gets told why, whatever its hello holds.
  std::string bytes;
  put32(bytes, kMagic);
  put32(bytes, 1);
  Hello hello;
  size_t more = 0;
  std::string error;
  EXPECT_EQ(parseHello(bytes, hello, more, error), HelloState::Whole);
  EXPECT_EQ(hello.version, 1u);
}

//===----------------------------------------------------------------------===//
// Rank 0's reply
//===----------------------------------------------------------------------===//

TEST(TcpReply, BoundsTheBodyBeforeReadingIt) {
  bool accepted = false;
  size_t body = 0;
  std::string error;
  std::string reply = encodeReply(true, "table");
  ASSERT_TRUE(parseReplyHeader(reply.substr(0, kReplyHeaderBytes), 4, accepted,
                               body, error))
      << error;
  EXPECT_TRUE(accepted);
  EXPECT_EQ(body, 5u);
  reply = encodeReply(false, "why");
  ASSERT_TRUE(parseReplyHeader(reply.substr(0, kReplyHeaderBytes), 4, accepted,
                               body, error));
  EXPECT_FALSE(accepted);
  EXPECT_EQ(body, 3u);

  // A 4 GiB table, or refusal, is refused from its 8-byte header.
  std::string huge;
  put32(huge, 0);
  put32(huge, 0xffffffffu);
  EXPECT_FALSE(parseReplyHeader(huge, 2, accepted, body, error));
  EXPECT_NE(error.find("a reply announcing 4294967295 bytes, more than an "
                       "address table of 2 ranks can hold (" +
                       std::to_string(maxAddressTableBytes(2)) + ")"),
            std::string::npos)
      << error;
  std::string longRefusal;
  put32(longRefusal, 1);
  put32(longRefusal, static_cast<uint32_t>(kMaxRefusalBytes + 1));
  EXPECT_FALSE(parseReplyHeader(longRefusal, 2, accepted, body, error));
  EXPECT_NE(error.find("more than a refusal can hold"), std::string::npos)
      << error;
  // The bound is that of the largest table: one of it passes.
  std::vector<PeerAddress> widest(3, {std::string(kMaxHostBytes, 'h'), 65535});
  std::string table = encodeAddressTable(1, widest);
  EXPECT_EQ(table.size(), maxAddressTableBytes(3));
  EXPECT_TRUE(parseReplyHeader(encodeReply(true, table).substr(0, 8), 3,
                               accepted, body, error))
      << error;
}

TEST(TcpReply, RejectsWhatIsNoReply) {
  bool accepted = false;
  size_t body = 0;
  std::string error;
  // An HTTP server, say, where rank 0 was expected.
  EXPECT_FALSE(parseReplyHeader("HTTP/1.1", 2, accepted, body, error));
  EXPECT_NE(error.find("no dcrt reply (status"), std::string::npos) << error;
  EXPECT_FALSE(parseReplyHeader("short", 2, accepted, body, error));
  EXPECT_NE(error.find("a reply header of 5 bytes (8 expected)"),
            std::string::npos)
      << error;
}

TEST(TcpReply, QuotesOnlyPrintableText) {
  EXPECT_EQ(printable(std::string("ok\x1b[2J\n\xff", 8)), "ok?[2J??");
}

//===----------------------------------------------------------------------===//
// The address table
//===----------------------------------------------------------------------===//

TEST(TcpAddressTable, RoundTrips) {
  std::vector<PeerAddress> table = {
      {"10.0.0.1", 29500}, {"fe80::1", 1}, {"node-07.cluster", 65535}};
  std::string bytes = encodeAddressTable(0x0123456789abcdefULL, table);
  uint64_t token = 0;
  std::vector<PeerAddress> decoded;
  std::string error;
  ASSERT_TRUE(decodeAddressTable(bytes, token, decoded, error)) << error;
  EXPECT_EQ(token, 0x0123456789abcdefULL);
  EXPECT_EQ(decoded, table);
}

TEST(TcpAddressTable, RejectsMalformedTables) {
  std::vector<PeerAddress> table = {{"10.0.0.1", 29500}, {"10.0.0.2", 4000}};
  std::string bytes = encodeAddressTable(7, table);
  uint64_t token = 0;
  std::vector<PeerAddress> decoded;
  std::string error;
  // Every strict prefix is refused, and so is a longer one.
  for (size_t length = 0; length < bytes.size(); ++length) {
    error.clear();
    EXPECT_FALSE(
        decodeAddressTable(bytes.substr(0, length), token, decoded, error))
        << "a prefix of " << length << " bytes was accepted";
    EXPECT_FALSE(error.empty()) << "a prefix of " << length;
  }
  EXPECT_FALSE(decodeAddressTable(bytes + "x", token, decoded, error));
  EXPECT_NE(error.find("1 byte after the table"), std::string::npos) << error;
  std::string badPort = encodeAddressTable(7, {{"10.0.0.1", 0}});
  EXPECT_FALSE(decodeAddressTable(badPort, token, decoded, error));
  EXPECT_NE(error.find("entry 0 has port 0"), std::string::npos) << error;
  std::string badMagic = bytes;
  badMagic[0] ^= 1;
  EXPECT_FALSE(decodeAddressTable(badMagic, token, decoded, error));
}

TEST(TcpAddressTable, RejectsOversizedCountsAndHosts) {
  uint64_t token = 0;
  std::vector<PeerAddress> decoded;
  std::string error;
  // 4 billion entries announced in 16 bytes: refused before any is read.
  std::string header;
  put32(header, kMagic);
  put64(header, 7);
  put32(header, 0xffffffffu);
  EXPECT_FALSE(decodeAddressTable(header, token, decoded, error));
  EXPECT_NE(error.find("a table of 4294967295 entries in 16 bytes"),
            std::string::npos)
      << error;
  EXPECT_TRUE(decoded.empty());
  // A host of 4 GiB announced: refused, not read.
  std::string bytes = header.substr(0, 12);
  put32(bytes, 1);
  put32(bytes, 80);
  put32(bytes, 0xffffffffu);
  bytes += "x";
  EXPECT_FALSE(decodeAddressTable(bytes, token, decoded, error));
  EXPECT_NE(error.find("entry 0 has a host of 4294967295 bytes (1 to 255)"),
            std::string::npos)
      << error;
  std::string tooLong =
      encodeAddressTable(7, {{std::string(kMaxHostBytes + 1, 'h'), 80}});
  EXPECT_FALSE(decodeAddressTable(tooLong, token, decoded, error));
  std::string empty = encodeAddressTable(7, {{"", 80}});
  EXPECT_FALSE(decodeAddressTable(empty, token, decoded, error));
}

//===----------------------------------------------------------------------===//
// The mesh hello and the collectives' frames
//===----------------------------------------------------------------------===//

TEST(TcpMeshHello, TakesOnlyThisJobsToken) {
  uint32_t rank = 0;
  std::string error;
  std::string bytes = encodeMeshHello(5, 0xfeedULL);
  ASSERT_TRUE(parseMeshHello(bytes, 0xfeedULL, rank, error)) << error;
  EXPECT_EQ(rank, 5u);
  EXPECT_FALSE(parseMeshHello(bytes, 0xbeefULL, rank, error));
  EXPECT_NE(error.find("without this job's token"), std::string::npos) << error;
  for (size_t length = 0; length < bytes.size(); ++length)
    EXPECT_FALSE(
        parseMeshHello(bytes.substr(0, length), 0xfeedULL, rank, error))
        << length;
  EXPECT_FALSE(parseMeshHello(bytes + "x", 0xfeedULL, rank, error));
  std::string noMagic = bytes;
  noMagic[1] ^= 1;
  EXPECT_FALSE(parseMeshHello(noMagic, 0xfeedULL, rank, error));
  EXPECT_NE(error.find("no dcrt mesh hello"), std::string::npos) << error;
}

TEST(TcpFrameHeader, RoundTrips) {
  FrameHeader header;
  header.kind = 3;
  header.sequence = 0x89abcdefu;
  header.bytes = 0x0123456789abcdefULL;
  char bytes[kFrameHeaderBytes];
  encodeFrameHeader(header, bytes);
  EXPECT_EQ(decodeFrameHeader(bytes), header);
  EXPECT_EQ(get32(bytes + 4), 0x89abcdefu);
}
