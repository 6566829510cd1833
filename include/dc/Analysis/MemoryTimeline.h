//===- MemoryTimeline.h - device and host bytes live at each op -*- C++ -*-===//
//
// The body of a step function, in op order, is its execution order. Each
// buffer lives over an interval of op indices:
//  - a tensor from its def to its last use; a use by a start op
//    (reduce-scatter, offload, gather, reload) lasts until that start's
//    future is waited;
//  - an async transfer's destination from its start op to the last use of
//    the value its wait yields (for a gather or a reload: its dc.release,
//    which the offload passes place after the reloaded value's last use;
//    for a persistent gather or one without a release: the end of the
//    function);
//  - function arguments and returned values for the whole function.
// Values that allocate nothing share their source's buffer: the results of
// dc.wait / dc.end_backward (the transfer's destination) and of views
// (getViewedOperand: reshapes, casts, slices); a
// destination-style op's result and a loop's (scf.for) result share their
// init's buffer when the init is an op's result used nowhere else, or (a
// destination-style op's) read only before it (isLastReadBeforeInPlaceWrite):
// updated in place, as One-Shot Bufferize does. Uses inside a
// nested region count at the enclosing top-level op. Host values (!dc.host,
// and futures of them) are counted apart from device bytes.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_MEMORYTIMELINE_H
#define DC_ANALYSIS_MEMORYTIMELINE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <vector>

namespace dc {

struct Buffer {
  mlir::Value value; // the value that names the buffer (future for async)
  int64_t bytes = 0;
  bool onHost = false;
  size_t begin = 0, end = 0;  // op indices, inclusive
  bool wholeFunction = false; // an argument: live from the first op to the last
};

class MemoryTimeline {
public:
  /// Builds the timeline of `fn`'s single block; fails (with a diagnostic)
  /// on dynamic shapes or a body of more than one block.
  static mlir::FailureOr<MemoryTimeline> compute(mlir::func::FuncOp fn);
  /// Whether compute() would succeed on `fn`, checked quietly: a pass that
  /// only improves a plannable step skips the others and leaves the error
  /// to the planners.
  static bool canCompute(mlir::func::FuncOp fn);

  /// Top-level ops of the body, in order (the index space of everything).
  const std::vector<mlir::Operation *> &getOps() const { return ops; }
  const std::vector<Buffer> &getBuffers() const { return buffers; }
  /// Live device/host bytes while op `i` executes.
  int64_t deviceBytesAt(size_t i) const { return deviceBytes[i]; }
  int64_t hostBytesAt(size_t i) const { return hostBytes[i]; }
  int64_t getPeakDeviceBytes() const {
    refreshPeaks();
    return peakDevice;
  }
  size_t getPeakIndex() const {
    refreshPeaks();
    return peakIndex;
  }
  int64_t getPeakHostBytes() const {
    refreshPeaks();
    return peakHost;
  }
  /// Bytes live from the first op to the last (args, results).
  int64_t getBaseDeviceBytes() const { return baseDevice; }
  /// Base bytes plus the largest single op's need: the distinct device
  /// buffers one op reads or writes (operands, results, values its regions
  /// capture) that are not already in the base. No budget below it can work.
  int64_t getFloorBytes() const { return floorBytes; }
  /// Index of a top-level op of the function (asserts that it is one).
  size_t indexOf(mlir::Operation *op) const;
  /// The buffer `value` names or shares (a view's, a wait's, an in-place
  /// result's), if any.
  std::optional<size_t> findBuffer(mlir::Value value) const;

  /// Edits for a planner that places many ops (the offloader places
  /// thousands on a 70B step, and a whole timeline reads every op): it
  /// states what each of its edits does to the buffers instead of a
  /// recompute after each; the bytes follow in the ops the edit spans, the
  /// peaks when next read. An inserted op the caller has placed in the IR;
  /// a moved one the move places. equalsRecomputed checks the edits against
  /// compute() (the offloader's check-timeline-edits).
  ///
  /// `op`, placed in the IR before the op at index `at` (or at the end),
  /// takes index `at`: the ops and the buffer bounds from `at` on shift up;
  /// it is live with the buffers live across it.
  void insertOp(mlir::Operation *op, size_t at);
  /// Moves the op at `from` to just before the op at `to` (or to the end),
  /// in the IR and here: the ops between shift by one, and so do the bounds
  /// that were at them; a bound at the moved op moves with it (the buffers
  /// it makes or reads last).
  void moveOp(size_t from, size_t to);
  /// A buffer the edits made (a transfer's destination).
  void addBuffer(const Buffer &buffer);
  /// Where buffer `id` is last live (its last reader moved or was replaced).
  void setBufferEnd(size_t id, size_t end);
  /// True if this timeline is the one compute(fn) gives (ops, bytes, peaks).
  bool equalsRecomputed(mlir::func::FuncOp fn) const;

private:
  /// The bytes live at each op and the peaks, from the buffers.
  void sweep();
  /// Adds `bytes` to the device or host bytes of ops [begin, end].
  void addLive(bool onHost, size_t begin, size_t end, int64_t bytes);
  /// The device and host bytes of the buffers live at op `i`.
  std::pair<int64_t, int64_t> liveAt(size_t i) const;
  void refreshPeaks() const;

  std::vector<mlir::Operation *> ops;
  llvm::DenseMap<mlir::Operation *, size_t> index;
  std::vector<Buffer> buffers;
  llvm::DenseMap<mlir::Value, unsigned> bufferByValue;
  std::vector<int64_t> deviceBytes, hostBytes;
  mutable int64_t peakDevice = 0, peakHost = 0;
  mutable size_t peakIndex = 0;
  mutable bool peaksStale = false; // edited since the peaks were found
  int64_t baseDevice = 0, floorBytes = 0;
};

} // namespace dc

#endif // DC_ANALYSIS_MEMORYTIMELINE_H
