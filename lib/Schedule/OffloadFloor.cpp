//===- OffloadFloor.cpp - offload candidates and the stall floor ---------===//
#include "dc/Schedule/OffloadFloor.h"

#include "dc/Analysis/BufferAliasing.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace dc;

std::vector<OffloadCandidate> dc::collectOffloadCandidates(
    func::FuncOp fn, const CostModel &costModel, const MemoryTimeline &timeline,
    const SimulationResult &sim, int64_t minBytes, int64_t keepLast) {
  Block &body = fn.getBody().front();
  std::vector<OffloadCandidate> candidates;
  for (Operation *op : timeline.getOps()) {
    // A buffer is offloaded whole, from the value that allocates it: a view
    // frees nothing while its buffer has other uses.
    if (isa<DCDialect>(op->getDialect()) || isa<tensor::EmptyOp>(op) ||
        getViewedOperand(op))
      continue;
    for (Value value : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type || getTypeBytes(type) < minBytes)
        continue;
      // Not offloaded already, and no use hands the buffer on (returns it
      // or writes it in place).
      SmallVector<OpOperand *> uses = getBufferUses(value);
      if (llvm::any_of(uses, [](OpOperand *use) {
            return isa<OffloadStartOp>(use->getOwner()) ||
                   handsOnItsBuffer(*use);
          }))
        continue;
      // The top-level ops touching it (through its views too), in order;
      // the widest idle gap.
      SmallVector<Operation *> touches{op};
      for (OpOperand *use : uses)
        touches.push_back(body.findAncestorOpInBlock(*use->getOwner()));
      llvm::sort(touches, [&](Operation *a, Operation *b) {
        return timeline.indexOf(a) < timeline.indexOf(b);
      });
      touches.erase(std::unique(touches.begin(), touches.end()), touches.end());
      int64_t bytes = getTypeBytes(type);
      double roundTrip = 2 * costModel.copySeconds(bytes);
      std::optional<OffloadCandidate> widest;
      for (size_t i = 0; i + 1 < touches.size(); ++i) {
        double idle = sim.ops[timeline.indexOf(touches[i + 1])].issue -
                      sim.ops[timeline.indexOf(touches[i])].end;
        // Both copies must fit in the gap, or offloading stalls compute.
        if (idle > roundTrip && (!widest || idle > widest->idleSeconds))
          widest =
              OffloadCandidate{value, touches[i], touches[i + 1], bytes, idle};
      }
      if (widest)
        candidates.push_back(*widest);
    }
  }
  // Keep the last `keepLast` (by where their gap begins) on the device.
  llvm::stable_sort(
      candidates, [&](const OffloadCandidate &a, const OffloadCandidate &b) {
        return timeline.indexOf(a.lastBefore) < timeline.indexOf(b.lastBefore);
      });
  size_t keep = std::min<size_t>(
      candidates.size(), static_cast<size_t>(std::max<int64_t>(keepLast, 0)));
  candidates.resize(candidates.size() - keep);
  return candidates;
}

std::optional<OffloadFloorAttr> dc::computeOffloadFloor(
    const CostModel &costModel, const MemoryTimeline &timeline,
    const SimulationResult &sim,
    const std::vector<OffloadCandidate> &candidates, int64_t budget) {
  size_t peak = timeline.getPeakIndex();
  int64_t excess = timeline.getPeakDeviceBytes() - budget;
  // Times as in a schedule where nothing stalls compute (prefetch, run
  // later, hides the gathers this early schedule still waits for): the
  // floor must hold for the final schedule too.
  std::vector<double> issue(sim.ops.size()), end(sim.ops.size());
  double stalls = 0;
  for (auto [i, op] : llvm::enumerate(sim.ops)) {
    issue[i] = op.issue - stalls;
    end[i] = issue[i] + (op.end - op.issue - op.stall);
    stalls += op.stall;
  }
  double peakTime = issue[peak];
  auto transfer = [&](int64_t bytes) {
    return costModel.copySeconds(bytes) - costModel.copySeconds(0);
  };
  double firstIdle = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, int64_t>> uses; // (use time, bytes)
  for (const OffloadCandidate &c : candidates) {
    size_t begin = timeline.indexOf(c.lastBefore);
    size_t last = timeline.indexOf(c.firstAfter);
    if (begin >= peak || peak >= last)
      continue;
    firstIdle = std::min(firstIdle, end[begin]);
    uses.push_back({issue[last], c.bytes});
  }
  if (uses.empty())
    return std::nullopt;
  double before = std::max(0.0, transfer(excess) - (peakTime - firstIdle));
  // The `excess` bytes used last, back in use order.
  llvm::sort(uses, [](auto a, auto b) { return a.first > b.first; });
  int64_t taken = 0;
  size_t count = 0;
  while (count < uses.size() && taken < excess) {
    uses[count].second = std::min(uses[count].second, excess - taken);
    taken += uses[count++].second;
  }
  uses.resize(count);
  double after = 0;
  int64_t delivered = 0;
  for (auto it = uses.rbegin(); it != uses.rend(); ++it) {
    delivered += it->second;
    after = std::max(after, transfer(delivered) - (it->first - peakTime));
  }
  return OffloadFloorAttr::get(timeline.getOps()[peak]->getContext(), excess,
                               llvm::APFloat(before + after));
}

std::optional<OffloadFloorAttr>
dc::computeJointFloor(const CostModel &costModel,
                      const MemoryTimeline &timeline,
                      const SimulationResult &sim,
                      const std::vector<OffloadCandidate> &offloadable,
                      std::vector<RecomputeCost> recomputable, int64_t budget) {
  size_t peak = timeline.getPeakIndex();
  int64_t peakBytes = timeline.getPeakDeviceBytes();
  int64_t excess = peakBytes - budget;
  if (excess <= 0)
    return std::nullopt;
  // What offload can move at all: the candidates idle across the peak.
  int64_t offloadBytes = 0;
  for (const OffloadCandidate &c : offloadable)
    if (timeline.indexOf(c.lastBefore) < peak &&
        peak < timeline.indexOf(c.firstAfter))
      offloadBytes += c.bytes;
  offloadBytes = std::min(offloadBytes, excess);
  // Cheapest seconds per byte first: the least time to recompute `bytes`.
  llvm::sort(recomputable, [](const RecomputeCost &a, const RecomputeCost &b) {
    return a.seconds * b.bytes < b.seconds * a.bytes;
  });
  auto recompute = [&](int64_t bytes) {
    double seconds = 0;
    for (const RecomputeCost &r : recomputable) {
      if (bytes <= 0)
        break;
      int64_t taken = std::min(bytes, r.bytes);
      seconds += r.seconds * static_cast<double>(taken) / r.bytes;
      bytes -= taken;
    }
    return bytes > 0 ? std::numeric_limits<double>::infinity() : seconds;
  };
  auto stall = [&](int64_t bytes) {
    if (bytes <= 0)
      return 0.0;
    std::optional<OffloadFloorAttr> floor = computeOffloadFloor(
        costModel, timeline, sim, offloadable, peakBytes - bytes);
    return floor ? floor->getStallSeconds().convertToDouble()
                 : std::numeric_limits<double>::infinity();
  };
  // Recomputation runs after the peak, before the uses reloads feed, so
  // it may hide reloads: the step grows by at least the larger of the two,
  // not their sum. The stall grows and the recomputation shrinks with the
  // bytes offloaded, so on [x_k, x_k+1] that is at least
  // max(stall(x_k), recompute(excess - x_k+1)): a bound from a grid, not
  // a sample of it.
  constexpr int kSteps = 256;
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k <= kSteps; ++k) {
    int64_t x = offloadBytes * k / kSteps;
    int64_t next = offloadBytes * std::min(k + 1, kSteps) / kSteps;
    best = std::min(best, std::max(stall(x), recompute(excess - next)));
  }
  if (!std::isfinite(best))
    return std::nullopt;
  return OffloadFloorAttr::get(timeline.getOps()[peak]->getContext(), excess,
                               llvm::APFloat(best));
}
