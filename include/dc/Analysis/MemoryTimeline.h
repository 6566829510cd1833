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

#include <vector>

namespace dc {

struct Buffer {
  mlir::Value value; // the value that names the buffer (future for async)
  int64_t bytes = 0;
  bool onHost = false;
  size_t begin = 0, end = 0; // op indices, inclusive
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
  int64_t getPeakDeviceBytes() const { return peakDevice; }
  size_t getPeakIndex() const { return peakIndex; }
  int64_t getPeakHostBytes() const { return peakHost; }
  /// Bytes live from the first op to the last (args, results).
  int64_t getBaseDeviceBytes() const { return baseDevice; }
  /// Base bytes plus the largest single op's need: the distinct device
  /// buffers one op reads or writes (operands, results, values its regions
  /// capture) that are not already in the base. No budget below it can work.
  int64_t getFloorBytes() const { return floorBytes; }
  /// Index of a top-level op of the function (asserts that it is one).
  size_t indexOf(mlir::Operation *op) const;

private:
  std::vector<mlir::Operation *> ops;
  llvm::DenseMap<mlir::Operation *, size_t> index;
  std::vector<Buffer> buffers;
  std::vector<int64_t> deviceBytes, hostBytes;
  int64_t peakDevice = 0, peakHost = 0, baseDevice = 0, floorBytes = 0;
  size_t peakIndex = 0;
};

} // namespace dc

#endif // DC_ANALYSIS_MEMORYTIMELINE_H
