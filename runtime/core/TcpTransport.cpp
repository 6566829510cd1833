//===- TcpTransport.cpp - collectives over a full mesh of sockets ---------===//
#include "TcpTransport.h"

#include "Streams.h"
#include "TcpMesh.h"
#include "TcpSocket.h"
#include "TcpWire.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>

using namespace dcrt;
using namespace dcrt::detail;
using namespace dcrt::detail::tcp;

namespace {
constexpr size_t kHeaderBytes = kFrameHeaderBytes;
/// A reduction goes in pieces of at most this many bytes per peer, which
/// bounds its scratch memory to (n-1) pieces.
constexpr int64_t kReducePieceBytes = int64_t(4) << 20;
/// Broadcasts above this size go as a scatter and an all-gather, so that
/// the root sends the payload about once instead of n-1 times.
constexpr int64_t kScatterBroadcastBytes = int64_t(256) << 10;

//===----------------------------------------------------------------------===//
// Sums
//===----------------------------------------------------------------------===//

template <typename T>
void sumInto(void *out, const std::vector<const char *> &parts, int64_t count) {
  T *result = static_cast<T *>(out);
  for (int64_t i = 0; i < count; ++i) {
    T total = reinterpret_cast<const T *>(parts[0])[i];
    for (size_t p = 1; p < parts.size(); ++p)
      total += reinterpret_cast<const T *>(parts[p])[i];
    result[i] = total;
  }
}

/// out[i] = parts[0][i] + parts[1][i] + ..., added in that order (`out` may
/// be one of the parts).
void sumParts(ElementType type, void *out,
              const std::vector<const char *> &parts, int64_t count,
              const char *what) {
  switch (type) {
  case ElementType::F32:
    return sumInto<float>(out, parts, count);
  case ElementType::F64:
    return sumInto<double>(out, parts, count);
  case ElementType::I32:
    return sumInto<int32_t>(out, parts, count);
  case ElementType::I64:
    return sumInto<int64_t>(out, parts, count);
  case ElementType::Byte:
    break;
  }
  fatal("internal error: %s: no sum of %s", what, elementTypeName(type));
}

//===----------------------------------------------------------------------===//
// Collectives over the mesh
//===----------------------------------------------------------------------===//

struct Group {
  std::vector<int> members; // world ranks by index
  int me = 0;               // this rank's index
};

/// One message of a collective step: to or from a peer (a world rank).
struct Transfer {
  int peer = 0;
  bool sending = false;
  char *data = nullptr;
  int64_t bytes = 0;
  char header[kHeaderBytes];
  int64_t done = 0; // header and payload bytes moved
};

class TcpTransport final : public Transport {
public:
  explicit TcpTransport(const TcpConfig &config);
  const char *name() const override { return "tcp"; }
  int addGroup(const std::vector<int> &members) override;
  void barrier(double seconds) override;
  void start(CommOp &op) override { pending.push_back(&op); }
  void progress(std::vector<CommOp *> &completed) override;

private:
  void run(CommOp &op);

  // Steps of collectives: `transfers` all proceed at once.
  void exchange(std::vector<Transfer> &transfers, const CommOp &op);
  void addSend(std::vector<Transfer> &transfers, int peer, const void *data,
               int64_t bytes, const CommOp &op);
  void addReceive(std::vector<Transfer> &transfers, int peer, void *data,
                  int64_t bytes, const CommOp &op);
  [[noreturn]] void peerLost(int peer, const CommOp &op,
                             const std::string &why);

  void allGatherv(const Group &group, char *buffer,
                  const std::vector<int64_t> &offsets,
                  const std::vector<int64_t> &sizes, const CommOp &op);
  void reduceScatter(const Group &group, const char *send, char *recv,
                     const std::vector<int64_t> &offsets,
                     const std::vector<int64_t> &counts, const CommOp &op);

  TcpConfig config;
  TcpMesh mesh;
  std::vector<Group> groups;
  std::vector<CommOp *> pending;
  uint32_t sequence = 0; // ops this rank issued: the same on every rank
  std::vector<std::vector<char>> scratch;
};

TcpTransport::TcpTransport(const TcpConfig &config)
    : config(config), mesh(config) {
  rank_ = config.rank;
  worldSize_ = config.worldSize;
  Group world;
  for (int r = 0; r < worldSize_; ++r)
    world.members.push_back(r);
  world.me = rank_;
  groups.push_back(world);
}

int TcpTransport::addGroup(const std::vector<int> &members) {
  Group group;
  group.members = members;
  auto found = std::find(members.begin(), members.end(), rank_);
  if (found == members.end())
    fatal("internal error: a group without this rank");
  group.me = static_cast<int>(found - members.begin());
  groups.push_back(group);
  return static_cast<int>(groups.size()) - 1;
}

void TcpTransport::barrier(double seconds) {
  // The exchange's own deadline (no progress for the timeout) bounds it.
  CommOp op;
  op.kind = CommKind::Barrier;
  op.name = "dcrt_init's barrier";
  double saved = config.timeoutSeconds;
  config.timeoutSeconds = seconds;
  run(op);
  config.timeoutSeconds = saved;
}

void TcpTransport::progress(std::vector<CommOp *> &completed) {
  // Blocking: the thread has nothing else to do while a collective runs.
  for (CommOp *op : pending) {
    run(*op);
    completed.push_back(op);
  }
  pending.clear();
}

[[noreturn]] void TcpTransport::peerLost(int peer, const CommOp &op,
                                         const std::string &why) {
  fatalPeerEnded(
      "tcp transport: lost the connection to rank %d (%s:%d) during %s: "
      "%s; rank %d ended (killed, crashed, or failed with its own error)",
      peer, mesh.addressOf(peer).host.c_str(), mesh.addressOf(peer).port,
      op.name, why.c_str(), peer);
}

void TcpTransport::addSend(std::vector<Transfer> &transfers, int peer,
                           const void *data, int64_t bytes, const CommOp &op) {
  Transfer transfer;
  transfer.peer = peer;
  transfer.sending = true;
  transfer.data = const_cast<char *>(static_cast<const char *>(data));
  transfer.bytes = bytes;
  FrameHeader header;
  header.kind = static_cast<uint32_t>(op.kind);
  header.sequence = sequence;
  header.bytes = static_cast<uint64_t>(bytes);
  encodeFrameHeader(header, transfer.header);
  transfers.push_back(transfer);
}

void TcpTransport::addReceive(std::vector<Transfer> &transfers, int peer,
                              void *data, int64_t bytes, const CommOp &op) {
  Transfer transfer;
  transfer.peer = peer;
  transfer.data = static_cast<char *>(data);
  transfer.bytes = bytes;
  transfers.push_back(transfer); // `op` is what its header must match
}

void TcpTransport::exchange(std::vector<Transfer> &transfers,
                            const CommOp &op) {
  // At most one send and one receive per peer in a step.
  std::vector<pollfd> entries;
  std::vector<int> sendOf, receiveOf; // by entry
  for (size_t i = 0; i < transfers.size(); ++i) {
    int fd = mesh.socketTo(transfers[i].peer);
    size_t e = 0;
    while (e < entries.size() && entries[e].fd != fd)
      ++e;
    if (e == entries.size()) {
      entries.push_back({fd, 0, 0});
      sendOf.push_back(-1);
      receiveOf.push_back(-1);
    }
    (transfers[i].sending ? sendOf : receiveOf)[e] = static_cast<int>(i);
  }
  auto finished = [](const Transfer &t) {
    return t.done == t.bytes + static_cast<int64_t>(kHeaderBytes);
  };
  size_t left = 0;
  for (Transfer &t : transfers)
    left += !finished(t);
  auto lastProgress = Clock::now();
  while (left > 0) {
    for (size_t e = 0; e < entries.size(); ++e) {
      entries[e].events = 0;
      if (sendOf[e] >= 0 && !finished(transfers[sendOf[e]]))
        entries[e].events |= POLLOUT;
      if (receiveOf[e] >= 0 && !finished(transfers[receiveOf[e]]))
        entries[e].events |= POLLIN;
    }
    int ready = poll(entries.data(), entries.size(), 1000);
    if (ready < 0 && errno != EINTR)
      fatal("tcp transport: poll failed in %s: %s", op.name,
            std::strerror(errno));
    if (ready <= 0) {
      double idle =
          std::chrono::duration<double>(Clock::now() - lastProgress).count();
      if (idle > config.timeoutSeconds) {
        std::vector<int> waiting;
        for (const Transfer &t : transfers)
          if (!finished(t) && std::find(waiting.begin(), waiting.end(),
                                        t.peer) == waiting.end())
            waiting.push_back(t.peer);
        std::sort(waiting.begin(), waiting.end());
        fatal("tcp transport: timed out after %g s in %s waiting for %s: a "
              "peer rank may have stalled or issued different collectives "
              "(DCRT_TIMEOUT_S sets the limit)",
              config.timeoutSeconds, op.name, nameRanks(waiting).c_str());
      }
      continue;
    }
    for (size_t e = 0; e < entries.size(); ++e) {
      short revents = entries[e].revents;
      if (!revents)
        continue;
      if (receiveOf[e] >= 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
        Transfer &t = transfers[receiveOf[e]];
        bool wasFinished = finished(t);
        while (!finished(t)) {
          ssize_t n;
          if (t.done < static_cast<int64_t>(kHeaderBytes))
            n = recv(entries[e].fd, t.header + t.done, kHeaderBytes - t.done,
                     0);
          else
            n = recv(entries[e].fd, t.data + (t.done - kHeaderBytes),
                     static_cast<size_t>(t.bytes + kHeaderBytes - t.done), 0);
          if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
          if (n <= 0)
            peerLost(t.peer, op,
                     n == 0 ? "it closed the connection"
                            : std::string(std::strerror(errno)));
          bool hadHeader = t.done >= static_cast<int64_t>(kHeaderBytes);
          t.done += n;
          lastProgress = Clock::now();
          if (!hadHeader && t.done >= static_cast<int64_t>(kHeaderBytes)) {
            // The payload goes into the buffer the receiver sized: only
            // the count it expects is taken.
            FrameHeader theirs = decodeFrameHeader(t.header);
            if (theirs.kind != static_cast<uint32_t>(op.kind) ||
                theirs.sequence != sequence ||
                theirs.bytes != static_cast<uint64_t>(t.bytes))
              fatal("tcp transport: the ranks issued different collectives: "
                    "rank %d sent %llu bytes of its collective #%u (%s) "
                    "where this rank, in %s (#%u, %s), expected %lld",
                    t.peer, static_cast<unsigned long long>(theirs.bytes),
                    theirs.sequence,
                    commKindName(static_cast<CommKind>(theirs.kind)), op.name,
                    sequence, commKindName(op.kind),
                    static_cast<long long>(t.bytes));
          }
        }
        if (!wasFinished && finished(t))
          --left;
      }
      if (sendOf[e] >= 0 && (revents & (POLLOUT | POLLHUP | POLLERR))) {
        Transfer &t = transfers[sendOf[e]];
        bool wasFinished = finished(t);
        while (!finished(t)) {
          ssize_t n;
          if (t.done < static_cast<int64_t>(kHeaderBytes))
            n = send(entries[e].fd, t.header + t.done, kHeaderBytes - t.done,
                     MSG_NOSIGNAL | (t.bytes > 0 ? MSG_MORE : 0));
          else
            n = send(entries[e].fd, t.data + (t.done - kHeaderBytes),
                     static_cast<size_t>(t.bytes + kHeaderBytes - t.done),
                     MSG_NOSIGNAL);
          if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
          if (n <= 0)
            peerLost(t.peer, op, std::strerror(errno));
          t.done += n;
          lastProgress = Clock::now();
        }
        if (!wasFinished && finished(t))
          --left;
      }
      // Hung up with nothing asked of it in this step: noticed when it is.
    }
  }
}

void TcpTransport::allGatherv(const Group &group, char *buffer,
                              const std::vector<int64_t> &offsets,
                              const std::vector<int64_t> &sizes,
                              const CommOp &op) {
  std::vector<Transfer> transfers;
  int n = static_cast<int>(group.members.size());
  for (int j = 0; j < n; ++j) {
    if (j == group.me)
      continue;
    addSend(transfers, group.members[j], buffer + offsets[group.me],
            sizes[group.me], op);
    addReceive(transfers, group.members[j], buffer + offsets[j], sizes[j], op);
  }
  exchange(transfers, op);
}

void TcpTransport::reduceScatter(const Group &group, const char *send,
                                 char *recv,
                                 const std::vector<int64_t> &offsets,
                                 const std::vector<int64_t> &counts,
                                 const CommOp &op) {
  // Block j (elements offsets[j] .. + counts[j] of `send`) goes to member
  // j; this rank sums the blocks it gets into `recv`, in member order, one
  // piece at a time. Pieces are at the same element positions on every
  // rank, so each piece is one message per pair.
  int n = static_cast<int>(group.members.size());
  int64_t size = elementSize(op.type);
  int64_t pieceCount = std::max<int64_t>(1, kReducePieceBytes / size);
  int64_t longest = *std::max_element(counts.begin(), counts.end());
  scratch.resize(n);
  std::vector<const char *> parts(n);
  for (int64_t begin = 0; begin < longest || begin == 0; begin += pieceCount) {
    std::vector<Transfer> transfers;
    int64_t mine = std::clamp<int64_t>(counts[group.me] - begin, 0, pieceCount);
    for (int j = 0; j < n; ++j) {
      if (j == group.me)
        continue;
      int64_t theirs = std::clamp<int64_t>(counts[j] - begin, 0, pieceCount);
      if (theirs > 0)
        addSend(transfers, group.members[j], send + (offsets[j] + begin) * size,
                theirs * size, op);
      if (mine > 0) {
        scratch[j].resize(static_cast<size_t>(mine * size));
        addReceive(transfers, group.members[j], scratch[j].data(), mine * size,
                   op);
      }
    }
    exchange(transfers, op);
    if (mine > 0) {
      for (int j = 0; j < n; ++j)
        parts[j] = j == group.me ? send + (offsets[j] + begin) * size
                                 : scratch[j].data();
      sumParts(op.type, recv + begin * size, parts, mine, op.name);
    }
    if (longest == 0)
      break;
  }
}

/// Splits `count` into `n` near-equal consecutive blocks.
void splitEvenly(int64_t count, int n, std::vector<int64_t> &offsets,
                 std::vector<int64_t> &sizes) {
  offsets.resize(n);
  sizes.resize(n);
  for (int j = 0; j < n; ++j) {
    offsets[j] = count * j / n;
    sizes[j] = count * (j + 1) / n - offsets[j];
  }
}

void TcpTransport::run(CommOp &op) {
  ++sequence;
  if (op.group < 0 || op.group >= static_cast<int>(groups.size()))
    fatal("internal error: %s has no group %d", op.name, op.group);
  const Group &group = groups[op.group];
  int n = static_cast<int>(group.members.size());
  bool rooted = op.kind == CommKind::Gather || op.kind == CommKind::Gatherv ||
                op.kind == CommKind::Broadcast;
  if (rooted && (op.root < 0 || op.root >= n))
    fatal("tcp transport: %s: root %d is not a rank of its group of %d",
          op.name, op.root, n);
  int64_t size = elementSize(op.type);
  int64_t block = op.count * size;
  const char *send = static_cast<const char *>(op.send);
  char *recv = static_cast<char *>(op.recv);
  std::vector<Transfer> transfers;
  std::vector<int64_t> offsets, sizes;
  switch (op.kind) {
  case CommKind::AllGather: {
    if (send != recv + group.me * block)
      std::memmove(recv + group.me * block, send, static_cast<size_t>(block));
    for (int j = 0; j < n; ++j) {
      offsets.push_back(j * block);
      sizes.push_back(block);
    }
    allGatherv(group, recv, offsets, sizes, op);
    return;
  }
  case CommKind::ReduceScatter: {
    for (int j = 0; j < n; ++j) {
      offsets.push_back(j * op.count);
      sizes.push_back(op.count);
    }
    reduceScatter(group, send, recv, offsets, sizes, op);
    return;
  }
  case CommKind::AllReduce: {
    // A reduce-scatter of near-equal blocks, then an all-gather of the
    // sums: every rank ends with the same bits.
    splitEvenly(op.count, n, offsets, sizes);
    reduceScatter(group, send, recv + offsets[group.me] * size, offsets, sizes,
                  op);
    for (int j = 0; j < n; ++j) {
      offsets[j] *= size;
      sizes[j] *= size;
    }
    allGatherv(group, recv, offsets, sizes, op);
    return;
  }
  case CommKind::AllToAll:
    for (int j = 0; j < n; ++j) {
      if (j == group.me) {
        std::memcpy(recv + j * block, send + j * block,
                    static_cast<size_t>(block));
        continue;
      }
      addSend(transfers, group.members[j], send + j * block, block, op);
      addReceive(transfers, group.members[j], recv + j * block, block, op);
    }
    exchange(transfers, op);
    return;
  case CommKind::Gather:
  case CommKind::Gatherv: {
    bool variable = op.kind == CommKind::Gatherv;
    if (group.me != op.root) {
      addSend(transfers, group.members[op.root], send, block, op);
    } else {
      for (int j = 0; j < n; ++j) {
        char *slot =
            variable ? recv + op.displacements[j] * size : recv + j * block;
        int64_t bytes = variable ? op.recvCounts[j] * size : block;
        if (j == group.me) {
          if (bytes != block)
            fatal("internal error: %s: the root's own count differs", op.name);
          if (slot != send)
            std::memmove(slot, send, static_cast<size_t>(block));
        } else {
          addReceive(transfers, group.members[j], slot, bytes, op);
        }
      }
    }
    exchange(transfers, op);
    return;
  }
  case CommKind::Barrier:
    for (int j = 0; j < n; ++j)
      if (j != group.me) {
        addSend(transfers, group.members[j], nullptr, 0, op);
        addReceive(transfers, group.members[j], nullptr, 0, op);
      }
    exchange(transfers, op);
    return;
  case CommKind::Broadcast: {
    if (block < kScatterBroadcastBytes || n <= 2) {
      if (group.me == op.root) {
        for (int j = 0; j < n; ++j)
          if (j != group.me)
            addSend(transfers, group.members[j], recv, block, op);
      } else {
        addReceive(transfers, group.members[op.root], recv, block, op);
      }
      exchange(transfers, op);
      return;
    }
    // Large: the root scatters near-equal pieces, then every member but
    // the root sends its piece to the others (the root has them all).
    splitEvenly(block, n, offsets, sizes);
    if (group.me == op.root) {
      for (int j = 0; j < n; ++j)
        if (j != group.me)
          addSend(transfers, group.members[j], recv + offsets[j], sizes[j], op);
    } else {
      addReceive(transfers, group.members[op.root], recv + offsets[group.me],
                 sizes[group.me], op);
    }
    exchange(transfers, op);
    transfers.clear();
    for (int j = 0; j < n; ++j) {
      if (j == group.me)
        continue;
      if (group.me == op.root) {
        // The root's own piece: nobody else has it yet.
        addSend(transfers, group.members[j], recv + offsets[group.me],
                sizes[group.me], op);
        continue;
      }
      addReceive(transfers, group.members[j], recv + offsets[j], sizes[j], op);
      if (j != op.root)
        addSend(transfers, group.members[j], recv + offsets[group.me],
                sizes[group.me], op);
    }
    exchange(transfers, op);
    return;
  }
  }
}
} // namespace

std::unique_ptr<Transport>
dcrt::detail::createTcpTransport(const TcpConfig &config) {
  return std::make_unique<TcpTransport>(config);
}

std::unique_ptr<Transport>
dcrt::detail::createTcpTransport(double timeoutSeconds) {
  return createTcpTransport(tcpConfigFromEnvironment(timeoutSeconds));
}
