//===- StreamSimulator.h - predicted execution on four streams --*- C++ -*-===//
//
// Replays a step function's op order on four streams: compute (every compute
// op and every wait, in order), collective (all-gather, reduce-scatter,
// all-to-all, FIFO like one NCCL stream), host-to-device and device-to-host
// copies. A start op (dc.all_to_all_start included) is issued when the
// compute stream reaches it and runs when its stream is free; a wait (or
// dc.end_backward) stalls compute until its transfer is done, and the
// synchronous dc.all_to_all stalls it until the all-to-all ends. The stall time
// is the exposed communication (or copy) time, charged to the stream of the
// transfer that finished last.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_STREAMSIMULATOR_H
#define DC_ANALYSIS_STREAMSIMULATOR_H

#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/MemoryTimeline.h"

#include "llvm/Support/raw_ostream.h"

namespace dc {

struct SimulatedOp {
  mlir::Operation *op = nullptr;
  StreamKind stream = StreamKind::None;
  double issue = 0;  // when the compute stream reached it (s)
  double start = 0;  // when its stream started it
  double end = 0;    // when it finished
  double stall = 0;  // compute stall caused by this op (waits, all_to_all)
  int64_t bytes = 0; // OpCost::bytes
};

struct SimulationResult {
  double stepSeconds = 0;
  double computeSeconds = 0;           // busy time of the compute stream
  double collectiveSeconds = 0;        // busy time of the collective stream
  double copySeconds = 0;              // busy time of both copy streams
  double exposedCollectiveSeconds = 0; // compute stalled on collectives
  double exposedCopySeconds = 0;       // compute stalled on copies
  double copySlowdownSeconds = 0;      // compute added by copies beside it
  std::vector<SimulatedOp> ops;        // one per top-level op, in order
  /// Readiness time of each future value (when its transfer completes).
  llvm::DenseMap<mlir::Value, double> futureReady;
};

class StreamSimulator {
public:
  explicit StreamSimulator(const CostModel &costModel) : costModel(costModel) {}

  /// Simulates `fn` (whose op order `timeline` was built from).
  SimulationResult run(mlir::func::FuncOp fn,
                       const MemoryTimeline &timeline) const;
  /// The same with the ops' costs given (one per op of `timeline`, e.g.
  /// kept across trial edits that change few ops).
  SimulationResult run(const MemoryTimeline &timeline,
                       const std::vector<OpCost> &costs) const;

private:
  const CostModel &costModel;
};

/// Simulates one function again and again while a planning pass edits it.
/// Planning adds, moves and merges schedule ops but leaves compute ops as
/// they are, so the cost of every op seen before is kept and only new ops
/// are estimated. An op the pass erases must be forgotten first (its
/// address may be reused).
class IncrementalSimulation {
public:
  IncrementalSimulation(const CostModel &costModel, mlir::func::FuncOp fn)
      : costModel(costModel), fn(fn) {}

  SimulationResult run(const MemoryTimeline &timeline);
  void forget(mlir::Operation *op) { costs.erase(op); }

private:
  const CostModel &costModel;
  mlir::func::FuncOp fn;
  llvm::DenseMap<mlir::Operation *, OpCost> costs;
};

/// For each op index i (0..ops.size()), when `stream` has finished every op
/// issued before op i: the earliest a transfer issued at op i can start on
/// that FIFO stream.
std::vector<double> streamFreeBefore(const SimulationResult &result,
                                     StreamKind stream);

/// Writes the predicted streams as a Chrome trace (JSON, Perfetto-viewable):
/// one track per stream, one slice per op, times in microseconds. With the
/// `timeline` the simulation ran on, two counter tracks follow the live
/// device and host bytes (sampled where each op is issued), so the trace
/// shows where memory peaks against the streams.
void writeChromeTrace(const SimulationResult &result, llvm::StringRef fnName,
                      llvm::raw_ostream &os,
                      const MemoryTimeline *timeline = nullptr);

} // namespace dc

#endif // DC_ANALYSIS_STREAMSIMULATOR_H
